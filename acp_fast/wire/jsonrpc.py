"""JSON-RPC 2.0 envelopes, sans-IO: one line in, one message out, and back.

All orjson use lives here. ``decode`` never raises anything but AcpError
subclasses: a line that is not JSON (or not UTF-8) is a ParseError (-32700),
a JSON value that is no JSON-RPC message is InvalidRequest (-32600) carrying
whatever id could be recovered, so the caller can always answer (R24).

Batches (JSON arrays) are not part of ACP v1; they are refused with one
-32600 whose message says so, and the connection keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import orjson

from . import extensions
from .errors import AcpError, InvalidRequest, ParseError

JsonId: TypeAlias = "str | int | None"

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_DUMPS = orjson.dumps
_LOADS = orjson.loads
_NL = orjson.OPT_APPEND_NEWLINE
_NO_ID: Final = object()


class Request:
    """An incoming or outgoing call that wants exactly one response."""

    __slots__ = ("id", "method", "params")

    def __init__(self, id: str | int, method: str, params: Any) -> None:
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, method={self.method!r})"


class Notification:
    """A message without id: never answered, not even with an error (R06)."""

    __slots__ = ("method", "params")

    def __init__(self, method: str, params: Any) -> None:
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Notification(method={self.method!r})"


class Response:
    """The answer to a request this side sent; ``error`` is the raw wire object."""

    __slots__ = ("error", "id", "result")

    def __init__(self, id: JsonId, result: Any = None, error: Any = None) -> None:
        self.id = id
        self.result = result
        self.error = error

    def __repr__(self) -> str:
        kind = "error" if self.error is not None else "result"
        return f"Response(id={self.id!r}, {kind})"


Message: TypeAlias = Request | Notification | Response


class InvalidMessage(InvalidRequest):
    """-32600 with the id recovered from the bad message (None if there was none)."""

    def __init__(self, message: str, id: JsonId = None) -> None:
        super().__init__(message)
        self.id = id


def _valid_id(value: Any) -> bool:
    if type(value) is str:
        return True
    return type(value) is int and _INT64_MIN <= value <= _INT64_MAX


def loads(line: bytes | bytearray | memoryview | str) -> Any:
    """Parse one line; invalid JSON or invalid UTF-8 is a ParseError."""
    try:
        return _LOADS(line)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None


def classify(obj: Any) -> Message:
    """Sort a decoded value into request, notification or response (R24)."""
    # Fast path: a well-formed request or notification, checked in one pass.
    if type(obj) is dict and obj.get("jsonrpc") == "2.0":
        method = obj.get("method")
        if type(method) is str:
            params = obj.get("params")
            if params is None or type(params) is dict or type(params) is list:
                if "id" not in obj:
                    return Notification(method, params)
                rid = obj["id"]
                if type(rid) is str or (type(rid) is int and _INT64_MIN <= rid <= _INT64_MAX):
                    return Request(rid, method, params)
    return _classify_slow(obj)


def _classify_slow(obj: Any) -> Message:
    """Every other case: responses, and the precise error for an invalid message."""
    if type(obj) is not dict:
        if type(obj) is list:
            raise InvalidMessage(
                "Invalid request: JSON-RPC batches are not supported by ACP v1; "
                "send one message per line"
            )
        raise InvalidMessage(f"Invalid request: expected a JSON object, got {_kind(obj)}")
    has_id = "id" in obj
    raw_id = obj.get("id")
    rid: JsonId = raw_id if has_id and (raw_id is None or _valid_id(raw_id)) else None
    if obj.get("jsonrpc") != "2.0":
        raise InvalidMessage('Invalid request: "jsonrpc" must be "2.0"', rid)
    if has_id and raw_id is not None and not _valid_id(raw_id):
        raise InvalidMessage(
            "Invalid request: id must be a string, an int64 integer or null", None
        )
    method = obj.get("method")
    if method is not None:
        if type(method) is not str:
            raise InvalidMessage('Invalid request: "method" must be a string', rid)
        params = obj.get("params")
        if params is not None and type(params) is not dict and type(params) is not list:
            raise InvalidMessage(
                'Invalid request: "params" must be an object or an array', rid
            )
        if not has_id:
            return Notification(method, params)
        if raw_id is None:
            raise InvalidMessage("Invalid request: a request id must not be null", None)
        return Request(raw_id, method, params)
    if "result" in obj or "error" in obj:
        if not has_id:
            raise InvalidMessage("Invalid request: a response needs an id", None)
        if "result" in obj and "error" in obj:
            raise InvalidMessage('Invalid request: both "result" and "error"', rid)
        if "error" in obj:
            err = obj["error"]
            if type(err) is not dict:
                raise InvalidMessage('Invalid request: "error" must be an object', rid)
            return Response(rid, None, err)
        return Response(rid, obj["result"], None)
    raise InvalidMessage('Invalid request: no "method", "result" or "error"', rid)


def decode_py(line: bytes | bytearray | memoryview | str) -> Message:
    """Parse and classify one framed line; the specification of the compiled ``decode``.

    Runs for every incoming message, so the fast path of ``classify`` is
    repeated here rather than called.
    """
    try:
        obj = _LOADS(line)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None
    if type(obj) is dict and obj.get("jsonrpc") == "2.0":
        method = obj.get("method")
        if type(method) is str:
            params = obj.get("params")
            if params is None or type(params) is dict or type(params) is list:
                rid = obj.get("id", _NO_ID)
                if rid is _NO_ID:
                    return Notification(method, params)
                if type(rid) is str or (type(rid) is int and _INT64_MIN <= rid <= _INT64_MAX):
                    return Request(rid, method, params)
    return _classify_slow(obj)


#: ``decode``: the compiled one (wire/_decode.pyx), whose Request and Notification
#: then replace the classes above for the whole process, unless ACP_FAST_NO_EXTENSIONS=1
#: or it is not built. ``DECODE_IMPLEMENTATION`` says which ("c" or "python"). Same
#: results, same errors: tests/test_decode_differential.py holds them to it.
decode: Callable[[bytes | bytearray | memoryview | str], Message] = decode_py
DECODE_IMPLEMENTATION = "python"
if not TYPE_CHECKING:
    _decode = extensions.load("acp_fast.wire._decode")
    if _decode is not None:
        _decode.bind(_LOADS, orjson.JSONDecodeError, ParseError, _classify_slow)
        Request, Notification = _decode.Request, _decode.Notification
        Message = Request | Notification | Response
        decode, DECODE_IMPLEMENTATION = _decode.decode, "c"


def _kind(obj: Any) -> str:
    if obj is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(obj), type(obj).__name__
    )


# -- encoding: one message, one line, compact, newline-terminated ----------


def encode_request(id: str | int, method: str, params: Any) -> bytes:
    if params is None:
        return _DUMPS({"jsonrpc": "2.0", "id": id, "method": method}, option=_NL)
    return _DUMPS({"jsonrpc": "2.0", "id": id, "method": method, "params": params}, option=_NL)


def encode_notification(method: str, params: Any) -> bytes:
    if params is None:
        return _DUMPS({"jsonrpc": "2.0", "method": method}, option=_NL)
    return _DUMPS({"jsonrpc": "2.0", "method": method, "params": params}, option=_NL)


def encode_result(id: JsonId, result: Any) -> bytes:
    if type(id) is int and type(result) is dict and not result:  # the commonest answer, without a dict
        return b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % id
    return _DUMPS({"jsonrpc": "2.0", "id": id, "result": result}, option=_NL)


def encode_error(id: JsonId, error: AcpError) -> bytes:
    return _DUMPS({"jsonrpc": "2.0", "id": id, "error": error.to_error_obj()}, option=_NL)


def raw(payload: bytes) -> orjson.Fragment:
    """Wrap already-encoded JSON so it is forwarded without a decode/encode."""
    return orjson.Fragment(payload)


def recover_id(head: bytes) -> JsonId:
    """Best-effort id from the first bytes of an over-limit line (R25).

    Accepts a top-level ``"id":`` key of an object before any nested value
    starts; returns None when it cannot be sure (a nested value first, a
    number that may continue past the head, a float, a cut string), in
    which case the line goes unanswered except for a log record.
    """
    body = head.lstrip()
    if not body.startswith(b"{"):
        return None  # a batch or a scalar: never answered with a member's id
    key = body.find(b'"id"')
    while key > 0:
        before = body[1:key]
        if b"{" in before or b"[" in before:
            return None  # a nested value opened first: the key may not be top-level
        # A key follows "{" or ","; anything else ends a string (e.g. ``"say \"id"``).
        if body[:key].rstrip().endswith((b"{", b",")):
            rest = body[key + 4 :].lstrip()
            if rest.startswith(b":"):
                return _id_value(rest[1:].lstrip())
        key = body.find(b'"id"', key + 4)
    return None


_ID_END: Final = frozenset(b" \t\r\n,}")


def _id_value(rest: bytes) -> JsonId:
    """The id token at the start of ``rest``, if it is complete and valid."""
    if rest.startswith(b'"'):
        end = rest.find(b'"', 1)
        while end > 0:
            # A quote preceded by an odd number of backslashes is escaped.
            start = end
            while rest[start - 1] == 0x5C:  # rest[0] is the opening quote, so this stops
                start -= 1
            if (end - start) % 2 == 0:
                break
            end = rest.find(b'"', end + 1)
        if end < 0:
            return None
        token = rest[: end + 1]
    else:
        end = 0
        while end < len(rest) and rest[end] in b"-0123456789":
            end += 1
        if end == len(rest) or rest[end] not in _ID_END:
            return None  # cut by the head (it may go on) or not an integer (1.5, 1e3, true)
        token = rest[:end]
    try:
        value = _LOADS(token)
    except orjson.JSONDecodeError:
        return None
    return value if _valid_id(value) else None


__all__ = [
    "DECODE_IMPLEMENTATION",
    "InvalidMessage",
    "JsonId",
    "Message",
    "Notification",
    "Request",
    "Response",
    "classify",
    "decode",
    "decode_py",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "loads",
    "raw",
    "recover_id",
]
