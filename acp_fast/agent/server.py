"""The ACP agent-server policy on top of a Connection.

Enforces R01-R16 (the rule each piece enforces is named where it happens):
control methods run inline on the dispatch loop, so the context and the
session table are updated before the next message is admitted (R01);
``session/prompt`` and ``mcp/*`` go through the bounded pool with a context
snapshot (R02, R08); cancellation and shutdown follow cancel.py and pool.py.
What the server knows of the agent's class is worked out once per class
(class_info.py), session starts are scheduled by starter.py, and the
capabilities ``initialize`` advertises come from capabilities.py. A host
composes in a session source and a budget (seams.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..peer.connection import Connection, IncomingRequest
from ..wire.errors import InvalidRequest, MethodNotFound, PromptInProgress
from ..wire.jsonrpc import Notification
from .base import Agent
from .cancelling import Canceller
from .capabilities import agent_capabilities, check_system_prompt
from .class_info import ControlHandler, Kwargs, class_info
from .client_handle import Client
from .context import Context, context_var
from .mcp_bridge import McpBridge
from .methods import AGENT_METHODS, PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, Lane, MethodSpec
from .pool import BackgroundPool, Job
from .seams import SessionSource
from .sessions import SessionTable, new_session_id
from .starter import AnswerAfterStart, SessionStarter
from .turns import enter_prompt, run_prompt, stop_reason
from .validate import enabled as validation_enabled
from .validate import install as install_validation

__all__ = ["AgentServer", "AnswerAfterStart", "ControlHandler", "Kwargs"]

log = logging.getLogger(__name__)


def _forwarding(attr: str, default: Callable[[Kwargs], dict[str, Any]] = lambda _kw: {}) -> ControlHandler:
    """A control handler that hands the params to the agent's ``attr`` and answers what it returns;
    ``default`` is the answer to a handler that returns None."""

    async def forward(server: AgentServer, kw: Kwargs) -> Any:
        result = await getattr(server.agent, attr)(**server.fit(attr, kw))
        return default(kw) if result is None else result

    forward.__name__ = f"_forward_{attr}"
    return forward


#: Each control method and the AgentServer method that answers it.
_CONTROL: dict[str, str] = {
    "initialize": "_initialize",
    "authenticate": "_authenticate",
    "logout": "_logout",
    "session/new": "_new_session",
    "session/load": "_load_session",
    "session/resume": "_resume_session",
    "session/fork": "_fork_session",
    "session/list": "_list_sessions",
    "session/delete": "_delete_session",
    "session/close": "_close_session",
    "session/set_mode": "_set_mode",
    "session/set_config_option": "_set_config_option",
    "session/archive": "_archive_session",
    "session/unarchive": "_unarchive_session",
    "session/status": "_session_status",
    "session/set_title": "_set_session_title",
    "auth/status": "_auth_status",
    "providers/list": "_list_providers",
    "providers/set": "_set_provider",
    "providers/disable": "_disable_provider",
}


class AgentServer:
    """Serves one Agent on one Connection."""

    def __init__(
        self,
        agent: Agent,
        conn: Connection,
        sessions: SessionTable | None = None,
        pool: BackgroundPool | None = None,
        source: SessionSource | None = None,
    ) -> None:
        """``sessions`` and ``pool`` replace the per-connection defaults: a host
        passes ones that also count against process-wide limits (R28), and a
        ``source`` that ``session/load`` and ``session/resume`` take sessions
        not open here from (parked ones)."""
        self.agent = agent
        self.conn = conn
        if validation_enabled():  # a debug aid; when off nothing is wrapped
            install_validation(conn)
        self.limits = limits = conn.limits
        self.context = Context()
        self.sessions = sessions if sessions is not None else SessionTable(limits.max_sessions)
        self.pool = pool if pool is not None else BackgroundPool(conn.loop, limits.max_background)
        self.source = source
        self.client = Client(conn, lambda: self.context)
        self.mcp = McpBridge(
            conn,
            getattr(agent, "mcp_provider", None),
            limits.max_mcp_connections,
            self._declared_acp_servers,
            client_role=bool(getattr(agent, "mcp_over_acp", False)),
        )
        self.client.mcp = self.mcp
        self.client.sessions = self.sessions
        self._info = info = class_info(type(self), type(agent), _CONTROL)
        # Copied out of the shared info: what the request paths read on every request.
        self._routes = info.routes  # every request method's spec and, when served on the loop, its handler
        self._implemented = info.implemented
        self._narrow = info.narrow
        # R22: at most max_sessions opened sessions wait for their start callback, half of max_spawned run.
        self.starter = SessionStarter(
            conn, agent, self.sessions, info.start_hook, limits.max_sessions, limits.max_spawned // 2
        )
        self._to_start = self.starter.waiting
        self.cancels = Canceller(agent, conn, self.sessions, self.pool, self.fit, info.cancel_hook)
        self.pool.bind(conn, type(agent).__qualname__, self.cancels.turn_timed_out)
        self._idle_timer: asyncio.TimerHandle | None = None
        on_server = getattr(agent, "on_server", None)  # an adapter (compat) claims requests first
        if on_server is not None:
            on_server(self)
        conn.on_receive_request(self._on_request, "acp_fast.AgentServer.request")
        conn.on_receive_notification(self._on_notification, "acp_fast.AgentServer.notification")
        conn.on_receive_notification_sync("session/cancel", self.cancels.on_notification)
        conn.on_receive_notification_sync("$/cancel_request", self.cancels.on_notification)
        conn.on_shutdown(self._shutdown)
        agent.on_connect(self.client)
        if limits.idle_session_timeout_s > 0:
            self._schedule_idle_sweep()

    # -- incoming --------------------------------------------------------------------
    async def _on_request(self, req: IncomingRequest) -> bool:
        method = req.method
        route = self._routes.get(method)
        if route is None:
            if method.startswith("_") and "ext_method" in self._implemented:
                await self._ext_request(req)
                return True
            raise MethodNotFound(f"Method not found: {method}", {"method": method})
        if not self.context.initialized and method != "initialize":
            raise InvalidRequest(f"Invalid request: {method} before initialize")
        spec, handler = route
        kwargs = spec.parse(req.params)
        if handler is not None:  # a served control method: answered before the next message (R01)
            result = await handler(self, kwargs)
            if type(result) is AnswerAfterStart:
                self.starter.answer_after(req, result)
            else:
                req.respond(result)
            return True
        if spec.lane is Lane.BACKGROUND:
            self._admit(req, spec, kwargs)
            return True
        raise MethodNotFound(f"Method not found: {method} (not supported by this agent)")

    def fit(self, attr: str, kw: Kwargs) -> Kwargs:
        """``kw`` as the agent's ``attr`` can take it: all of it, unless that handler has no ``**kwargs``."""
        names = self._narrow.get(attr)
        if names is None or names.issuperset(kw):
            return kw
        dropped = sorted(k for k in kw if k not in names)
        log.debug("%s.%s takes no **kwargs: params %s not passed", type(self.agent).__name__, attr, dropped)
        return {k: v for k, v in kw.items() if k in names}

    async def _on_notification(self, note: Notification) -> bool:
        method = note.method
        spec = AGENT_METHODS.get(method)
        if method == "mcp/message" and self.mcp.enabled:  # R17: request-scoped ones routed inline, in order
            work = self.mcp.route_notification(note.params)
            if work is not None:  # connect form: off the control lane
                self.conn.spawn(work, name="acp.mcp/message:notification")
            return True
        if spec is None or not spec.notification:
            if method.startswith("_"):
                await self.agent.ext_notification(method, note.params if isinstance(note.params, dict) else {})
            else:
                log.debug("ignored notification %s", method)
            return True
        log.debug("ignored notification %s", method)  # cancels are claimed by the sync handler
        return True

    # -- cancellation (R06, R10-R12) ----------------------------------------------------------
    def on_cancel_notification(self, note: Notification) -> None:
        """``session/cancel`` and ``$/cancel_request`` (``Canceller.on_notification``), for adapters
        that see a cancel first (compat) and hand over the ones for sessions this server holds."""
        self.cancels.on_notification(note)

    # -- background lane (R02, R07, R08) ---------------------------------------------------
    def _admit(self, req: IncomingRequest, spec: MethodSpec, kwargs: Kwargs) -> None:
        if spec.method == "session/prompt":
            if "prompt" not in self._implemented:
                raise MethodNotFound("Method not found: session/prompt (not supported by this agent)")
            session = self.sessions.get(kwargs["session_id"])
            if self._narrow:
                kwargs = self.fit("prompt", kwargs)
            job = self.pool.admit(req, session)
            snapshot = self.context  # R02: the context as of admission, not of execution
            agent, hook = self.agent, self._info.turn_end_hook
            self.pool.start(
                job,
                (lambda j: run_prompt(agent, j, kwargs, snapshot, True))
                if hook
                else (lambda j: enter_prompt(agent, j, kwargs, snapshot)),
                lambda _j, v: stop_reason(v),
                not_started=lambda j: run_prompt(agent, j, None, snapshot, hook),
            )
            return
        if not self.mcp.handles(spec.method):
            raise MethodNotFound(f"Method not found: {spec.method} (no MCP bridge is configured)")
        self.mcp.check(spec.method, kwargs)  # R17: malformed -> -32602, before it takes a slot
        job = self.pool.admit(req)  # R17: mcp/* count against the background limit (R08)
        snapshot = self.context  # R02: the context as of admission

        async def run_mcp(_job: Job) -> Any:
            context_var.set(snapshot)
            return await self.mcp.handle_request(spec.method, kwargs)

        self.pool.start(job, run_mcp, lambda _j, v: v)

    def _declared_acp_servers(self) -> list[str]:
        """serverIds the client declared with the ACP transport in its sessions (R17)."""
        return [
            s["serverId"]
            for session in self.sessions
            for s in session.mcp_servers
            if isinstance(s, dict) and s.get("type") == "acp" and isinstance(s.get("serverId"), str)
        ]

    async def _ext_request(self, req: IncomingRequest) -> None:
        if not self.context.initialized:  # an extension method is never "initialize"
            raise InvalidRequest(f"Invalid request: {req.method} before initialize")
        params = req.params if isinstance(req.params, dict) else {}
        if req.method in self.agent.background_extensions:
            job = self.pool.admit(req)
            self.pool.start(job, lambda _j: self.agent.ext_method(req.method, params), lambda _j, v: v)
            return
        req.respond(await self.agent.ext_method(req.method, params))

    # -- control lane (R01) ---------------------------------------------------------------
    async def _initialize(self, kw: Kwargs) -> dict[str, Any]:
        requested = kw["protocol_version"]
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else PROTOCOL_VERSION
        caps = kw["client_capabilities"] or {}
        call = dict(kw)
        call["client_capabilities"] = caps
        extra = await self.agent.initialize(**self.fit("initialize", call))
        result: dict[str, Any] = dict(extra or {})
        agent = self.agent
        result["agentCapabilities"] = agent_capabilities(
            result.get("agentCapabilities"),
            self._implemented,
            agent.system_prompt_modes,
            agent.decides_capabilities,
            self.mcp.enabled,
        )
        result["protocolVersion"] = version
        result.setdefault("authMethods", [])
        self.context = self.context.evolve(
            initialized=True,
            protocol_version=version,
            client_capabilities=caps,
            client_info=kw["client_info"],
        )
        finish = getattr(self.agent, "finish_initialize", None)  # an adapter (compat) may keep its agent's answer
        return finish(result) if finish is not None else result

    async def _authenticate(self, kw: Kwargs) -> dict[str, Any]:
        result = await self.agent.authenticate(**self.fit("authenticate", kw))
        self.context = self.context.evolve(authenticated=True, auth_method=kw["method_id"])
        return result or {}

    async def _logout(self, kw: Kwargs) -> dict[str, Any]:
        result = await self.agent.logout(**self.fit("logout", kw))
        self.context = self.context.evolve(authenticated=False, auth_method=None)
        return result or {}

    async def _new_session(self, kw: Kwargs) -> dict[str, Any]:
        self.sessions.check_capacity()
        if len(self._to_start) >= self.limits.max_sessions:
            self.starter.check_room()
        if len(kw) == 3:  # no _meta: named arguments cost less than unpacking the dict
            call = self.agent.new_session(
                cwd=kw["cwd"], mcp_servers=kw["mcp_servers"], additional_directories=kw["additional_directories"]
            )
        else:
            check_system_prompt(kw, self.agent.system_prompt_modes)
            call = self.agent.new_session(**self.fit("new_session", kw))
        result = await call
        if type(result) is not dict or "sessionId" not in result:  # else answered as the agent built it
            result = dict(result or {})
            result["sessionId"] = new_session_id("sess_")
        session_id = result["sessionId"]
        self.starter.open(session_id, kw, result)
        return result

    async def _reopen(self, attr: str, kw: Kwargs) -> dict[str, Any] | AnswerAfterStart:
        """``session/load`` and ``session/resume``: one rule for both.

        A session already open on this connection is opened again with this
        request's cwd and MCP servers (its ``data`` stays), unless a prompt
        runs in it: that is refused as a second prompt would be (R07). The
        answer follows everything sent for the session while it opens, the
        start callback's updates included (R22).
        """
        session_id = kw["session_id"]
        if self.source is not None:  # a host's parked session comes back before the agent opens it
            await self.source.reattach(session_id, self.sessions, self.agent)
        open_already = self.sessions.find(session_id)
        if open_already is not None and open_already.busy:
            raise PromptInProgress(
                f"session {session_id!r} has a prompt running; cancel it or wait for its response "
                "before loading it again"
            )
        self.starter.check_room()
        check_system_prompt(kw, self.agent.system_prompt_modes)
        result = dict(await getattr(self.agent, attr)(**self.fit(attr, kw)) or {})
        self.starter.open(session_id, kw, result, start=False)
        if self.starter.hook:
            return AnswerAfterStart(session_id, result)
        return result

    async def _load_session(self, kw: Kwargs) -> dict[str, Any] | AnswerAfterStart:
        return await self._reopen("load_session", kw)

    async def _resume_session(self, kw: Kwargs) -> dict[str, Any] | AnswerAfterStart:
        return await self._reopen("resume_session", kw)

    async def _fork_session(self, kw: Kwargs) -> dict[str, Any]:
        self.sessions.get(kw["session_id"])
        self.starter.check_room()
        check_system_prompt(kw, self.agent.system_prompt_modes)
        result = dict(await self.agent.fork_session(**self.fit("fork_session", kw)) or {})
        if "sessionId" not in result:
            result["sessionId"] = new_session_id("sess_")
        new_id = result["sessionId"]
        self.starter.open(new_id, kw, result)
        return result

    async def _list_sessions(self, kw: Kwargs) -> dict[str, Any]:
        return await self.agent.list_sessions(**self.fit("list_sessions", kw))

    async def _end_session(self, attr: str, kw: Kwargs) -> dict[str, Any]:
        """``session/delete`` and ``session/archive``: an open session's turn is cancelled and its
        entry removed (the schema asks archive to close it first); an unknown one is the agent's call."""
        session = self.sessions.find(kw["session_id"])
        if session is not None:
            session.cancel_turn(attr)
        result = await getattr(self.agent, attr)(**self.fit(attr, kw))
        self.sessions.remove(kw["session_id"])
        return result or {}

    async def _delete_session(self, kw: Kwargs) -> dict[str, Any]:
        return await self._end_session("delete_session", kw)

    async def _close_session(self, kw: Kwargs) -> dict[str, Any]:
        session = self.sessions.get(kw["session_id"])
        session.cancel_turn("session/close")  # as if session/cancel had arrived
        result = await self.agent.close_session(**self.fit("close_session", kw))
        self.sessions.remove(session.id)
        return result or {}

    async def _archive_session(self, kw: Kwargs) -> dict[str, Any]:
        return await self._end_session("archive_session", kw)

    _unarchive_session = _forwarding("unarchive_session")
    _session_status = _forwarding("session_status")
    # The schema's answer names the title as stored; None from the agent means as given.
    _set_session_title = _forwarding("set_session_title", lambda kw: {"title": kw["title"]})
    _auth_status = _forwarding("auth_status")
    _list_providers = _forwarding("list_providers")
    _set_provider = _forwarding("set_provider")
    _disable_provider = _forwarding("disable_provider")

    async def _set_mode(self, kw: Kwargs) -> dict[str, Any]:
        session = self.sessions.get(kw["session_id"])
        if len(kw) == 2:  # no _meta: named arguments cost less than unpacking the dict
            result = await self.agent.set_session_mode(session_id=kw["session_id"], mode_id=kw["mode_id"])
        else:
            result = await self.agent.set_session_mode(**self.fit("set_session_mode", kw))
        session.mode_id = kw["mode_id"]
        return result or {}

    async def _set_config_option(self, kw: Kwargs) -> dict[str, Any]:
        session = self.sessions.get(kw["session_id"])
        if kw.get("type") is None:
            kw.pop("type", None)
        result = await self.agent.set_config_option(**self.fit("set_config_option", kw))
        session.config[kw["config_id"]] = kw["value"]
        return result or {"configOptions": []}

    # -- idle cleanup (R16) ------------------------------------------------------------------
    def _schedule_idle_sweep(self) -> None:
        period = max(0.5, min(self.limits.idle_session_timeout_s / 2, 60.0))
        self._idle_timer = self.conn.loop.call_later(period, self._idle_tick)

    def _idle_tick(self) -> None:
        self.sweep_idle()
        if self.conn.state.value == "open":
            self._schedule_idle_sweep()

    def sweep_idle(self, now: float | None = None) -> list[str]:
        """Evict sessions idle past the timeout; never one with a running prompt (R16)."""
        evicted: list[str] = []
        if self.limits.idle_session_timeout_s <= 0:
            return evicted  # 0 disables idle cleanup; it must not mean "evict every idle session"
        for session in self.sessions.idle_longer_than(self.limits.idle_session_timeout_s, now):
            self.sessions.remove(session.id)
            evicted.append(session.id)
            self.conn.spawn(self.agent.on_session_evicted(session.id), name=f"acp.evicted:{session.id}")
        return evicted

    # -- shutdown (R13-R15) --------------------------------------------------------------------
    async def _shutdown(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        for session in self.sessions:
            session.cancel_turn("shutdown")
        await self.pool.shutdown(self.limits.shutdown_grace_s, self.limits.abort_join_s)
        await self.mcp.shutdown()
