"""Shared session stores: parking that another host (process, replica) can re-attach.

Two ``AcpHost``s in one process share one SQLite file or one real
``redis-server`` (started on loopback, skipped with a reason when absent),
exactly as two workers or two replicas do. What is checked: a session parked
on A is loaded on B with its history; the owner rule holds across hosts; an
unserializable or oversized state and a failing store are logged and end the
session without taking the host down; a drain parks the connection's
sessions (idle, and the one whose prompt it cancelled). Waits poll host
counters or the store, bounded.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from acp_fast.agent.sessions import Session
from acp_fast.demo import DemoAgent
from acp_fast.extras import MissingExtra
from acp_fast.hosting import AcpHost, serve_ws
from acp_fast.hosting.detached import UnparkableState, decode_parked, encode_parked
from acp_fast.hosting.store import check_spec, connect_sqlite, parse_spec
from acp_fast.wire.limits import Limits
from tests.store_helpers import free_port, redis_server
from tests.ws_helpers import WsClient

INVALID_PARAMS = -32602
LONG = "stream 100000 5"


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis_server(tmp_path_factory.mktemp("redis")) as port:
        yield port


@pytest.fixture(params=["sqlite", "redis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'sessions.sqlite3'}"
    port = request.getfixturevalue("redis_port")
    db = 1 + (abs(hash(request.node.name)) % 14)  # a database of its own per test: no leftovers between tests
    return f"redis://127.0.0.1:{port}/{db}"


def _url(host: AcpHost) -> str:
    return f"ws://127.0.0.1:{host.port}/acp"


def _load(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}


def _demo() -> DemoAgent:
    return DemoAgent(pace_ms=0, unique_ids=True)


async def _until(host: AcpHost, **want: int) -> None:
    for i in range(20_000):
        counts = host.counts
        if all(counts[k] == v for k, v in want.items()):
            return
        await asyncio.sleep(0 if i < 10_000 else 0.001)
    raise AssertionError(f"counts never reached {want}: {host.counts}")


async def _session_with_history(c: WsClient, text: str = "remember me") -> str:
    await c.initialize()
    sid = await c.new_session()
    done = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    assert done["result"]["stopReason"] == "end_turn"
    return sid


def _replayed(c: WsClient, sid: str) -> list[str]:
    return [u["content"]["text"] for u in c.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]


async def _two_hosts(
    spec: str,
    body: Callable[[AcpHost, AcpHost], Awaitable[None]],
    factory: Callable[[], Any] = _demo,
    **kwargs: Any,
) -> tuple[AcpHost, AcpHost]:
    a = await serve_ws(factory, "127.0.0.1", 0, session_store=spec, **kwargs)
    b = await serve_ws(factory, "127.0.0.1", 0, session_store=spec, **kwargs)
    try:
        await body(a, b)
    finally:
        await a.drain()
        await b.drain()
    return a, b


def test_a_session_parked_on_one_host_is_loaded_on_another(run: Any, store_spec: str) -> None:
    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(a, connections=0, sessions=0, detached_sessions=1)

        c2 = await WsClient.open(_url(b))
        await c2.initialize()
        loaded = await c2.request("session/load", _load(sid))
        assert "result" in loaded, loaded
        assert _replayed(c2, sid) == ["remember me"]
        assert b.counts["sessions"] == 1
        again = await c2.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]})
        assert again["result"]["stopReason"] == "end_turn"

        # taken: a second load anywhere finds nothing parked
        c3 = await WsClient.open(_url(a))
        await c3.initialize()
        assert (await c3.request("session/load", _load(sid)))["error"]["code"] == INVALID_PARAMS
        await c3.close()
        await c2.close()
        await _until(b, connections=0, sessions=0, detached_sessions=1)

    run(_two_hosts(store_spec, body))


def test_a_resume_reattaches_from_the_store(run: Any, store_spec: str) -> None:
    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(a, connections=0, detached_sessions=1)
        c2 = await WsClient.open(_url(b))
        await c2.initialize()
        assert "result" in await c2.request("session/resume", _load(sid))
        assert b.counts["sessions"] == 1
        await c2.close()

    run(_two_hosts(store_spec, body))


def _by_token(headers: Mapping[str, str]) -> bool | str:
    return {"Bearer a": "alice", "Bearer b": "bob"}.get(headers.get("Authorization", ""), False)


def test_only_the_owner_reattaches_across_hosts_and_a_refusal_leaves_the_entry(run: Any, store_spec: str) -> None:
    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a), additional_headers={"Authorization": "Bearer a"})
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(a, connections=0, detached_sessions=1)
        bob = await WsClient.open(_url(b), additional_headers={"Authorization": "Bearer b"})
        await bob.initialize()
        refused = await bob.request("session/load", _load(sid))
        assert refused["error"]["code"] == INVALID_PARAMS and sid in refused["error"]["message"]
        await bob.close()
        alice = await WsClient.open(_url(b), additional_headers={"Authorization": "Bearer a"})
        await alice.initialize()
        assert "result" in await alice.request("session/load", _load(sid))
        assert _replayed(alice, sid) == ["remember me"]
        await alice.close()

    run(_two_hosts(store_spec, body, authorize=_by_token))


class Unserializable(DemoAgent):
    def __init__(self) -> None:
        super().__init__(pace_ms=0, unique_ids=True)

    def detach_session(self, session_id: str) -> Any:
        super().detach_session(session_id)
        return {"handle": object()}


def _rows(spec: str) -> int:
    kind, path = parse_spec(spec)
    assert kind == "sqlite"
    db = connect_sqlite(path, 1.0)  # the table may not exist yet: nothing was ever parked
    try:
        return int(db.execute("SELECT count(*) FROM parked").fetchone()[0])
    finally:
        db.close()


def test_an_unserializable_state_is_logged_and_the_session_ends_unstored(
    run: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = f"sqlite:{tmp_path / 's.sqlite3'}"

    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(a, connections=0, sessions=0)
        for _ in range(2000):
            if a.detached.failed:
                break
            await asyncio.sleep(0.001)
        assert a.detached.failed == 1 and a.counts["detached_sessions"] == 0
        assert _rows(spec) == 0
        c2 = await WsClient.open(_url(b))
        await c2.initialize()
        assert (await c2.request("session/load", _load(sid)))["error"]["code"] == INVALID_PARAMS
        await c2.close()

    with caplog.at_level(logging.ERROR, logger="acp_fast.hosting.detached"):
        run(_two_hosts(spec, body, factory=Unserializable))
    assert any("not JSON" in r.getMessage() for r in caplog.records), caplog.text


def test_encode_refuses_what_json_cannot_carry_and_round_trips_what_it_can() -> None:
    session = Session("s1", "/w", [{"name": "m", "command": "x", "args": [], "env": []}])
    session.mode_id = "plan"
    session.config["model"] = "fast"
    session.data["n"] = 1
    blob = encode_parked(session, ("cwd", [{"a": 1}], None, 2.5), 1 << 20)
    back, state = decode_parked(blob)
    got = (back.id, back.cwd, back.mode_id, back.config, back.data)
    assert got == ("s1", "/w", "plan", {"model": "fast"}, {"n": 1})
    assert back.mcp_servers == session.mcp_servers
    assert state == ["cwd", [{"a": 1}], None, 2.5]  # a tuple comes back a list
    for bad in ({1: "int key"}, {"s": {1, 2}}, object(), 2**70):
        with pytest.raises(UnparkableState):
            encode_parked(session, bad, 1 << 20)
    with pytest.raises(UnparkableState, match="max_parked_session_bytes"):
        encode_parked(session, "x" * 2000, 1024)


def test_an_oversized_state_is_logged_and_not_stored(
    run: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = f"sqlite:{tmp_path / 's.sqlite3'}"

    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        await _session_with_history(c1, "x" * 4000)
        await c1.close()
        await _until(a, connections=0, sessions=0)
        for _ in range(2000):
            if a.detached.failed:
                break
            await asyncio.sleep(0.001)
        assert a.detached.failed == 1 and _rows(spec) == 0

    with caplog.at_level(logging.ERROR, logger="acp_fast.hosting.detached"):
        run(_two_hosts(spec, body, limits=Limits(max_parked_session_bytes=2048)))
    assert any("max_parked_session_bytes" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kind", ["redis-down", "sqlite-unwritable"])
def test_a_failing_store_is_logged_and_the_host_keeps_serving(
    run: Any, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    if kind == "redis-down":
        pytest.importorskip("redis", reason="the redis package is not installed (pip install '.[store]')")
        spec = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    else:
        spec = f"sqlite:{tmp_path / 'no-such-dir' / 's.sqlite3'}"
    limits = Limits(session_store_timeout_s=0.5)

    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(a, connections=0, sessions=0)
        for _ in range(5000):
            if a.detached.failed:
                break
            await asyncio.sleep(0.001)
        assert a.detached.failed == 1 and a.counts["detached_sessions"] == 0
        c2 = await WsClient.open(_url(b))
        sid2 = await _session_with_history(c2, "still serving")
        assert sid2 != sid
        assert (await c2.request("session/load", _load(sid)))["error"]["code"] == INVALID_PARAMS
        await c2.close()

    with caplog.at_level(logging.ERROR, logger="acp_fast.hosting.detached"):
        run(_two_hosts(spec, body, limits=limits))
    assert any("session store" in r.getMessage() for r in caplog.records), caplog.text


def test_a_drain_parks_idle_sessions_and_the_one_whose_prompt_it_cancelled(run: Any, store_spec: str) -> None:
    async def body(a: AcpHost, b: AcpHost) -> None:
        c1 = await WsClient.open(_url(a))
        idle = await _session_with_history(c1, "idle one")
        busy = await c1.new_session()
        long_prompt = {"sessionId": busy, "prompt": [{"type": "text", "text": LONG}]}
        running = await c1.request_nowait("session/prompt", long_prompt)
        await c1.wait_for(lambda: len(c1.updates(busy)) > 3)
        await a.drain()
        answer = c1.find(running)
        assert answer is not None and answer["result"]["stopReason"] == "cancelled"
        await c1.wait_for(lambda: c1.close_code is not None)
        assert c1.close_code == 1001

        c2 = await WsClient.open(_url(b))
        await c2.initialize()
        for sid, first in ((idle, "idle one"), (busy, LONG)):
            loaded = await c2.request("session/load", _load(sid))
            assert "result" in loaded, loaded
            assert _replayed(c2, sid)[0] == first
        await c2.close()

    run(_two_hosts(store_spec, body))


def test_the_memory_store_still_drops_sessions_at_a_drain(run: Any) -> None:
    async def body() -> None:
        a = await serve_ws(_demo, "127.0.0.1", 0, session_store="memory")
        c1 = await WsClient.open(_url(a))
        await _session_with_history(c1)
        await a.drain()
        assert a.counts["detached_sessions"] == 0 and not a.detached.shared

    run(body())


def test_a_redis_spec_without_the_package_is_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingExtra) as err:
        check_spec("redis://127.0.0.1:6379/0")
    assert "pip install '.[store]'" in str(err.value) and "\n" not in str(err.value)
    check_spec("sqlite:/tmp/x")  # needs nothing
    with pytest.raises(ValueError, match="accepted: memory, sqlite:PATH or redis://"):
        check_spec("postgres://x")


def test_the_cli_refuses_a_bad_store_spec_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from acp_fast.cli import main

    with pytest.raises(SystemExit) as err:
        main(["demo", "--listen", "127.0.0.1:0", "--session-store", "postgres://db/0"])
    assert err.value.code == 2
    assert "--session-store: unknown session store 'postgres://db/0'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        main(["demo", "--listen", "127.0.0.1:0", "--session-store", "sqlite:"])
    assert err.value.code == 2
    assert "sqlite: needs a file path" in capsys.readouterr().err


def test_the_cli_names_the_store_extra_when_redis_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from acp_fast.cli import main

    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(SystemExit) as err:
        main(["demo", "--listen", "127.0.0.1:0", "--session-store", "redis://127.0.0.1:6379/0"])
    assert err.value.code == 2
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and "'store' extra" in line and "pip install '.[store]'" in line
