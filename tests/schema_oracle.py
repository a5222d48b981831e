"""Schema oracle: every message acp_fast writes must match the official SDK's models.

The models in ``acp.schema`` (agent-client-protocol 0.12.1, generated from
schema v1.19.0) are the reference. They are lenient by design (unknown fields
ignored, lax coercion, "salvage on error" validators that replace a bad value
with a default), so validating alone would pass malformed output. The oracle
therefore also round-trips: the validated model dumped back (by alias, only
the fields that were set) must equal the original message, type for type
(``True`` is not ``1``). Anything the model ignored, coerced or salvaged shows
up as a difference.

What is checked, by the message's direction (agent -> client):

- a request: its params against the A->C request model of its method;
- a notification: its params against the notification model of its method;
- a response: its result against the response model of the C->A request it
  answers (looked up by id in what the client sent), or its error against
  ``Error``.

Extension methods (``_name``) carry any object. ``mcp/message`` results are
inner MCP results: any JSON value.

Where the schema and the wire reference disagree the schema wins; the
disagreements found are noted next to the table entry concerned.

A newer schema, as a file: every checking function also takes
``schema_file``, a protocol ``schema.json`` / ``schema.unstable.json``, such
as the ones ``@agentclientprotocol/sdk`` 2.4.0 bundles (``NPM_SCHEMA_UNSTABLE``;
tests/interop's devDependency, there after ``npm ci``; mark a test that needs
it with ``needs_npm_schema``). The method tables then come from the file's
own ``x-method`` definitions (``acp_fast.agent.schema_source``), each value is
checked with plain ``jsonschema`` (no round trip: the file is the JSON Schema
itself, not a lenient model), and a result for a method the file lacks
(``mcp/message`` or ``mcp/connect`` answered as a provider) is checked by its
envelope only.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from acp import schema as S
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError

from acp_fast.agent.schema_source import ERROR_DEF, load_file
from acp_fast.peer.connection import Connection

#: The protocol's schema files @agentclientprotocol/sdk 2.4.0 bundles (tests/interop devDependency).
NPM_SDK_DIR = Path(__file__).parent / "interop" / "node_modules" / "@agentclientprotocol" / "sdk"
NPM_SCHEMA_STABLE = NPM_SDK_DIR / "schema" / "v1" / "schema.json"
NPM_SCHEMA_UNSTABLE = NPM_SDK_DIR / "schema" / "v1" / "schema.unstable.json"
needs_npm_schema = pytest.mark.skipif(
    not NPM_SCHEMA_UNSTABLE.is_file(),
    reason="tests/interop/node_modules is absent (the @agentclientprotocol/sdk schema files): "
    "run `npm ci` in tests/interop, as CI does before pytest",
)

Validator = Callable[[Any], None]


class SchemaViolation(AssertionError):
    pass


def _same(a: Any, b: Any, path: str = "$") -> str | None:
    """The first difference between two JSON values, type-aware; None if equal."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None if type(a) is type(b) and a == b else f"{path}: {a!r} != {b!r}"
    if isinstance(a, int | float) and isinstance(b, int | float):
        return None if a == b else f"{path}: {a!r} != {b!r}"
    if type(a) is not type(b):
        return f"{path}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        for k in a.keys() | b.keys():
            if k not in b:
                return f"{path}.{k}: present in the message, dropped by the model (unknown or salvaged)"
            if k not in a:
                return f"{path}.{k}: added by the model"
            diff = _same(a[k], b[k], f"{path}.{k}")
            if diff:
                return diff
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items, model kept {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff = _same(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def _model(model: type[BaseModel] | Any) -> Validator:
    adapter: TypeAdapter[Any] = TypeAdapter(model)

    def check(obj: Any) -> None:
        try:
            value = adapter.validate_python(obj)
        except ValidationError as exc:
            raise SchemaViolation(f"{model!r}: {exc}") from None
        dumped = adapter.dump_python(value, mode="json", by_alias=True, exclude_unset=True)
        diff = _same(obj, dumped)
        if diff:
            raise SchemaViolation(f"{getattr(model, '__name__', model)}: {diff}")

    return check


def _any_json(obj: Any) -> None:
    orjson.dumps(obj)


def _object_or_none(obj: Any) -> None:
    if obj is not None and not isinstance(obj, dict):
        raise SchemaViolation(f"extension params must be an object, got {obj!r}")


class _ScopedMcpMessage(BaseModel):
    """``mcp/message`` of the request-scoped form (ACP schema 1.24: MessageMcpRequest and
    MessageMcpNotification, same fields); the installed SDK's models predate it."""

    model_config = ConfigDict(extra="forbid")
    server_id: StrictStr = Field(alias="serverId")
    request_id: StrictStr = Field(alias="requestId")
    method: StrictStr
    params: dict[str, Any] | None = None
    field_meta: dict[str, Any] | None = Field(None, alias="_meta")


class _McpErrorObject(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: StrictInt
    message: StrictStr
    data: Any = None


class _McpResultCarrier(BaseModel):
    model_config = ConfigDict(extra="forbid")
    result: Any
    field_meta: dict[str, Any] | None = Field(None, alias="_meta")


class _McpErrorCarrier(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: _McpErrorObject
    field_meta: dict[str, Any] | None = Field(None, alias="_meta")


#: The key ``request_methods_of`` files a request-scoped ``mcp/message`` under: its result is a carrier.
SCOPED_MCP = "mcp/message (request-scoped)"


def _is_scoped(params: Any) -> bool:
    return isinstance(params, dict) and "serverId" in params


def _by_form(connect: Validator, scoped: Validator) -> Validator:
    return lambda params: (scoped if _is_scoped(params) else connect)(params)


_ELICITATION = (
    S.CreateFormSessionElicitationRequest
    | S.CreateFormRequestElicitationRequest
    | S.CreateUrlSessionElicitationRequest
    | S.CreateUrlRequestElicitationRequest
)

#: A->C requests acp_fast may send, method -> params model.
AGENT_REQUESTS: dict[str, Validator] = {
    "session/request_permission": _model(S.RequestPermissionRequest),
    "fs/read_text_file": _model(S.ReadTextFileRequest),
    "fs/write_text_file": _model(S.WriteTextFileRequest),
    "terminal/create": _model(S.CreateTerminalRequest),
    "terminal/output": _model(S.TerminalOutputRequest),
    "terminal/wait_for_exit": _model(S.WaitForTerminalExitRequest),
    "terminal/kill": _model(S.KillTerminalRequest),
    "terminal/release": _model(S.ReleaseTerminalRequest),
    "elicitation/create": _model(_ELICITATION),
    "mcp/connect": _model(S.ConnectMcpRequest),
    "mcp/message": _by_form(_model(S.MessageMcpRequest), _model(_ScopedMcpMessage)),
    "mcp/disconnect": _model(S.DisconnectMcpRequest),
}

#: A->C notifications, method -> params model.
AGENT_NOTIFICATIONS: dict[str, Validator] = {
    "session/update": _model(S.SessionNotification),
    "elicitation/complete": _model(S.CompleteElicitationNotification),
    "mcp/message": _by_form(_model(S.MessageMcpNotification), _model(_ScopedMcpMessage)),
    # In the schema (CancelRequestNotification) but not in the SDK's meta.py method table.
    "$/cancel_request": _model(S.CancelRequestNotification),
}

#: C->A requests, method -> the model of the agent's result.
RESPONSES: dict[str, Validator] = {
    "initialize": _model(S.InitializeResponse),
    "authenticate": _model(S.AuthenticateResponse),
    "logout": _model(S.LogoutResponse),
    "session/new": _model(S.NewSessionResponse),
    "session/load": _model(S.LoadSessionResponse),
    "session/resume": _model(S.ResumeSessionResponse),
    "session/fork": _model(S.ForkSessionResponse),
    "session/list": _model(S.ListSessionsResponse),
    "session/delete": _model(S.DeleteSessionResponse),
    "session/close": _model(S.CloseSessionResponse),
    "session/set_mode": _model(S.SetSessionModeResponse),
    "session/set_config_option": _model(S.SetSessionConfigOptionResponse),
    "session/prompt": _model(S.PromptResponse),
    # The schema only has mcp/connect and mcp/disconnect as A->C (client-hosted
    # servers); for the provider role (C->A) the same result shapes apply.
    "mcp/connect": _model(S.ConnectMcpResponse),
    "mcp/disconnect": _model(S.DisconnectMcpResponse),
    "mcp/message": _any_json,  # the inner MCP result, verbatim
    SCOPED_MCP: _model(_McpResultCarrier | _McpErrorCarrier),  # exactly one inner outcome
}

_error = _model(S.Error)


class _Tables(NamedTuple):
    requests: dict[str, Validator]
    notifications: dict[str, Validator]
    responses: dict[str, Validator]
    error: Validator
    unknown_result: Validator | None  # for a method not in ``responses``; None: it should have been refused


_SDK_TABLES = _Tables(AGENT_REQUESTS, AGENT_NOTIFICATIONS, RESPONSES, _error, None)


@functools.cache
def _file_tables(path: str) -> _Tables:
    """The tables of a schema file: its own method -> definition maps, each checked with plain jsonschema."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    schema = load_file(path)

    def definition(name: str) -> Validator:
        validator = Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema.defs})

        def check(obj: Any) -> None:
            error = best_match(validator.iter_errors(obj))
            if error is not None:
                raise SchemaViolation(f"{name} {error.json_path}: {error.message}")

        return check

    def table(methods: dict[str, str]) -> dict[str, Validator]:
        return {method: definition(name) for method, name in methods.items()}

    requests, notifications, results = table(schema.requests), table(schema.notifications), table(schema.results)
    _keep_connect_form(requests, AGENT_REQUESTS)
    _keep_connect_form(notifications, AGENT_NOTIFICATIONS)
    if "mcp/message" in results:  # a file of schema 1.24 on: its mcp/message result is the scoped one
        results[SCOPED_MCP] = results["mcp/message"]
        results["mcp/message"] = RESPONSES["mcp/message"]
    for method in ("mcp/connect", "mcp/disconnect"):
        results.setdefault(method, RESPONSES[method])
    return _Tables(requests, notifications, results, definition(ERROR_DEF), _any_json)


def _keep_connect_form(table: dict[str, Validator], sdk: dict[str, Validator]) -> None:
    """The connect form of MCP over ACP, which R17 keeps for peers that speak it, checked by the SDK
    models that define it: a schema file of 1.24 on has only the request-scoped ``mcp/message``."""
    for method in ("mcp/connect", "mcp/disconnect"):
        if method in sdk:
            table.setdefault(method, sdk[method])
    scoped = table.get("mcp/message")
    if "mcp/message" in sdk:
        table["mcp/message"] = sdk["mcp/message"] if scoped is None else _by_form(sdk["mcp/message"], scoped)


def _tables(schema_file: Path | str | None) -> _Tables:
    return _SDK_TABLES if schema_file is None else _file_tables(str(Path(schema_file).resolve()))


def _check_id(msg: dict[str, Any], allow_null: bool) -> None:
    rid = msg.get("id")
    ok = (rid is None and allow_null) or type(rid) is str or (type(rid) is int and -(2**63) <= rid < 2**63)
    if not ok:
        raise SchemaViolation(f"bad id {rid!r} in {msg!r}")


def check_agent_message(
    msg: Any, request_methods: dict[Any, str] | None, schema_file: Path | str | None = None
) -> None:
    """Validate one message the agent wrote; ``request_methods`` maps client request ids to methods."""
    tables = _tables(schema_file)
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise SchemaViolation(f"not a JSON-RPC 2.0 object: {msg!r}")
    method = msg.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise SchemaViolation(f"method must be a string: {msg!r}")
        if set(msg) - {"jsonrpc", "id", "method", "params"}:
            raise SchemaViolation(f"unknown envelope fields in {msg!r}")
        params = msg.get("params")
        if "id" in msg:
            _check_id(msg, allow_null=False)
            table = tables.requests
        else:
            table = tables.notifications
        if method.startswith("_"):
            _object_or_none(params)
            return
        check = table.get(method)
        if check is None:
            kind = "request" if "id" in msg else "notification"
            raise SchemaViolation(f"acp_fast sent {kind} {method!r}, which is no agent->client {kind} of ACP")
        check(params)
        return
    _check_id(msg, allow_null=True)
    if ("result" in msg) == ("error" in msg) or set(msg) - {"jsonrpc", "id", "result", "error"}:
        raise SchemaViolation(f"a response needs exactly one of result/error: {msg!r}")
    if "error" in msg:
        tables.error(msg["error"])
        return
    if request_methods is None:
        return  # unknown request: only the envelope can be checked
    answered = request_methods.get(msg["id"])
    if answered is None:
        raise SchemaViolation(f"response to id {msg['id']!r}, which the client never sent")
    if answered.startswith("_"):
        _any_json(msg["result"])
        return
    check = tables.responses.get(answered, tables.unknown_result)
    if check is None:
        raise SchemaViolation(f"result for {answered!r}, which should have been refused: {msg!r}")
    check(msg["result"])


def request_methods_of(sent: Iterable[Any]) -> dict[Any, str]:
    """id -> method for every request in what the client sent."""
    return {
        m["id"]: SCOPED_MCP if m["method"] == "mcp/message" and _is_scoped(m.get("params")) else m["method"]
        for m in sent
        if isinstance(m, dict) and isinstance(m.get("method"), str) and m.get("id") is not None
    }


def assert_messages_valid(
    written: Iterable[Any], sent: Iterable[Any] | None, schema_file: Path | str | None = None
) -> int:
    """Validate every message the agent wrote (against ``schema_file`` if given); returns how many."""
    methods = request_methods_of(sent) if sent is not None else None
    n = 0
    for msg in written:
        try:
            check_agent_message(msg, methods, schema_file)
        except SchemaViolation as exc:
            raise SchemaViolation(f"{exc}\n  in message: {orjson.dumps(msg).decode()}") from None
        n += 1
    return n


def record_sent(h: Any) -> Any:
    """Make a Harness remember what the test client sends (call it before sending)."""
    sent: list[Any] = []
    send_raw = h.send_raw

    def recording(data: bytes) -> None:
        for line in bytes(data).split(b"\n"):
            if line.strip():
                with contextlib.suppress(orjson.JSONDecodeError):  # bad input on purpose
                    sent.append(orjson.loads(line))
        send_raw(data)

    h.send_raw = recording
    h.sent = sent
    return h


def assert_schema_valid(h: Any, schema_file: Path | str | None = None) -> int:
    """Validate everything in ``h.messages`` (a Harness); results fully if ``record_sent(h)`` ran."""
    return assert_messages_valid(h.messages, getattr(h, "sent", None), schema_file)


class Transcript:
    """Both directions of a client-side Connection, recorded for the oracle (pipes, e2e)."""

    def __init__(self, conn: Connection) -> None:
        self.received: list[Any] = []  # written by the agent
        self.sent: list[Any] = []  # written by the client
        feed_line, write = conn.feed_line, conn.writer.write

        def on_line(line: bytes | memoryview) -> None:
            try:
                self.received.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                self.received.append({"unparseable": bytes(line).decode("utf-8", "replace")})
            feed_line(line)

        def on_write(data: bytes) -> None:
            for line in data.split(b"\n"):
                if line.strip():
                    self.sent.append(orjson.loads(line))
            write(data)

        conn.feed_line = on_line  # type: ignore[method-assign]
        conn.writer.write = on_write  # type: ignore[method-assign]

    def assert_valid(self, schema_file: Path | str | None = None) -> int:
        return assert_messages_valid(self.received, self.sent, schema_file)
