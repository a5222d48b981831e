"""The ACP v1 method table: wire name, lane, Python name, params, gate (R01, R02).

This table is the single source of truth for which lane a method runs in.
Control-lane methods run one at a time on the dispatch loop, in arrival
order, and finish updating the connection context before the next message
(R01). Background-lane methods run in the bounded pool with a snapshot of
the context (R02). Extension methods (``_name``) are control-lane unless the
agent declares them background.

Params are checked against the field list before the handler runs: a missing
or ill-typed required field gets -32602 naming it. Wire names are camelCase;
handlers receive snake_case keyword arguments. A field the table does not
declare is passed on too, under its snake_case name (ACP adds optional fields
over time, and an agent can read one before acp_fast declares it); the server
gives it only to handlers that can take it (see ``server``). ``_meta`` arrives
as ``field_meta`` (the official SDK's name), a malformed ``_meta`` is dropped,
not refused, and neither it nor an undeclared field ever replaces a declared one.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable
from typing import Any, Final

from ..wire import extensions
from ..wire.errors import InvalidParams

log = logging.getLogger(__name__)

PROTOCOL_VERSION: Final = 1
SUPPORTED_PROTOCOL_VERSIONS: Final = frozenset({1})


class Lane(enum.Enum):
    CONTROL = "control"
    BACKGROUND = "background"


Check = Callable[[Any], bool]


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_obj(v: Any) -> bool:
    return type(v) is dict


def _is_list(v: Any) -> bool:
    return type(v) is list


def _is_str_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


if os.name == "posix":  # what posixpath.isabs tests, without its two calls

    def _is_abs_path(v: Any) -> bool:
        return type(v) is str and v.startswith("/")

else:  # pragma: no cover

    def _is_abs_path(v: Any) -> bool:
        return type(v) is str and os.path.isabs(v)


def _is_abs_path_list(v: Any) -> bool:
    return type(v) is list and all(_is_abs_path(x) for x in v)


def _is_content_list(v: Any) -> bool:
    return type(v) is list and all(type(b) is dict and type(b.get("type")) is str for b in v)


def _is_config_value(v: Any) -> bool:
    return type(v) is str or type(v) is bool


def _is_request_id(v: Any) -> bool:
    return type(v) is str or type(v) is int


_EXPECT: Final[dict[Check, str]] = {
    _is_str: "a string",
    _is_int: "an integer",
    _is_obj: "an object",
    _is_list: "an array",
    _is_str_list: "an array of strings",
    _is_abs_path: "an absolute path",
    _is_abs_path_list: "an array of absolute paths",
    _is_content_list: "an array of content blocks (objects with a string 'type')",
    _is_config_value: "a string or a boolean",
    _is_request_id: "a string or an integer",
}


#: Checks that are one exact-type test: parse compares ``type(value)`` inline instead of calling them.
_PLAIN_TYPE: Final[dict[Check, type]] = {_is_str: str, _is_int: int, _is_obj: dict, _is_list: list}


class Field:
    """One params field. A plain class: a dataclass generates and compiles code at import, paid at every start-up.

    ``required``: True (missing or null is -32602), False (missing is None in
    the kwargs) or None (missing is left out of the kwargs: the fields ACP
    added after handlers were written against it, so that a handler without
    ``**kwargs`` is not handed an argument it cannot take).
    """

    __slots__ = ("check", "py", "required", "wire")

    def __init__(self, wire: str, py: str, check: Check, required: bool | None = True) -> None:
        self.wire = wire
        self.py = py
        self.check = check
        self.required = required

    def __repr__(self) -> str:
        return f"Field({self.wire!r}, required={self.required})"


def _snake(wire: str) -> str:
    """``clientCapabilities`` -> ``client_capabilities`` (no regex: compiling one would be paid at every start-up)."""
    return wire[:1] + "".join("_" + c.lower() if c.isupper() else c for c in wire[1:])


def _f(wire: str, check: Check, required: bool | None = True) -> Field:
    return Field(wire, _snake(wire), check, required)


#: One field as parse walks it: (wire, py, exact type or None, check, required).
_Step = tuple[str, str, "type | None", Check, "bool | None"]


class MethodSpec:
    """One row of the method table (a plain class, as Field); ``attr`` is the Agent method that handles it."""

    __slots__ = ("_steps", "attr", "fields", "lane", "method", "notification")

    def __init__(
        self, method: str, lane: Lane, attr: str, fields: tuple[Field, ...], notification: bool = False
    ) -> None:
        self.method = method
        self.lane = lane
        self.attr = attr
        self.fields = fields
        self.notification = notification
        self._steps: tuple[_Step, ...] = tuple(
            (f.wire, f.py, _PLAIN_TYPE.get(f.check), f.check, f.required) for f in fields
        )

    def __repr__(self) -> str:
        return f"MethodSpec({self.method!r}, {self.lane.name})"

    def parse(self, params: Any) -> dict[str, Any]:
        """Validate wire params and return handler kwargs (snake_case).

        Runs for every request: the walk over the fields is compiled
        (``_walk_fields`` says what it does); plain type checks are inline
        comparisons, the rest one call each.
        """
        if type(params) is not dict:
            if params is not None:
                raise InvalidParams(f"Invalid params for {self.method}: expected an object")
            params = {}
        got = _walk(params, self._steps, add_undeclared)
        if type(got) is dict:
            return got
        wire, _py, _kind, check, _required = self._steps[got]  # type: ignore[index]
        if params.get(wire) is None:
            raise InvalidParams(
                f"Invalid params for {self.method}: missing required field {wire!r}", {"field": wire}
            )
        raise InvalidParams(
            f"Invalid params for {self.method}: field {wire!r} must be {_EXPECT[check]}", {"field": wire}
        )


#: Adds the fields no step declares to the kwargs (``add_undeclared``).
Undeclared = Callable[[dict[str, Any], tuple[_Step, ...], dict[str, Any]], None]


def _walk_fields(params: dict[str, Any], steps: tuple[_Step, ...], undeclared: Undeclared) -> dict[str, Any] | int:
    """The kwargs for ``params``, or the index of the first field that is missing or ill-typed.

    A missing or null field is None in the kwargs (left out when its
    ``required`` is None), or the failure when it is required; a present one
    must be of the exact type, or pass ``check`` when there is none. A
    ``_meta`` object becomes ``field_meta`` (anything else there is dropped,
    not refused). When ``params`` holds more keys than the declared ones
    found, ``undeclared`` adds the rest: the common request pays one count.
    """
    kwargs: dict[str, Any] = {}
    found = 0
    for i, (wire, py, kind, check, required) in enumerate(steps):
        value = params.get(wire)
        if value is None:
            if required:
                return i
            if required is False:
                kwargs[py] = None
        elif type(value) is kind or (kind is None and check(value)):
            kwargs[py] = value
            found += 1
        else:
            return i
    meta = params.get("_meta")
    if meta is not None:
        found += 1
        if type(meta) is dict:
            kwargs["field_meta"] = meta
    if found < len(params):
        undeclared(params, steps, kwargs)
    return kwargs


def add_undeclared(params: dict[str, Any], steps: tuple[_Step, ...], kwargs: dict[str, Any]) -> None:
    """Add the fields of ``params`` no step declares, under their snake_case names.

    One that would replace a declared field or ``field_meta`` (``session_id``
    beside ``sessionId``) is dropped: the declared value always wins.
    """
    declared = {step[0] for step in steps}
    for wire, value in params.items():
        if wire in declared or wire == "_meta":
            continue
        py = _snake(wire)
        if py in kwargs or py == "field_meta" or any(step[1] == py for step in steps):
            log.debug("undeclared field %r dropped: its name %r is a declared one", wire, py)
            continue
        kwargs[py] = value


#: The field walk ``parse`` uses: the compiled one (wire/_decode.pyx) unless
#: ACP_FAST_NO_EXTENSIONS=1 or it is not built; same results
#: (tests/test_methods_params.py holds them to it).
_walk: Callable[[dict[str, Any], tuple[_Step, ...], Undeclared], dict[str, Any] | int] = _walk_fields
WALK_IMPLEMENTATION = "python"
_compiled_walk = extensions.load("acp_fast.wire._decode")
if _compiled_walk is not None:
    _walk = _compiled_walk.walk_fields
    WALK_IMPLEMENTATION = "c"


_C, _B = Lane.CONTROL, Lane.BACKGROUND
_SID = _f("sessionId", _is_str)
_CWD = _f("cwd", _is_abs_path)
_DIRS = _f("additionalDirectories", _is_abs_path_list, False)
#: Schema 1.30: client-provided system instructions on every opening method; the server
#: checks the mode and content against what the agent declares (``Agent.system_prompt_modes``).
_SYSTEM_PROMPT = _f("systemPrompt", _is_obj, None)
_PROVIDER = _f("providerId", _is_str)

_SPECS: Final = (
    MethodSpec(
        "initialize",
        _C,
        "initialize",
        (
            _f("protocolVersion", _is_int),
            _f("clientCapabilities", _is_obj, False),
            _f("clientInfo", _is_obj, False),
        ),
    ),
    MethodSpec("authenticate", _C, "authenticate", (_f("methodId", _is_str),)),
    MethodSpec("logout", _C, "logout", ()),
    MethodSpec("session/new", _C, "new_session", (_CWD, _f("mcpServers", _is_list), _DIRS, _SYSTEM_PROMPT)),
    MethodSpec(
        "session/load",
        _C,
        "load_session",
        (_SID, _CWD, _f("mcpServers", _is_list), _DIRS, _SYSTEM_PROMPT),
    ),
    MethodSpec(
        "session/resume",
        _C,
        "resume_session",
        (_SID, _CWD, _f("mcpServers", _is_list, False), _DIRS, _SYSTEM_PROMPT),
    ),
    MethodSpec(
        "session/fork",
        _C,
        "fork_session",
        (_SID, _CWD, _f("mcpServers", _is_list, False), _DIRS, _SYSTEM_PROMPT),
    ),
    MethodSpec(
        "session/list",
        _C,
        "list_sessions",
        (_f("cwd", _is_abs_path, False), _f("cursor", _is_str, False), _f("archived", _is_str, None)),
    ),
    MethodSpec("session/delete", _C, "delete_session", (_SID,)),
    MethodSpec("session/close", _C, "close_session", (_SID,)),
    MethodSpec("session/set_mode", _C, "set_session_mode", (_SID, _f("modeId", _is_str))),
    MethodSpec(
        "session/set_config_option",
        _C,
        "set_config_option",
        (_SID, _f("configId", _is_str), _f("value", _is_config_value), _f("type", _is_str, False)),
    ),
    MethodSpec("session/prompt", _B, "prompt", (_SID, _f("prompt", _is_content_list))),
    MethodSpec("session/cancel", _C, "cancel", (_SID,), notification=True),
    MethodSpec(
        "$/cancel_request", _C, "cancel_request", (_f("requestId", _is_request_id),), notification=True
    ),
    # Unstable (schema 1.29-1.32), served only to agents that implement them. Control lane: each
    # reads or changes session or auth state that the next request may depend on (R01), and none
    # waits for the client.
    MethodSpec("session/archive", _C, "archive_session", (_SID,)),
    MethodSpec("session/unarchive", _C, "unarchive_session", (_SID,)),
    MethodSpec("session/status", _C, "session_status", (_SID,)),
    MethodSpec("session/set_title", _C, "set_session_title", (_SID, _f("title", _is_str))),
    MethodSpec("auth/status", _C, "auth_status", ()),
    MethodSpec("providers/list", _C, "list_providers", ()),
    MethodSpec(
        "providers/set",
        _C,
        "set_provider",
        (_PROVIDER, _f("apiType", _is_str), _f("baseUrl", _is_str), _f("headers", _is_obj, None)),
    ),
    MethodSpec("providers/disable", _C, "disable_provider", (_PROVIDER,)),
    MethodSpec("mcp/connect", _B, "mcp_connect", (_f("serverId", _is_str),)),
    MethodSpec(
        "mcp/message",
        _B,
        "mcp_message",
        (  # R17: connectionId (connect form) or serverId + requestId (request-scoped); the bridge checks which
            _f("connectionId", _is_str, False),
            _f("serverId", _is_str, False),
            _f("requestId", _is_str, False),
            _f("method", _is_str),
            _f("params", lambda v: True, False),
        ),
    ),
    MethodSpec("mcp/disconnect", _B, "mcp_disconnect", (_f("connectionId", _is_str),)),
)

#: Wire method name -> spec, for every client->agent method acp_fast knows.
AGENT_METHODS: Final[dict[str, MethodSpec]] = {s.method: s for s in _SPECS}

#: Agent->client methods, wire name -> the capability path that gates them
#: (None: always allowed). Calling a gated method the client did not
#: advertise raises before anything is sent.
CLIENT_METHODS: Final[dict[str, tuple[str, ...] | None]] = {
    "session/update": None,
    "session/request_permission": None,
    "fs/read_text_file": ("fs", "readTextFile"),
    "fs/write_text_file": ("fs", "writeTextFile"),
    "terminal/create": ("terminal",),
    "terminal/output": ("terminal",),
    "terminal/wait_for_exit": ("terminal",),
    "terminal/kill": ("terminal",),
    "terminal/release": ("terminal",),
    "elicitation/create": ("elicitation",),
    "elicitation/complete": ("elicitation", "url"),
    "auth/status_update": None,
    "mcp/connect": None,
    "mcp/message": None,
    "mcp/disconnect": None,
}


#: ``session/update`` kinds the client must opt in to, kind -> the capability
#: path that gates it. Sending one the client did not advertise raises before
#: anything is written, as for the gated methods above (ACP: agents MUST only
#: send these when the client advertised the capability).
UPDATE_GATES: Final[dict[str, tuple[str, ...]]] = {
    "notice": ("session", "notices"),
    "compaction_update": ("session", "compaction"),
    "compaction_summary_chunk": ("session", "compaction"),
    "plan_update": ("plan",),
    "plan_removed": ("plan",),
    "subagent_update": ("subagents",),
    "session_message": ("subagents",),
    "session_message_chunk": ("subagents",),
}
