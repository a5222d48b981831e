"""Checking every message an agent writes against the ACP JSON schema: a debug aid.

Off unless ``ACP_FAST_VALIDATE=1`` (the CLI's ``--validate`` sets it). When
off nothing is installed, so the write path is exactly the one benchmarked.
When on, ``install`` wraps two bound methods of one connection: the writer's
``write`` (every outgoing message passes through it) and ``feed_line`` (to
learn which method each client request named, since a result's shape depends
on it). A violation is logged to stderr with the JSON path of the offending
value and the message is still sent: the aim is to show a bug, not to change
what the client sees.

The schema is the official SDK's: its pydantic models are generated from the
protocol's ``schema.json``, and emit it back as JSON Schema, which
``jsonschema`` checks. Both come with the ``validate`` extra.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, Literal

import orjson

from ..peer.connection import Connection

log = logging.getLogger(__name__)

ENV_VAR = "ACP_FAST_VALIDATE"

#: Agent -> client requests: method -> the SDK model of its params.
REQUEST_PARAMS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "elicitation/create": "CreateElicitationRequest",
    "mcp/connect": "ConnectMcpRequest",
    "mcp/message": "MessageMcpRequest",
    "mcp/disconnect": "DisconnectMcpRequest",
}

#: Agent -> client notifications: method -> the SDK model of its params.
NOTIFICATION_PARAMS = {
    "session/update": "SessionNotification",
    "elicitation/complete": "CompleteElicitationNotification",
    "mcp/message": "MessageMcpNotification",
    "$/cancel_request": "CancelRequestNotification",
}

#: Client -> agent requests: method -> the SDK model of the agent's result.
#: ``mcp/message`` is absent on purpose: its result is the inner MCP result, any JSON.
RESULTS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "logout": "LogoutResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/fork": "ForkSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/delete": "DeleteSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
    "mcp/connect": "ConnectMcpResponse",
    "mcp/disconnect": "DisconnectMcpResponse",
}

_ERROR_MODEL = "Error"


def enabled() -> bool:
    """Whether the environment asks for outgoing validation."""
    return os.environ.get(ENV_VAR, "") not in ("", "0")


def unavailable() -> str | None:
    """Why validation cannot run in this environment, or None if it can."""
    missing = [name for name in ("jsonschema", "acp") if importlib.util.find_spec(name) is None]
    if missing:
        return f"needs {' and '.join(missing)}: pip install 'acp-fast[validate]'"
    return None


class OutgoingValidator:
    """The ACP schema as one JSON Schema document, with a validator per message kind."""

    def __init__(self) -> None:
        problem = unavailable()
        if problem:
            raise RuntimeError(f"{ENV_VAR}=1: {problem}")
        import jsonschema.validators
        from acp import schema as sdk_schema
        from pydantic import TypeAdapter
        from pydantic.json_schema import GenerateJsonSchema

        names = sorted({*REQUEST_PARAMS.values(), *NOTIFICATION_PARAMS.values(), *RESULTS.values(), _ERROR_MODEL})
        mode: Literal["validation"] = "validation"
        keyed = [(name, mode, TypeAdapter(getattr(sdk_schema, name))) for name in names]
        refs, document = TypeAdapter.json_schemas(
            keyed, ref_template="#/$defs/{model}", schema_generator=GenerateJsonSchema
        )
        defs = document.get("$defs", {})
        _replace_discriminated_unions(defs)
        cls = jsonschema.validators.extend(
            jsonschema.validators.Draft202012Validator, {"discriminator": _check_discriminator}
        )
        self._validators: dict[str, Any] = {
            name: cls({**refs[(name, "validation")], "$defs": defs}) for name, _, _ in keyed
        }
        self._methods: dict[Any, str] = {}

    # -- what the client asked -------------------------------------------------------
    def note_incoming(self, line: bytes | memoryview) -> None:
        """Remember the method of a client request, to pick the schema of its result."""
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if isinstance(msg, dict) and isinstance(msg.get("method"), str) and msg.get("id") is not None:
            rid = msg["id"]
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                # Bounded by the requests in flight: each entry leaves with its answer.
                self._methods[rid] = msg["method"]

    # -- what the agent writes -------------------------------------------------------
    def check(self, msg: Any) -> list[str]:
        """Every violation in one outgoing message, as "JSON path: what is wrong"."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return ['$: not a JSON-RPC 2.0 message object (needs "jsonrpc": "2.0")']
        method = msg.get("method")
        if method is not None:
            return self._check_call(msg, method)
        return self._check_response(msg)

    def _check_call(self, msg: dict[str, Any], method: Any) -> list[str]:
        if not isinstance(method, str):
            return [f"$.method: must be a string, got {method!r}"]
        is_request = "id" in msg
        if is_request and not _valid_id(msg["id"], allow_null=False):
            return [f"$.id: a request id is a string or an integer, got {msg['id']!r}"]
        extra = set(msg) - {"jsonrpc", "id", "method", "params"}
        if extra:
            return [f"$: unknown envelope field(s) {sorted(extra)}"]
        params = msg.get("params")
        if method.startswith("_"):  # extension method: any object
            ok = params is None or isinstance(params, dict)
            return [] if ok else [f"$.params: must be an object, got {params!r}"]
        table = REQUEST_PARAMS if is_request else NOTIFICATION_PARAMS
        model = table.get(method)
        if model is None:
            kind = "request" if is_request else "notification"
            return [f"$.method: {method!r} is no agent-to-client {kind} of ACP"]
        return self._validate(model, params, "$.params")

    def _check_response(self, msg: dict[str, Any]) -> list[str]:
        rid = msg.get("id")
        if "id" not in msg or not _valid_id(rid, allow_null=True):
            return [f"$.id: a response id is a string, an integer or null, got {rid!r}"]
        method = self._methods.pop(rid, None) if isinstance(rid, str | int) else None
        if ("result" in msg) == ("error" in msg) or set(msg) - {"jsonrpc", "id", "result", "error"}:
            return ["$: a response has exactly one of result/error and nothing else besides jsonrpc and id"]
        if "error" in msg:
            return self._validate(_ERROR_MODEL, msg["error"], "$.error")
        model = RESULTS.get(method) if method is not None else None
        if model is None:
            return []  # an extension method, mcp/message, or a request not seen: any result
        return self._validate(model, msg["result"], "$.result")

    def _validate(self, model: str, value: Any, prefix: str) -> list[str]:
        found = []
        for error in self._validators[model].iter_errors(value):
            for leaf in _leaves(error):
                found.append(f"{prefix}{leaf.json_path[1:]}: {leaf.message} ({model})")
        return found


def _valid_id(rid: Any, allow_null: bool) -> bool:
    if rid is None:
        return allow_null
    return isinstance(rid, str) or (type(rid) is int and -(2**63) <= rid < 2**63)


def _leaves(error: Any) -> Iterator[Any]:
    """The most telling error under an anyOf/oneOf failure ("not valid under any" says little).

    Branches that only admit ``null`` or one constant are passed over when
    another branch has something to say: for an optional enum, "not one of
    [...]" helps, "is not of type 'null'" does not.
    """
    if not error.context:
        yield error
        return
    from jsonschema.exceptions import best_match

    telling = [e for e in error.context if not _is_alternative_noise(e)] or list(error.context)
    yield from _leaves(best_match(telling))


def _is_alternative_noise(error: Any) -> bool:
    return bool(error.validator == "const" or (error.validator == "type" and error.validator_value == "null"))


def _replace_discriminated_unions(node: Any) -> None:
    """Drop ``oneOf`` where pydantic also wrote a discriminator; ``_check_discriminator`` applies it.

    A tagged union checked as plain ``oneOf`` reports a wrong tag as "not valid
    under any of the given schemas"; checking the tag first names the field.
    """
    if isinstance(node, dict):
        if "discriminator" in node and "oneOf" in node and "mapping" in node["discriminator"]:
            del node["oneOf"]
        for value in node.values():
            _replace_discriminated_unions(value)
    elif isinstance(node, list):
        for value in node:
            _replace_discriminated_unions(value)


def _check_discriminator(validator: Any, discriminator: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """Check a tagged union by its tag: an unknown tag is reported on the tag itself."""
    from jsonschema.exceptions import ValidationError

    mapping = discriminator.get("mapping")
    if not mapping:
        return  # no mapping: the oneOf was kept and does the checking
    if not validator.is_type(instance, "object"):
        yield ValidationError(f"{instance!r} is not of type 'object'")
        return
    tag_name = discriminator["propertyName"]
    if tag_name not in instance:
        yield ValidationError(f"{tag_name!r} is a required property")
        return
    target = mapping.get(instance[tag_name])
    if target is None:
        yield from validator.descend(instance[tag_name], {"enum": sorted(mapping)}, path=tag_name)
        return
    yield from validator.descend(instance, {"$ref": target})


def install(conn: Connection) -> OutgoingValidator:
    """Validate everything ``conn`` writes from now on (see the module docstring)."""
    checker = OutgoingValidator()
    write: Callable[[bytes], None] = conn.writer.write
    feed_line: Callable[[bytes | memoryview], None] = conn.feed_line

    def checked_write(data: bytes) -> None:
        for line in bytes(data).split(b"\n"):
            if not line.strip():
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                log.warning("schema violation: the agent wrote a line that is not JSON (%s): %.200r", exc, line)
                continue
            for violation in checker.check(msg):
                log.warning("schema violation in %s: %s", _describe(msg), violation)
        write(data)

    def noted_feed_line(line: bytes | memoryview) -> None:
        checker.note_incoming(line)
        feed_line(line)

    conn.writer.write = checked_write  # type: ignore[method-assign]
    conn.feed_line = noted_feed_line  # type: ignore[method-assign]
    log.info("outgoing messages are checked against the ACP schema (%s=1)", ENV_VAR)
    return checker


def _describe(msg: Any) -> str:
    if not isinstance(msg, dict):
        return "a message"
    if isinstance(msg.get("method"), str):
        kind = "request" if "id" in msg else "notification"
        return f"{msg['method']} {kind}"
    return f"the response to id {msg.get('id')!r}"
