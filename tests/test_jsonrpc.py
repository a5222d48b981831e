"""R24/R25 codec: classification of every line in tests/vectors/jsonrpc.jsonl, encoding, recover_id.

Each vector gives a line (bytes spelled as latin-1 text), the expected kind
(request, notification, result, error_response or invalid) and, for invalid
lines, the error code, the id the error must be answered to, and a word the
message must contain. Batches get -32600 with a message that names them:
ACP v1 has no batches, and one clear error beats a silent drop.

``params: null`` is accepted as absent (a documented leniency: the official
Python SDK sends it for calls without parameters).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.wire import jsonrpc
from acp_fast.wire.errors import AcpError, InvalidParams, InvalidRequest, ParseError
from acp_fast.wire.frames import Oversized
from acp_fast.wire.jsonrpc import InvalidMessage, Notification, Request, Response

VECTORS_PATH = Path(__file__).parent / "vectors" / "jsonrpc.jsonl"
KINDS = {"request", "notification", "result", "error_response", "invalid"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _load_vectors() -> list[dict[str, Any]]:
    out = []
    for raw in VECTORS_PATH.read_text(encoding="utf-8").splitlines():
        v = json.loads(raw)
        v["data"] = v["line"].encode("latin-1")
        out.append(v)
    return out


VECTORS = _load_vectors()
VALID = [v for v in VECTORS if v["kind"] != "invalid"]
INVALID = [v for v in VECTORS if v["kind"] == "invalid"]


def _same_id(got: Any, want: Any) -> bool:
    """Equal and of the same type, so True never passes for 1 nor 1.0 for 1."""
    return type(got) is type(want) and got == want


def test_r24_vectors_file_is_well_formed_and_covers_the_required_cases() -> None:
    names = [v["name"] for v in VECTORS]
    assert len(names) == len(set(names)), "duplicate vector names"
    for v in VECTORS:
        assert v["kind"] in KINDS, v["name"]
        assert ("code" in v) == (v["kind"] == "invalid"), v["name"]
    required = {
        "request_int_id", "request_string_id", "request_int64_max_id", "request_int64_min_id",
        "notification", "response_result", "response_error", "response_error_null_id",
        "parse_not_json", "parse_invalid_utf8_byte", "parse_invalid_utf8_overlong", "batch_refused",
        "empty_batch_refused", "missing_jsonrpc", "jsonrpc_1_0", "id_float", "id_true", "id_2_pow_70",
        "id_int64_max_plus_one", "id_object", "request_id_null", "params_string", "missing_method",
        "result_and_error",
    }  # fmt: skip
    assert required <= set(names)
    codes = {v["code"] for v in INVALID}
    assert codes == {-32700, -32600}


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_r24_valid_vector_is_classified_with_its_id_method_and_payload(vector: dict[str, Any]) -> None:
    data = vector["data"]
    oracle = json.loads(data.decode("utf-8"))  # the stdlib parser as an independent reading
    # The framer hands the decoder bytes or memoryviews into a larger buffer: all must agree.
    padded = bytearray(b"xx" + data + b"\nyy")
    for line in (data, bytearray(data), memoryview(padded)[2 : 2 + len(data)]):
        msg = jsonrpc.decode(line)
        kind = vector["kind"]
        if kind == "request":
            assert type(msg) is Request
            assert _same_id(msg.id, vector["id"])
            assert msg.method == vector["method"]
            assert msg.params == oracle.get("params")
        elif kind == "notification":
            assert type(msg) is Notification
            assert msg.method == vector["method"]
            assert msg.params == oracle.get("params")
        elif kind == "result":
            assert type(msg) is Response
            assert _same_id(msg.id, vector["id"])
            assert msg.error is None
            assert msg.result == oracle["result"]
        else:
            assert type(msg) is Response
            assert _same_id(msg.id, vector["id"])
            assert msg.error == oracle["error"]
            assert isinstance(msg.error, dict)


@pytest.mark.parametrize("vector", INVALID, ids=[v["name"] for v in INVALID])
def test_r24_invalid_vector_raises_its_code_with_the_recoverable_id(vector: dict[str, Any]) -> None:
    with pytest.raises(AcpError) as info:
        jsonrpc.decode(vector["data"])
    exc = info.value
    assert exc.code == vector["code"]
    if vector["code"] == -32700:
        assert type(exc) is ParseError  # a parse error is always answered with id null
        assert getattr(exc, "id", None) is None
    else:
        assert type(exc) is InvalidMessage
        assert isinstance(exc, InvalidRequest)
        assert _same_id(exc.id, vector["id"])
    if "message" in vector:
        assert vector["message"].lower() in exc.message.lower()
    # The message is what the peer reads: it must serialise as an error object.
    wire = orjson.loads(jsonrpc.encode_error(None, exc))
    assert wire["error"]["code"] == vector["code"]


def test_r24_batch_error_message_explains_that_acp_has_no_batches() -> None:
    with pytest.raises(InvalidMessage) as info:
        jsonrpc.decode(b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]')
    assert info.value.code == -32600
    assert info.value.id is None
    assert "batch" in info.value.message
    assert "one message per line" in info.value.message


def test_r25_invalid_utf8_in_any_position_is_a_parse_error_not_a_crash() -> None:
    base = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"abc"}}'
    for pos in range(len(base) + 1):
        for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80"):
            line = base[:pos] + bad + base[pos:]
            with pytest.raises(ParseError):
                jsonrpc.decode(line)


# -- decode never raises anything but AcpError ------------------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_envelope_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])
_envelopes = st.dictionaries(
    _envelope_keys,
    st.sampled_from(["2.0", "1.0", "m", 1, -1, 2**63, 1.5, True, None, [], {}, {"code": 1, "message": "x"}]) | _json,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | _envelopes.map(lambda d: json.dumps(d).encode()))
def test_r24_decode_of_any_bytes_yields_a_message_or_an_acp_error(data: bytes) -> None:
    try:
        msg = jsonrpc.decode(data)
    except InvalidMessage as exc:
        assert exc.code == -32600
        assert exc.id is None or type(exc.id) is str or (type(exc.id) is int and INT64_MIN <= exc.id <= INT64_MAX)
    except ParseError as exc:
        assert exc.code == -32700
    else:
        assert type(msg) in (Request, Notification, Response)
        if type(msg) is Request:
            assert type(msg.id) is str or (type(msg.id) is int and INT64_MIN <= msg.id <= INT64_MAX)


# -- encoding: one compact message per line ----------------------------------------------


def test_r24_encoders_write_one_compact_newline_terminated_line() -> None:
    assert jsonrpc.encode_request(1, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text"}]}) == (
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text"}]}}\n'
    )
    assert jsonrpc.encode_request("a", "m", None) == b'{"jsonrpc":"2.0","id":"a","method":"m"}\n'
    assert jsonrpc.encode_notification("session/update", {"a": [1, 2]}) == (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"a":[1,2]}}\n'
    )
    assert jsonrpc.encode_notification("m", None) == b'{"jsonrpc":"2.0","method":"m"}\n'
    assert jsonrpc.encode_result(7, {"stopReason": "end_turn"}) == (
        b'{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}\n'
    )
    assert jsonrpc.encode_result(8, None) == b'{"jsonrpc":"2.0","id":8,"result":null}\n'
    assert jsonrpc.encode_error(None, ParseError()) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
    )
    assert jsonrpc.encode_error("x", InvalidParams("bad", {"field": "cwd"})) == (
        b'{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad","data":{"field":"cwd"}}}\n'
    )


def test_r24_newlines_inside_strings_are_escaped_so_a_message_stays_one_line() -> None:
    text = "a\nb\r\nc\u2028d\x00"
    for encoded in (
        jsonrpc.encode_request(1, "m\n", {"t": text}),
        jsonrpc.encode_notification("m", [text]),
        jsonrpc.encode_result("i\nd", text),
        jsonrpc.encode_error(2, InvalidParams(text)),
    ):
        assert encoded.endswith(b"\n")
        assert encoded.count(b"\n") == 1
        assert b"\r" not in encoded


_ids = st.text(max_size=8) | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
_params = st.none() | st.lists(_json, max_size=3) | st.dictionaries(st.text(max_size=6), _json, max_size=3)


@settings(max_examples=100, deadline=None)
@given(rid=_ids, method=st.text(min_size=1, max_size=12), params=_params, result=_json)
def test_r24_every_encoded_message_round_trips_through_decode(
    rid: str | int, method: str, params: Any, result: Any
) -> None:
    def line(encoded: bytes) -> bytes:
        assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
        return encoded[:-1]

    req = jsonrpc.decode(line(jsonrpc.encode_request(rid, method, params)))
    assert type(req) is Request and _same_id(req.id, rid)
    assert (req.method, req.params) == (method, params)
    note = jsonrpc.decode(line(jsonrpc.encode_notification(method, params)))
    assert type(note) is Notification and (note.method, note.params) == (method, params)
    res = jsonrpc.decode(line(jsonrpc.encode_result(rid, result)))
    assert type(res) is Response and _same_id(res.id, rid)
    assert res.result == result and res.error is None
    err = jsonrpc.decode(line(jsonrpc.encode_error(rid, InvalidParams(method, result))))
    assert type(err) is Response and _same_id(err.id, rid)
    assert err.error == InvalidParams(method, result).to_error_obj()


def test_r24_raw_fragment_is_forwarded_byte_for_byte() -> None:
    payload = b'{"b" : [1, 2.50, "\\u00e9"] ,\t"a":{}}'  # spacing and escapes a re-encode would change
    encoded = jsonrpc.encode_result(3, jsonrpc.raw(payload))
    assert encoded == b'{"jsonrpc":"2.0","id":3,"result":' + payload + b"}\n"
    nested = jsonrpc.encode_notification("mcp/message", {"connectionId": "c", "message": jsonrpc.raw(payload)})
    assert payload in nested
    msg = jsonrpc.decode(nested[:-1])
    assert type(msg) is Notification
    assert msg.params["message"] == json.loads(payload)


# -- recover_id on the heads of over-limit lines (R25) -----------------------------------

RECOVER_CASES = [
    ("int_id_before_params", b'{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"prompt":[{"t', 42),
    ("string_id", b'{"jsonrpc":"2.0","id":"abc-1","method":"m","params":{"t":"', "abc-1"),
    ("id_first_with_spaces", b'  { "id" : 7 , "jsonrpc":"2.0"', 7),
    ("negative_id", b'{"id":-3,"jsonrpc"', -3),
    ("zero_id_whole_object", b'{"id":0}', 0),
    ("int64_max", b'{"jsonrpc":"2.0","id":9223372036854775807,', 2**63 - 1),
    ("escaped_quote_in_string_id", b'{"jsonrpc":"2.0","id":"a\\"b","method"', 'a"b'),
    ("string_id_ending_in_escaped_backslash", b'{"jsonrpc":"2.0","id":"a\\\\","method"', "a\\"),
    ("unicode_escape_in_string_id", b'{"jsonrpc":"2.0","id":"\\u0041","method"', "A"),
    ("key_idx_is_not_id", b'{"idx":1,"id":2,"method"', 2),
    ("method_named_id_comes_first", b'{"jsonrpc":"2.0","method":"id","id":9,"params":{', 9),
    ("escaped_quote_then_id_inside_a_string", b'{"method":"say \\"id","id":4,"params"', 4),
    ("no_id", b'{"jsonrpc":"2.0","method":"m","params":{"t":"', None),
    ("empty_head", b"", None),
    ("id_only_inside_params", b'{"jsonrpc":"2.0","method":"m","params":{"id":5,"x":"', None),
    ("id_only_inside_array", b'{"jsonrpc":"2.0","method":"m","params":[{"id":5', None),
    ("nested_value_before_id_is_not_trusted", b'{"params":{},"id":3,', None),
    ("batch_member_id", b'[{"jsonrpc":"2.0","id":1,"method":"m"', None),
    ("key_containing_escaped_quote_id", b'{"x\\"id":5,', None),
    ("float_id", b'{"jsonrpc":"2.0","id":1.5,"method":"m"', None),
    ("exponent_id", b'{"jsonrpc":"2.0","id":1e3,"method":"m"', None),
    ("number_cut_by_the_head", b'{"jsonrpc":"2.0","id":12', None),
    ("string_cut_by_the_head", b'{"jsonrpc":"2.0","id":"abc', None),
    ("bool_id", b'{"jsonrpc":"2.0","id":true,', None),
    ("null_id", b'{"jsonrpc":"2.0","id":null,', None),
    ("object_id", b'{"jsonrpc":"2.0","id":{"n":1},', None),
    ("array_id", b'{"jsonrpc":"2.0","id":[1],', None),
    ("int64_max_plus_one", b'{"jsonrpc":"2.0","id":9223372036854775808,', None),
    ("two_pow_70", b'{"jsonrpc":"2.0","id":1180591620717411303424,', None),
    ("leading_zero", b'{"jsonrpc":"2.0","id":01,', None),
    ("lone_minus", b'{"jsonrpc":"2.0","id":-,', None),
    ("missing_colon", b'{"jsonrpc":"2.0","id" 5,', None),
]


@pytest.mark.parametrize(("head", "expected"), [c[1:] for c in RECOVER_CASES], ids=[c[0] for c in RECOVER_CASES])
def test_r25_recover_id_reads_only_a_certain_top_level_id(head: bytes, expected: Any) -> None:
    assert _same_id(jsonrpc.recover_id(head), expected)


def test_r25_recover_id_agrees_with_decode_on_every_complete_request_vector() -> None:
    """Where the whole line is a valid request, its head must yield that request's id or None."""
    for v in VECTORS:
        if v["kind"] != "request":
            continue
        data = v["data"]
        for cut in range(len(data) + 1):
            got = jsonrpc.recover_id(data[:cut])
            assert got is None or _same_id(got, v["id"]), (v["name"], cut, got)
        assert _same_id(jsonrpc.recover_id(data), v["id"]), v["name"]


def test_r25_framer_head_of_an_over_limit_line_yields_its_id(framer_cls: type) -> None:
    line = b'{"jsonrpc":"2.0","id":"big-1","method":"session/prompt","params":{"prompt":"' + b"x" * 500 + b'"}}\n'
    framer = framer_cls(max_line_bytes=128, head_bytes=64)
    frames = framer.feed(line + b'{"jsonrpc":"2.0","id":2,"method":"m"}\n')
    assert type(frames[0]) is Oversized
    assert jsonrpc.recover_id(frames[0].head) == "big-1"
    nxt = jsonrpc.decode(frames[1])
    assert type(nxt) is Request and nxt.id == 2


@pytest.mark.parametrize("rid", [0, 7, -3, 2**63 - 1, "s", None])
@pytest.mark.parametrize("result", [{}, {"a": 1}, [], None])
def test_encode_result_is_the_generic_envelope_byte_for_byte(rid: Any, result: Any) -> None:
    """The preformatted empty-result answer must be exactly what orjson writes for the dict."""
    generic = orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, option=orjson.OPT_APPEND_NEWLINE)
    assert jsonrpc.encode_result(rid, result) == generic
