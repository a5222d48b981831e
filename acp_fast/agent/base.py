"""The ACP agent surface: subclass ``Agent`` and override what you support.

Method names and keyword arguments follow the official Python SDK
(``new_session(cwd, mcp_servers, ...)``, ``prompt(session_id, prompt)``), so
agent code reads the same; values are wire-shaped dicts (camelCase keys,
as the schema names them) rather than pydantic models, which keeps the hot
path free of model construction. Results are wire dicts too.

A method left as inherited is *not implemented*: its requests answer -32601
and the capability it needs is not advertised in ``initialize``. Prompt code
is cancelled both through ``current_turn().token`` and as asyncio task
cancellation at its next await; a ``finally`` in ``prompt`` (or the
``on_turn_end`` hook) is the place for usage accounting, since it runs on
completion, cancellation, failure and shutdown alike (R13).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..wire.errors import MethodNotFound

# Re-exported: these lived here before the turn moved below the modules that set it.
from .context import Turn as Turn
from .context import current_context as current_context
from .context import current_turn as current_turn

if TYPE_CHECKING:
    from .client_handle import Client
    from .mcp_bridge import McpProvider

F = TypeVar("F", bound=Callable[..., Any])

_UNIMPLEMENTED = "__acp_unimplemented__"


def _unimplemented(fn: F) -> F:
    setattr(fn, _UNIMPLEMENTED, True)
    return fn


def implements(agent: object, attr: str) -> bool:
    """Whether ``agent`` overrides the base method ``attr``."""
    return class_implements(type(agent), attr)


def class_implements(cls: type, attr: str) -> bool:
    """Whether the agent class ``cls`` overrides the base method ``attr``."""
    fn = getattr(cls, attr, None)
    return fn is not None and not getattr(fn, _UNIMPLEMENTED, False)


class Agent:
    """Base class for agents served by acp_fast."""

    #: The ``systemPrompt`` modes this agent applies ("append", and "override" too), advertised
    #: as ``sessionCapabilities.systemPrompt``; the opening methods then receive ``system_prompt``
    #: when the client sends one. Empty: not advertised, and a client's ``systemPrompt`` is
    #: answered -32602 by the server (an agent that cannot apply it must refuse it).
    system_prompt_modes: ClassVar[frozenset[str]] = frozenset()

    #: Extension methods (``_name``) that run in the background lane (R01).
    background_extensions: ClassVar[frozenset[str]] = frozenset()

    #: True when ``initialize`` states the agent's capabilities itself (agents
    #: on the official SDK, see compat): the server then only removes those of
    #: methods this agent does not implement, instead of also adding the rest.
    decides_capabilities: ClassVar[bool] = False

    #: Hosts MCP servers for incoming ``mcp/message {serverId, requestId}`` and
    #: ``mcp/connect`` (R17 provider role, both forms); None: -32601.
    mcp_provider: McpProvider | None = None

    #: Calls MCP servers the client declares with ``{"type": "acp"}`` (R17
    #: client role, ``self.client.mcp_request`` or ``connect_mcp``). Either
    #: this or a provider makes ``initialize`` advertise ``mcpCapabilities.acp``.
    mcp_over_acp: ClassVar[bool] = False

    client: Client

    def on_connect(self, client: Client) -> None:
        """Called once, before the first message, with the handle for agent->client calls."""
        self.client = client

    # -- lifecycle (control lane) ---------------------------------------------------
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        """Return extra InitializeResponse fields (agentInfo, authMethods, capabilities).

        The server fills in the negotiated ``protocolVersion`` and advertises
        the session capabilities of the methods this agent implements.
        """
        return None

    @_unimplemented
    async def authenticate(self, method_id: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("authenticate")

    @_unimplemented
    async def logout(self, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("logout")

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        """Return NewSessionResponse fields; without ``sessionId`` one is generated."""
        return None

    @_unimplemented
    async def load_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        raise MethodNotFound("session/load")

    @_unimplemented
    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        raise MethodNotFound("session/resume")

    @_unimplemented
    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        raise MethodNotFound("session/fork")

    @_unimplemented
    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        raise MethodNotFound("session/list")

    @_unimplemented
    async def delete_session(self, session_id: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("session/delete")

    @_unimplemented
    async def close_session(self, session_id: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("session/close")

    @_unimplemented
    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        raise MethodNotFound("session/set_mode")

    @_unimplemented
    async def set_config_option(
        self, session_id: str, config_id: str, value: str | bool, **kwargs: Any
    ) -> dict[str, Any] | None:
        raise MethodNotFound("session/set_config_option")

    # -- unstable (schema 1.29-1.32): served and advertised only when overridden ------------
    @_unimplemented
    async def archive_session(self, session_id: str, **kwargs: Any) -> dict[str, Any] | None:
        """Hide the session from default listings; an open one is closed first by the server."""
        raise MethodNotFound("session/archive")

    @_unimplemented
    async def unarchive_session(self, session_id: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("session/unarchive")

    @_unimplemented
    async def session_status(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        """Return ``{"status": "open" | "saved"}``; an unknown id is -32002 (``ResourceNotFound``)."""
        raise MethodNotFound("session/status")

    @_unimplemented
    async def set_session_title(self, session_id: str, title: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("session/set_title")

    @_unimplemented
    async def auth_status(self, **kwargs: Any) -> dict[str, Any]:
        """Return ``{"state": ...}``; never refuse it for want of authentication."""
        raise MethodNotFound("auth/status")

    @_unimplemented
    async def list_providers(self, **kwargs: Any) -> dict[str, Any]:
        raise MethodNotFound("providers/list")

    @_unimplemented
    async def set_provider(
        self, provider_id: str, api_type: str, base_url: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        raise MethodNotFound("providers/set")

    @_unimplemented
    async def disable_provider(self, provider_id: str, **kwargs: Any) -> dict[str, Any] | None:
        raise MethodNotFound("providers/disable")

    # -- the turn (background lane) ----------------------------------------------------
    @_unimplemented
    async def prompt(
        self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any
    ) -> dict[str, Any] | str | None:
        """Run one turn; return ``{"stopReason": ...}``, a stop reason, or None (end_turn)."""
        raise MethodNotFound("session/prompt")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Told after the server cancelled the session's turn; nothing to do by default.

        The server has already cancelled the turn (token and task) when this
        runs, in a spawned task: the cancel itself never waits for this hook.
        """

    # -- hooks ------------------------------------------------------------------------------
    async def on_session_start(self, session_id: str) -> None:
        """The place for ``available_commands_update`` and the like (R22), in a spawned task.

        For ``session/new`` and ``session/fork`` it runs after the response is
        written. For ``session/load`` and ``session/resume`` it runs before:
        the response marks the end of the session's replay, so whatever this
        sends for the session reaches the client first, and the response is
        written when it returns (or fails). It may await the client meanwhile.

        Each call has a context of its own. Calls that finish without waiting run one
        after another in one task; one that waits keeps that task until it returns."""

    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        """Runs after every turn, however it ended ("failed" and "aborted" included)."""

    async def on_session_evicted(self, session_id: str) -> None:
        """Told when idle cleanup removed a session (R16)."""

    # -- hosting: a session outliving its socket ----------------------------------------------
    def detach_session(self, session_id: str) -> Any:
        """The session's socket dropped (hosting only, after its prompts ended).

        Return what ``attach_session`` needs to continue it on another instance
        (each connection has its own); the host keeps it for
        ``detached_session_timeout_s`` and then drops it. Default: nothing.

        With a shared session store (``--session-store sqlite:...``/``redis://...``)
        the instance may be in another process, so the state travels as JSON:
        return dicts with str keys, lists, tuples (given back as lists), str,
        int, float, bool or None. Anything else is refused here, logged, and the
        session ends with its socket instead of being parked.
        """
        return None

    def attach_session(self, session_id: str, state: Any) -> None:
        """A parked session is being re-attached to this instance's connection, with
        what ``detach_session`` returned; ``load_session``/``resume_session`` runs next."""

    # -- extensions ------------------------------------------------------------------------
    @_unimplemented
    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        raise MethodNotFound(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Unknown notifications are ignored by default (ACP extensibility)."""


#: Optional methods and the capability each one makes the server advertise.
CAPABILITY_OF: dict[str, tuple[str, ...]] = {
    "load_session": ("loadSession",),
    "list_sessions": ("sessionCapabilities", "list"),
    "resume_session": ("sessionCapabilities", "resume"),
    "close_session": ("sessionCapabilities", "close"),
    "delete_session": ("sessionCapabilities", "delete"),
    "fork_session": ("sessionCapabilities", "fork"),
    "logout": ("auth", "logout"),
    "archive_session": ("sessionCapabilities", "archive"),
    "unarchive_session": ("sessionCapabilities", "archive"),
    "session_status": ("sessionCapabilities", "status"),
    "set_session_title": ("sessionCapabilities", "title"),
    "auth_status": ("auth", "status"),
    "list_providers": ("providers",),
    "set_provider": ("providers",),
    "disable_provider": ("providers",),
}
"""Several methods under one path (``archive``, ``providers``): advertised only when the agent
implements all of them, since the capability promises each."""
