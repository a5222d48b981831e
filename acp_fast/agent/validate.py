"""Checking every message an agent writes against the ACP JSON schema: a debug aid.

Off unless ``ACP_FAST_VALIDATE=1`` (the CLI's ``--validate`` sets it). When
off nothing is installed, so the write path is exactly the one benchmarked.
When on, ``install`` wraps two bound methods of one connection: the writer's
``write`` (every outgoing message passes through it) and ``feed_line`` (to
learn which method each client request named, since a result's shape depends
on it). A violation is logged to stderr with the JSON path of the offending
value and the message is still sent: the aim is to show a bug, not to change
what the client sees.

The schema is a protocol schema file named by ``ACP_FAST_VALIDATE_SCHEMA``
(``--validate-schema``), else the installed SDK's pydantic models emitted as
JSON Schema; ``schema_source`` says why in that order and names the revision.
``jsonschema`` checks it; it and the SDK come with the ``validate`` extra.
The first connection checked logs that revision as a warning, so a plain run
shows what the agent is held to (later connections log it at info level).
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ..peer.connection import Connection
from . import schema_source
from .schema_source import SCHEMA_ENV_VAR, Schema, describe

log = logging.getLogger(__name__)

ENV_VAR = "ACP_FAST_VALIDATE"

__all__ = ["ENV_VAR", "SCHEMA_ENV_VAR", "OutgoingValidator", "describe", "enabled", "install", "unavailable"]


def enabled() -> bool:
    """Whether the environment asks for outgoing validation."""
    return os.environ.get(ENV_VAR, "") not in ("", "0")


def unavailable() -> str | None:
    """Why validation cannot run in this environment, or None if it can (the schema is loaded then)."""
    return schema_source.unavailable()


class OutgoingValidator:
    """One ACP schema (see ``schema_source``), with a validator per message kind, built on first use."""

    def __init__(self, schema: Schema | None = None) -> None:
        if schema is None:
            problem = unavailable()
            if problem:
                raise RuntimeError(f"{ENV_VAR}=1: {problem}")
            schema = schema_source.load()
        self.schema = schema
        self._validators = _validators_for(schema)
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
        table = self.schema.requests if is_request else self.schema.notifications
        model = table.get(method)
        if method.startswith("mcp/") and not _describes_form(self.schema, model, params):
            return []  # R17: the wire form this schema predates or retired is not checked
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
            return self._validate(schema_source.ERROR_DEF, msg["error"], "$.error")
        model = self.schema.results.get(method) if method is not None else None
        if model is None:
            return []  # an extension method, mcp/message, a method the schema lacks, a request not seen
        return self._validate(model, msg["result"], "$.result")

    def _validate(self, model: str, value: Any, prefix: str) -> list[str]:
        found = []
        for error in self._validators(model).iter_errors(value):
            for leaf in _leaves(error):
                found.append(f"{prefix}{leaf.json_path[1:]}: {leaf.message} ({model})")
        return found


def _describes_form(schema: Schema, model: str | None, params: Any) -> bool:
    """Whether ``schema`` describes the MCP-over-ACP form (R17) an ``mcp/*`` message is in.

    Schemas before 1.24 have the connect form only (``connectionId``), later
    ones the request-scoped form only (``serverId`` with ``requestId``, no
    ``mcp/connect``); acp_fast speaks both, so a message is checked against
    the form the loaded schema has and passed when it has not that form.
    """
    if model is None:
        return False
    definition = schema.defs.get(model)
    props = definition.get("properties") if isinstance(definition, dict) else None
    if not isinstance(props, dict):
        return True
    return ("serverId" if isinstance(params, dict) and "serverId" in params else "connectionId") in props


def _valid_id(rid: Any, allow_null: bool) -> bool:
    if rid is None:
        return allow_null
    return isinstance(rid, str) or (type(rid) is int and -(2**63) <= rid < 2**63)


def _leaves(error: Any) -> Iterator[Any]:
    """The most telling error under an anyOf/oneOf failure ("not valid under any" says little).

    Branches that only admit ``null`` or one constant are passed over when
    another branch has something to say: for an optional enum, "not one of
    [...]" helps, "is not of type 'null'" does not. An enum written as one
    ``const`` per branch (as the protocol's schema files write them) is reported
    as one "not one of [...]".
    """
    if not error.context:
        yield error
        return
    from jsonschema.exceptions import best_match

    constants = [e.validator_value for e in error.context if e.validator == "const"]
    if len(constants) == len(error.context) and all(not e.relative_path for e in error.context):
        error.message = f"{error.instance!r} is not one of {constants!r}"
        yield error
        return
    telling = [e for e in error.context if not _is_alternative_noise(e)] or list(error.context)
    yield from _leaves(best_match(telling))


def _is_alternative_noise(error: Any) -> bool:
    return bool(error.validator == "const" or (error.validator == "type" and error.validator_value == "null"))


#: A private keyword: a tagged union's tag value -> the schema of its branch.
_TAGS = "x-acp-fast-tags"


@functools.cache
def _validators_for(schema: Schema) -> Callable[[str], Any]:
    """A validator per definition of ``schema``, built on first use and shared by every connection."""
    import jsonschema.validators

    defs = copy.deepcopy(schema.defs)  # tagging rewrites them; the loaded schema stays as read
    _tag_unions(defs)
    cls = jsonschema.validators.extend(
        jsonschema.validators.Draft202012Validator, {"discriminator": _check_discriminator}
    )

    @functools.cache
    def validator(name: str) -> Any:
        return cls({"$ref": f"#/$defs/{name}", "$defs": defs})

    return validator


def _tag_unions(node: Any) -> None:
    """Replace the ``oneOf`` of each tagged union by a tag -> branch table ``_check_discriminator`` reads.

    A tagged union checked as plain ``oneOf`` reports a wrong tag as "not valid
    under any of the given schemas"; checking the tag first names the field.
    pydantic writes the tags as ``discriminator.mapping``; the protocol's schema
    files write only ``propertyName`` and pin the tag in each branch with
    ``const``. A union whose branches do not all pin a distinct tag keeps its ``oneOf``.
    """
    if isinstance(node, dict):
        discriminator, branches = node.get("discriminator"), node.get("oneOf")
        if isinstance(discriminator, dict) and isinstance(branches, list):
            tags = _tags_of(discriminator, branches)
            if tags is not None:
                del node["oneOf"]
                node[_TAGS] = tags
        for value in node.values():
            _tag_unions(value)
    elif isinstance(node, list):
        for value in node:
            _tag_unions(value)


def _tags_of(discriminator: dict[str, Any], branches: list[Any]) -> dict[str, Any] | None:
    mapping = discriminator.get("mapping")
    if isinstance(mapping, dict):
        return {tag: {"$ref": target} for tag, target in mapping.items()}
    name, tags = discriminator.get("propertyName"), {}
    for branch in branches:
        pinned = branch.get("properties", {}).get(name, {}) if isinstance(branch, dict) else {}
        tag = pinned.get("const") if isinstance(pinned, dict) else None
        if not isinstance(tag, str) or tag in tags:
            return None
        tags[tag] = branch
    return tags


def _check_discriminator(validator: Any, discriminator: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """Check a tagged union by its tag: an unknown tag is reported on the tag itself."""
    from jsonschema.exceptions import ValidationError

    tags = schema.get(_TAGS)
    if tags is None:
        return  # not tagged: the oneOf was kept and does the checking
    if not validator.is_type(instance, "object"):
        yield ValidationError(f"{instance!r} is not of type 'object'")
        return
    tag_name = discriminator["propertyName"]
    if tag_name not in instance:
        yield ValidationError(f"{tag_name!r} is a required property")
        return
    tag = instance[tag_name]
    branch = tags.get(tag) if isinstance(tag, str) else None
    if branch is None:
        yield from validator.descend(tag, {"enum": sorted(tags)}, path=tag_name)
        return
    yield from validator.descend(instance, branch)


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
    level = logging.INFO if checker.schema.revision in _announced else logging.WARNING
    _announced.add(checker.schema.revision)
    log.log(level, "outgoing messages are checked against the ACP schema %s (%s=1)", checker.schema.revision, ENV_VAR)
    return checker


#: The schema revisions already named at warning level in this process.
_announced: set[str] = set()


def _describe(msg: Any) -> str:
    if not isinstance(msg, dict):
        return "a message"
    if isinstance(msg.get("method"), str):
        kind = "request" if "id" in msg else "notification"
        return f"{msg['method']} {kind}"
    return f"the response to id {msg.get('id')!r}"
