"""R24 error hierarchy: codes, the code registry, wire mapping both ways, and exception wrapping.

The official SDK's ``acp.exceptions.RequestError`` is the oracle for the
classmethod aliases: same codes, same data, so SDK-style code drops in.
"""

from __future__ import annotations

import traceback
from typing import Any

import orjson
import pytest
from acp.exceptions import RequestError

from acp_fast.wire import errors, jsonrpc
from acp_fast.wire.errors import (
    AcpError,
    AuthRequired,
    ConnectionClosed,
    DeadlockError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpBackendFailed,
    McpLimitExceeded,
    McpServerUnavailable,
    MethodNotFound,
    OtherError,
    ParseError,
    PromptInProgress,
    RequestCancelled,
    ResourceNotFound,
    ServerBusy,
    ServerError,
    from_error_obj,
    from_exception,
)

CODES: list[tuple[type[AcpError], int]] = [
    (ParseError, -32700),
    (InvalidRequest, -32600),
    (MethodNotFound, -32601),
    (InvalidParams, -32602),
    (InternalError, -32603),
    (RequestCancelled, -32800),
    (ServerError, -32000),
    (AuthRequired, -32000),
    (ServerBusy, -32000),
    (PromptInProgress, -32000),
    (ResourceNotFound, -32002),
    (ConnectionClosed, -32603),
    (McpLimitExceeded, -33000),
    (McpServerUnavailable, -33001),
    (McpBackendFailed, -33002),
]
#: The class that owns each code: the one ``from_error_obj`` must return.
OWNERS = {
    -32700: ParseError,
    -32600: InvalidRequest,
    -32601: MethodNotFound,
    -32602: InvalidParams,
    -32603: InternalError,
    -32800: RequestCancelled,
    -32000: ServerError,
    -32002: ResourceNotFound,
    -33000: McpLimitExceeded,
    -33001: McpServerUnavailable,
    -33002: McpBackendFailed,
}


@pytest.mark.parametrize(("cls", "code"), CODES, ids=[c.__name__ for c, _ in CODES])
def test_r24_every_error_class_carries_its_json_rpc_code(cls: type[AcpError], code: int) -> None:
    assert cls.code == code
    err = cls()
    assert err.code == code
    assert err.to_error_obj() == {"code": code, "message": cls.default_message}
    assert str(err) == err.message == cls.default_message


def test_r07_r08_refusals_inherit_the_server_error_code_without_registering() -> None:
    for cls in (AuthRequired, ServerBusy, PromptInProgress):
        assert issubclass(cls, ServerError)
        assert "code" not in cls.__dict__
        assert cls.default_message != ServerError.default_message
    assert errors._BY_CODE[-32000] is ServerError


def test_r24_registry_holds_exactly_the_classes_that_declare_a_code() -> None:
    assert errors._BY_CODE == OWNERS


def test_r24_acp_error_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        AcpError("x")
    with pytest.raises(TypeError):
        AcpError()


def test_r24_a_second_class_declaring_a_taken_code_fails_at_definition() -> None:
    before = dict(errors._BY_CODE)
    with pytest.raises(TypeError, match="-32601"):

        class Duplicate(AcpError):
            code = -32601

    with pytest.raises(TypeError, match="-32000"):

        class DuplicateServer(ServerBusy):
            code = -32000

    assert dict(errors._BY_CODE) == before


def test_r24_a_class_declaring_a_new_code_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_BY_CODE", dict(errors._BY_CODE))

    class Teapot(AcpError):
        code = -32099
        default_message = "Teapot"

    assert errors._BY_CODE[-32099] is Teapot
    assert type(from_error_obj({"code": -32099, "message": "short"})) is Teapot


def test_r24_to_error_obj_omits_data_when_none_and_keeps_falsy_data() -> None:
    assert InvalidParams("bad").to_error_obj() == {"code": -32602, "message": "bad"}
    assert InvalidParams("bad", {"f": 1}).to_error_obj() == {"code": -32602, "message": "bad", "data": {"f": 1}}
    for falsy in (0, "", [], {}, False):
        assert InvalidParams("bad", falsy).to_error_obj()["data"] == falsy


@pytest.mark.parametrize("code", sorted(OWNERS), ids=str)
def test_r24_from_error_obj_maps_each_code_back_to_its_class(code: int) -> None:
    obj = {"code": code, "message": "from the peer", "data": {"k": [1]}}
    err = from_error_obj(obj)
    assert type(err) is OWNERS[code]
    assert (err.code, err.message, err.data) == (code, "from the peer", {"k": [1]})
    assert err.to_error_obj() == obj


def test_r24_from_error_obj_falls_back_to_other_error_for_unknown_codes() -> None:
    for code in (-32099, -1, 0, 42, -32001):
        obj = {"code": code, "message": "custom", "data": "d"}
        err = from_error_obj(obj)
        assert type(err) is OtherError
        assert err.code == code
        assert err.to_error_obj() == obj
    # An unknown code must not leak into the class: OtherError has no code of its own.
    assert "code" not in OtherError.__dict__
    assert errors._BY_CODE == OWNERS


def test_r24_from_error_obj_uses_the_default_message_when_the_peer_gave_none() -> None:
    assert from_error_obj({"code": -32601}).message == "Method not found"
    assert from_error_obj({"code": -32601, "message": 5}).message == "Method not found"
    assert from_error_obj({"code": -7}).to_error_obj() == {"code": -7, "message": "Error"}


MALFORMED: list[Any] = [
    None,
    "oops",
    [1, 2],
    {},
    {"message": "no code"},
    {"code": "-32601", "message": "string code"},
    {"code": -32601.0, "message": "float code"},
    {"code": True, "message": "bool code"},
    {"code": None},
]


@pytest.mark.parametrize("obj", MALFORMED, ids=repr)
def test_r24_from_error_obj_turns_a_malformed_object_into_internal_error(obj: Any) -> None:
    err = from_error_obj(obj)
    assert type(err) is InternalError
    assert err.code == -32603
    assert err.data == {"error": obj}


def test_r24_from_exception_passes_acp_errors_through_unchanged() -> None:
    for err in (InvalidParams("x"), ServerBusy(), OtherError(-5, "m"), ConnectionClosed()):
        assert from_exception(err) is err


def _raise_secret() -> None:
    raise ValueError("secret token sk-123 at /home/user/private.txt")


def test_r24_from_exception_wraps_foreign_errors_without_leaking_text_or_traceback() -> None:
    try:
        _raise_secret()
    except ValueError as exc:
        original = exc
    err = from_exception(original)
    assert type(err) is InternalError
    assert err.code == -32603
    assert err.__cause__ is original
    assert original.__traceback__ is not None  # the traceback stays available for stderr logging
    wire = jsonrpc.encode_error(1, err)
    tb_text = "".join(traceback.format_exception(original))
    for leak in ("secret", "sk-123", "/home/user", "_raise_secret", "Traceback", str(original)):
        assert leak.encode() not in wire
        assert leak in tb_text  # each probe really is in what must not leak
    obj = orjson.loads(wire)["error"]
    assert obj == {"code": -32603, "message": "Internal error", "data": {"error": "ValueError"}}


def test_r24_from_exception_gives_each_foreign_error_a_fresh_instance() -> None:
    a, b = from_exception(KeyError("a")), from_exception(KeyError("b"))
    assert a is not b
    assert a.__cause__ is not b.__cause__


def test_r21_deadlock_error_is_a_programming_error_not_an_acp_error() -> None:
    assert not issubclass(DeadlockError, AcpError)
    err = from_exception(DeadlockError("awaited a response inside an ordered handler"))
    assert type(err) is InternalError
    assert err.to_error_obj()["data"] == {"error": "DeadlockError"}


def test_r20_connection_closed_is_an_internal_error_that_decodes_as_internal_error() -> None:
    assert isinstance(ConnectionClosed(), InternalError)
    assert type(from_error_obj(ConnectionClosed().to_error_obj())) is InternalError


ALIASES: list[tuple[str, tuple[Any, ...], type[AcpError]]] = [
    ("parse_error", ({"line": 3},), ParseError),
    ("invalid_request", ({"why": "x"},), InvalidRequest),
    ("method_not_found", ("session/frobnicate",), MethodNotFound),
    ("invalid_params", ({"field": "cwd"},), InvalidParams),
    ("internal_error", ({"trace": "t"},), InternalError),
    ("auth_required", ({"methods": []},), AuthRequired),
    ("resource_not_found", ("file:///x",), ResourceNotFound),
    ("resource_not_found", (), ResourceNotFound),
    ("parse_error", (), ParseError),
]


@pytest.mark.parametrize(("name", "args", "cls"), ALIASES, ids=[f"{n}{len(a)}" for n, a, _ in ALIASES])
def test_r24_sdk_classmethod_aliases_match_the_official_request_error(
    name: str, args: tuple[Any, ...], cls: type[AcpError]
) -> None:
    ours = getattr(AcpError, name)(*args)
    sdk = getattr(RequestError, name)(*args)
    assert type(ours) is cls
    assert ours.code == sdk.code
    assert ours.data == sdk.data
    wire = ours.to_error_obj()
    assert wire["code"] == sdk.code
    assert ("data" in wire) == (sdk.data is not None)
    # Reachable from any subclass too, as SDK code calls them on its error type.
    assert type(getattr(InvalidParams, name)(*args)) is cls


def test_r24_method_not_found_alias_names_the_method() -> None:
    err = AcpError.method_not_found("session/frobnicate")
    assert "session/frobnicate" in err.message
