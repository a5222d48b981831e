"""R24, R25: hostile input against a real ``python -m acp_fast demo`` over pipes.

One long-lived agent (``--max-line-bytes 1 MiB``) takes almost every case,
in whatever order they run, and must exit cleanly after the last;
each case sends its bad input and a valid request in one write, then checks
the exact error and that the very next message answers the valid request
(control traffic is answered in arrival order, R01). A second agent at the
default 64 MiB limit is streamed a 200 MiB line. Memory is read from
``/proc/<pid>/status`` (VmHWM is the peak resident size, so it does not depend
on when it is read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.helpers import AgentProcess

pytestmark = pytest.mark.slow

MiB = 1 << 20
SMALL_LIMIT = 1 * MiB
PROBE = b'{"jsonrpc":"2.0","id":"probe","method":"session/list"}\n'


@pytest.fixture(scope="module")
def agent() -> Iterator[AgentProcess]:
    """One agent for every case, in any order; after the last one it must still serve and exit cleanly.

    The exit check lives here, not in a test: a test that closed stdin would
    end the agent for every case that happened to run after it.
    """
    with AgentProcess("demo", "--max-line-bytes", str(SMALL_LIMIT), "--pace-ms", "1") as proc:
        proc.initialize()
        yield proc
        _survived_and_exits_cleanly(proc)


def _survived_and_exits_cleanly(agent: AgentProcess) -> None:
    _silent_then_served(agent, b"")  # still serving
    agent.close_stdin()
    assert agent.wait() == 0
    assert agent.no_more_output() == []
    assert "Traceback" not in agent.stderr, agent.stderr[-3000:]
    # Every stdout line is one JSON-RPC message, nothing else ever reached it.
    assert all(orjson.loads(line)["jsonrpc"] == "2.0" for line in agent.stdout_lines)


def _served(agent: AgentProcess) -> None:
    msg = agent.next()
    assert msg.get("id") == "probe" and "result" in msg, msg


def _error_then_served(agent: AgentProcess, bad: bytes, code: int, id: Any = None) -> dict[str, Any]:
    """Send ``bad`` then the probe; the next message is the error, the one after the probe's answer."""
    agent.send_raw(bad + b"\n" + PROBE)
    err = agent.next()
    assert isinstance(err, dict), err
    assert err.get("id", "missing") == id and err["error"]["code"] == code, err
    assert set(err) == {"jsonrpc", "id", "error"} and err["jsonrpc"] == "2.0", err
    _served(agent)
    return err


def _silent_then_served(agent: AgentProcess, bad: bytes) -> None:
    """Send ``bad`` then the probe; nothing answers ``bad``, so the next message is the probe's."""
    agent.send_raw(bad + b"\n" + PROBE)
    _served(agent)


def _req(id: Any, method: str = "session/list", **extra: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id, "method": method, **extra})


# -- R24: not JSON, not a message ---------------------------------------------------------
def test_r24_malformed_json_gets_parse_error_with_null_id(agent: AgentProcess) -> None:
    for bad in (b"{bad json", b'{"jsonrpc":"2.0","id":1,', b"}", b'{"id":1}{"id":2}'):
        err = _error_then_served(agent, bad, -32700)
        assert err["error"]["message"].startswith("Parse error")


def test_r24_json_array_is_refused_as_unsupported_batch(agent: AgentProcess) -> None:
    for bad in (b"[]", b"[1,2]", b'[{"jsonrpc":"2.0","id":1,"method":"session/list"}]'):
        err = _error_then_served(agent, bad, -32600)
        assert "batches are not supported" in err["error"]["message"]


@pytest.mark.parametrize("scalar", [b"1", b"-2.5", b'"x"', b"null", b"true", b"false"])
def test_r24_json_scalar_gets_invalid_request(agent: AgentProcess, scalar: bytes) -> None:
    err = _error_then_served(agent, scalar, -32600)
    assert "expected a JSON object" in err["error"]["message"]


def test_r24_wrong_or_missing_jsonrpc_version_gets_invalid_request_with_its_id(agent: AgentProcess) -> None:
    for i, version in enumerate(['"1.0"', "2.0", "null", '"2.0 "']):
        bad = b'{"jsonrpc":%s,"id":%d,"method":"session/list"}' % (version.encode(), i)
        _error_then_served(agent, bad, -32600, i)
    _error_then_served(agent, b'{"id":"no-version","method":"session/list"}', -32600, "no-version")


# -- R24: ids of every type -----------------------------------------------------------------
@pytest.mark.parametrize(
    "rid",
    [0, 1, -1, 2**63 - 1, -(2**63), "", "x", "ünïcødé ✓", "a\u0000b", "9" * 200],
    ids=repr,
)
def test_r24_valid_id_is_echoed_exactly(agent: AgentProcess, rid: Any) -> None:
    agent.send_raw(_req(rid) + b"\n")
    msg = agent.next()
    assert msg["id"] == rid and type(msg["id"]) is type(rid) and "result" in msg, msg


def test_r24_huge_string_id_is_echoed(agent: AgentProcess) -> None:
    rid = "i" * (256 * 1024)
    agent.send_raw(_req(rid) + b"\n" + PROBE)
    msg = agent.next()
    assert msg["id"] == rid and "result" in msg
    _served(agent)


@pytest.mark.parametrize(
    "raw_id",
    [b"null", b"1.5", b"1e3", b"1180591620717411303424", b"-9223372036854775809", b"true", b"{}", b"[1]"],
)
def test_r24_unusable_id_gets_invalid_request_with_null_id(agent: AgentProcess, raw_id: bytes) -> None:
    bad = b'{"jsonrpc":"2.0","id":%s,"method":"session/list"}' % raw_id
    err = _error_then_served(agent, bad, -32600, None)
    assert "id" in err["error"]["message"]


def test_r24_duplicate_of_an_in_flight_id_is_refused_and_the_first_still_answers(
    agent: AgentProcess,
) -> None:
    sid = agent.new_session()
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 1000000 5"}]}
    long_prompt = _req("dup", "session/prompt", params=params)
    # The prompt runs for hours unless cancelled, so "dup" is in flight when its twin arrives.
    agent.send_raw(long_prompt + b"\n" + _req("dup") + b"\n")
    before, dup_err = agent.until_response("dup")
    assert dup_err["error"]["code"] == -32600 and "already in flight" in dup_err["error"]["message"], dup_err
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    updates, first = agent.until_response("dup")
    assert first["result"] == {"stopReason": "cancelled"}, first
    assert all(u.get("method") == "session/update" for u in before + updates)
    agent.send_raw(PROBE)
    _served(agent)


# -- R24: well-formed JSON, wrong shape ------------------------------------------------------
def test_r24_request_without_method_gets_invalid_request(agent: AgentProcess) -> None:
    _error_then_served(agent, b'{"jsonrpc":"2.0","id":"m1"}', -32600, "m1")
    _error_then_served(agent, b'{"jsonrpc":"2.0","id":"m2","method":7}', -32600, "m2")
    _error_then_served(agent, b'{"jsonrpc":"2.0","id":"m3","method":null}', -32600, "m3")


def test_r24_params_that_are_not_an_object_are_refused(agent: AgentProcess) -> None:
    # Not an object or array: refused by the envelope check.
    for i, params in enumerate([b'"str"', b"1", b"true"]):
        bad = b'{"jsonrpc":"2.0","id":"p%d","method":"session/list","params":%s}' % (i, params)
        _error_then_served(agent, bad, -32600, f"p{i}")
    # An array is a valid JSON-RPC shape, but ACP methods take objects: bad params.
    err = _error_then_served(agent, b'{"jsonrpc":"2.0","id":"pa","method":"session/list","params":[1]}', -32602, "pa")
    assert "expected an object" in err["error"]["message"]


def test_r24_unknown_method_gets_method_not_found(agent: AgentProcess) -> None:
    for i, method in enumerate(["nope/x", "session/nope", "_ext/unknown", "a\u0000b", ""]):
        err = _error_then_served(agent, _req(f"u{i}", method), -32601, f"u{i}")
        assert err["error"]["message"].startswith("Method not found")


def test_r06_r24_notifications_are_never_answered(agent: AgentProcess) -> None:
    for note in (
        {"jsonrpc": "2.0", "method": "nope/x"},
        {"jsonrpc": "2.0", "method": "_ext/notify", "params": {"a": 1}},
        {"jsonrpc": "2.0", "method": "session/cancel"},  # malformed cancel: logged, dropped
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such-session"}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "never-sent"}},
    ):
        _silent_then_served(agent, orjson.dumps(note))


def test_r24_response_to_an_id_never_sent_is_dropped(agent: AgentProcess) -> None:
    _silent_then_served(agent, b'{"jsonrpc":"2.0","id":999,"result":{}}')
    _silent_then_served(agent, b'{"jsonrpc":"2.0","id":"zz","error":{"code":1,"message":"x"}}')
    _silent_then_served(agent, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}')


# -- R25: bytes that are not UTF-8 text, NULs, nesting, floods --------------------------------
def test_r25_invalid_utf8_is_a_parse_error(agent: AgentProcess) -> None:
    for bad in (
        b'{"jsonrpc":"2.0","id":8,"method":"\xff"}',
        b'{"jsonrpc":"2.0","id":8,"method":"\xc0\xaf"}',  # overlong encoding
        b'{"jsonrpc":"2.0","id":8,"method":"\xed\xa0\x80"}',  # encoded surrogate
        b'{"jsonrpc":"2.0","id":8,"method":"\\ud800"}',  # lone escaped surrogate
        b"\xfe\xff",
    ):
        _error_then_served(agent, bad, -32700)


def test_r25_nul_bytes_are_parse_errors_unless_escaped(agent: AgentProcess) -> None:
    for bad in (b"\x00", b"\x00\x00\x00", b'{"jsonrpc":"2.0","id":9,"method":"a\x00b"}', _req(9) + b"\x00"):
        _error_then_served(agent, bad, -32700)
    err = _error_then_served(agent, _req("nul", "a\u0000b"), -32601, "nul")
    assert err["error"]["data"] == {"method": "a\u0000b"}


def test_r25_deeply_nested_json_is_a_parse_error_and_moderate_nesting_is_fine(agent: AgentProcess) -> None:
    _error_then_served(agent, b"[" * 100_000 + b"]" * 100_000, -32700)
    _error_then_served(agent, b'{"a":' * 5000 + b"1" + b"}" * 5000, -32700)
    _error_then_served(agent, b"[" * 100_000, -32700)  # never closed
    nested = b"[" * 300 + b"]" * 300
    agent.send_raw(b'{"jsonrpc":"2.0","id":"deep","method":"session/list","params":{"x":%s}}\n' % nested)
    msg = agent.next()
    assert msg["id"] == "deep" and "result" in msg, msg


def test_r25_a_million_empty_lines_are_skipped(agent: AgentProcess) -> None:
    agent.send_raw(b"\n" * 1_000_000 + b"\r\n" * 1000 + PROBE)
    _served(agent)


def test_r24_whitespace_only_lines_are_skipped_like_empty_lines(agent: AgentProcess) -> None:
    blank = b" \n\t\n \t \r\n\r\n\r\r\n \r\n"  # a lone \r is what a Windows client's blank line leaves
    agent.send_raw(blank * 10_000 + b" " * 4096 + b"\n" + PROBE)
    _served(agent)  # no -32700 came first
    _error_then_served(agent, b" x \r", -32700)  # whitespace around anything else is still a line


def test_r24_valid_json_beyond_the_decoder_limits_is_a_parse_error(agent: AgentProcess) -> None:
    huge = b'{"jsonrpc":"2.0","id":"huge","method":"session/list","params":{"n":%s}}' % (b"9" * 1_000_000)
    _error_then_served(agent, huge, -32700)  # RFC 8259 section 9 lets a parser set such limits


def test_r25_200_mib_line_at_a_1_mib_limit_is_refused_with_its_id(agent: AgentProcess) -> None:
    base = agent.status("VmRSS")
    agent.send_raw(b'{"jsonrpc":"2.0","id":"big","method":"session/list","params":{"pad":"')
    chunk = b"a" * MiB
    for _ in range(200):
        agent.send_raw(chunk)
    agent.send_raw(b'"}}\n' + PROBE)
    err = agent.next()
    assert err["id"] == "big" and err["error"]["code"] == -32600, err
    assert f"limit of {SMALL_LIMIT} bytes" in err["error"]["message"]
    _served(agent)
    # Discarded as it streamed: the peak never held more than a few MiB of it.
    assert agent.status("VmHWM") - base < 16 * 1024, (base, agent.status("VmHWM"))


def test_r25_oversized_line_without_a_recoverable_id_is_dropped_silently(agent: AgentProcess) -> None:
    big = b'{"jsonrpc":"2.0","params":{"pad":"' + b"a" * (2 * MiB) + b'"},"id":"late"}'
    _silent_then_served(agent, big)
    _silent_then_served(agent, b"x" * (SMALL_LIMIT + 1))


def test_r25_200_mib_line_at_the_default_64_mib_limit_keeps_memory_bounded() -> None:
    with AgentProcess("demo") as agent:
        agent.initialize()
        base = agent.status("VmRSS")
        agent.send_raw(b'{"jsonrpc":"2.0","id":"huge","method":"session/list","params":{"pad":"')
        chunk = b"b" * MiB
        for _ in range(200):
            agent.send_raw(chunk)
        agent.send_raw(b'"}}\n' + PROBE)
        err = agent.next()
        assert err["id"] == "huge" and err["error"]["code"] == -32600, err
        assert "limit of 67108864 bytes" in err["error"]["message"]
        _served(agent)
        peak = agent.status("VmHWM")
        # At most the 64 MiB limit is ever held (plus slack), never the 200 MiB line.
        assert peak - base < 80 * 1024, (base, peak)
        agent.close_stdin()
        assert agent.wait() == 0
