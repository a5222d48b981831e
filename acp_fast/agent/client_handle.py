"""The agent's handle on the client: session updates, permission, fs, terminal, elicitation, subagents, MCP.

``Client`` is ``SessionUpdates`` (updates.py: one helper per ``session/update``
kind) plus the agent->client requests, subagent work and MCP over ACP.

One gating rule for everything the client must opt in to: a request method
(fs, terminal, elicitation; ``CLIENT_METHODS``) and a ``session/update``
kind (notice, compaction, plan operations, subagents; ``UPDATE_GATES``) is
checked against the capabilities the client advertised in ``initialize``,
and CapabilityNotSupported is raised before anything is written (a MUST NOT
in ACP). ``supports(method)`` and ``supports_update(kind)`` ask first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

from ..peer.pending import PendingRequest
from ..wire.errors import MethodNotFound
from .methods import CLIENT_METHODS
from .sessions import ChildSession, new_session_id
from .subagents import SubagentRun, SubagentWork
from .updates import CLEAR, CapabilityNotSupported, Clear, SessionUpdates, drop_none, subagent_update_dict

if TYPE_CHECKING:
    from .mcp_bridge import McpBridge, McpClientConnection, McpInbound, McpRequestOptions
    from .sessions import SessionTable

__all__ = ["CLEAR", "CapabilityNotSupported", "Client"]


class Client(SessionUpdates):
    """The agent's handle on the client at the other end of the connection.

    Whatever needs a client capability (a request in ``CLIENT_METHODS``, an
    update kind in ``UPDATE_GATES``, the raw ``session_update`` included)
    raises CapabilityNotSupported before anything is written when the client
    did not advertise it; ``supports(method)`` and ``supports_update(kind)``
    ask first. Subagent work runs on child sessions (``start_subagent``).
    """

    #: The MCP-over-ACP tables, installed by the AgentServer (R17).
    mcp: McpBridge | None = None
    #: The connection's session table, installed by the AgentServer: where subagent children are registered.
    sessions: SessionTable | None = None

    def supports(self, method: str) -> bool:
        gate = CLIENT_METHODS.get(method)
        return gate is None or self._context().client_supports(gate)

    def request(self, method: str, params: Any = None) -> PendingRequest:
        """Send any agent->client request (gated); await the result or use on_result."""
        if not self.supports(method):
            raise CapabilityNotSupported(
                f"the client did not advertise the capability {method!r} needs "
                f"({'.'.join(CLIENT_METHODS[method] or ())})"
            )
        return self._conn.send_request(method, params)

    async def subagent_update(
        self,
        parent_id: str,
        child_id: str,
        *,
        title: str | Clear | None = None,
        description: str | Clear | None = None,
        capabilities: dict[str, Any] | Clear | None = None,
        state: str | dict[str, Any] | Clear | None = None,
        cwd: str | Clear | None = None,
        additional_directories: list[str] | Clear | None = None,
    ) -> None:
        """Announce the child ``child_id`` on its parent, or patch what the client knows of it
        (``subagents``). ``state`` may be a bare state name (``"running"``).

        ``start_subagent`` announces and reports its children itself; this is for
        anything else. A ``cancel`` capability is refused for a child the runtime
        does not run (it could not honour the client's cancel).
        """
        if (
            isinstance(capabilities, dict)
            and capabilities.get("cancel") is not None
            and not self._is_child(parent_id, child_id)
        ):
            raise ValueError(
                f"{child_id!r} is not a subagent started with start_subagent on {parent_id!r}: "
                "a session/cancel for it would reach nothing, so cancel is not advertised"
            )
        await self._gated_update(
            parent_id,
            subagent_update_dict(
                child_id,
                title=title,
                description=description,
                capabilities=capabilities,
                state=state,
                cwd=cwd,
                additional_directories=additional_directories,
            ),
        )

    # -- subagent child sessions -----------------------------------------------------------
    def _is_child(self, parent_id: str, child_id: str) -> bool:
        child = None if self.sessions is None else self.sessions.find(child_id)
        return isinstance(child, ChildSession) and child.parent.id == parent_id

    async def start_subagent(
        self,
        parent_id: str,
        work: SubagentWork,
        *,
        child_id: str | None = None,
        title: str | None = None,
        description: str | None = None,
        cwd: str | None = None,
        additional_directories: list[str] | None = None,
    ) -> SubagentRun:
        """Run ``work(run)`` on a child session of ``parent_id`` in a task of its own; returns at once.

        The child (new, or ``child_id`` reused) is registered as the parent's
        in the session table, which bounds it by ``max_sessions``, then
        announced with ``subagent_update`` (state ``running``, per-child
        ``cancel``) before its work runs. ``session/cancel`` on the child's id,
        on the parent, EOF and shutdown cancel the work as they cancel a
        prompt (R10-R15); when it ends the child is reported ``idle`` with its
        stop reason. The work sends the child's updates with
        ``run.session_id`` and may poll ``run.token``; ``await run`` waits for
        the outcome, and cancelling that wait cancels the child. ``cwd`` and
        ``additional_directories`` say where the child works (while unset, where
        its parent does). Needs ``subagents``.
        """
        self._require_update("subagent_update")
        if self.sessions is None:
            raise MethodNotFound("subagents need a session table: this Client is not served by an AgentServer")
        parent = self.sessions.get(parent_id)
        new = child_id is None or child_id not in self.sessions
        child = self.sessions.open_child(parent, child_id if child_id is not None else new_session_id("sub_"))
        if cwd is not None:
            child.cwd = cwd
        try:
            run = SubagentRun(self, child, work)  # the child's slot and token, before anything is sent
        except BaseException:
            if new:
                self.sessions.remove(child.id)
            raise
        self._send_update(
            parent_id,
            subagent_update_dict(
                child.id,
                title=title,
                description=description,
                capabilities={"cancel": {}} if new else None,
                state="running",
                cwd=cwd,
                additional_directories=additional_directories,
            ),
        )
        run.launch(self._context())
        await self._conn.drain()
        return run

    # -- requests ----------------------------------------------------------------------
    async def request_permission(
        self, session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "session/request_permission",
            {"sessionId": session_id, "toolCall": tool_call, "options": options},
        )
        return result

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "fs/read_text_file",
            drop_none({"sessionId": session_id, "path": path, "line": line, "limit": limit}),
        )
        return result

    async def write_text_file(self, session_id: str, path: str, content: str) -> dict[str, Any]:
        result = await self.request(
            "fs/write_text_file", {"sessionId": session_id, "path": path, "content": content}
        )
        return result if isinstance(result, dict) else {}

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[dict[str, str]] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "terminal/create",
            drop_none(
                {
                    "sessionId": session_id,
                    "command": command,
                    "args": args,
                    "env": env,
                    "cwd": cwd,
                    "outputByteLimit": output_byte_limit,
                }
            ),
        )
        return result

    async def _terminal(self, method: str, session_id: str, terminal_id: str) -> dict[str, Any]:
        result = await self.request(method, {"sessionId": session_id, "terminalId": terminal_id})
        return result if isinstance(result, dict) else {}

    async def terminal_output(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return await self._terminal("terminal/output", session_id, terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return await self._terminal("terminal/wait_for_exit", session_id, terminal_id)

    async def kill_terminal(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return await self._terminal("terminal/kill", session_id, terminal_id)

    async def release_terminal(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return await self._terminal("terminal/release", session_id, terminal_id)

    async def create_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        mode = params.get("mode")
        if mode in ("form", "url") and not self._context().client_supports(("elicitation", mode)):
            raise CapabilityNotSupported(f"the client did not advertise elicitation mode {mode!r}")
        result: dict[str, Any] = await self.request("elicitation/create", params)
        return result

    async def complete_elicitation(self, elicitation_id: str, field_meta: dict[str, Any] | None = None) -> None:
        """The ``elicitation/complete`` notification that ends a URL elicitation."""
        if not self._context().client_supports(("elicitation", "url")):
            raise CapabilityNotSupported("the client did not advertise elicitation mode 'url'")
        params: dict[str, Any] = {"elicitationId": elicitation_id}
        if field_meta is not None:
            params["_meta"] = field_meta
        self._conn.send_notification("elicitation/complete", params)
        await self._conn.drain()

    # -- MCP over ACP, client role (R17) ------------------------------------------------
    def open_mcp(self, server_id: str, inbound: McpInbound | None = None) -> McpClientConnection:
        """Send ``mcp/connect`` now (connect form); messages wait on the returned connection until it is answered."""
        return self._mcp_bridge().open_client(server_id, inbound)

    async def connect_mcp(self, server_id: str, inbound: McpInbound | None = None) -> McpClientConnection:
        """Connect to a server the client declared with ``{"type": "acp", "serverId"}``."""
        connection = self.open_mcp(server_id, inbound)
        await connection.wait_connected()
        return connection

    async def mcp_request(
        self, server_id: str, method: str, params: dict[str, Any] | None = None, **options: Unpack[McpRequestOptions]
    ) -> Any:
        """One MCP request to a server the client declared with ``{"type": "acp", "serverId"}``.

        Returns the inner result; an inner MCP error raises McpError (request-scoped
        form) or the AcpError the client answered (connect form). The form is the
        connect form when this agent holds a connect-form connection to the
        server (open or opening; a ``form="connect"`` call opens one), else the
        one the client has spoken here, else the request-scoped form (ACP schema
        1.24); ``form="request"|"connect"`` overrides it. In the request-scoped
        form ``on_notification(method, params)`` gets the notifications the
        server sends for this request, on the dispatch loop (keep it short);
        ``request_id`` defaults to a fresh one.
        """
        return await self._mcp_bridge().request(server_id, method, params, **options)

    def _mcp_bridge(self) -> McpBridge:
        if self.mcp is None:
            raise MethodNotFound("MCP over ACP is not available on this connection")
        return self.mcp

    async def ext_method(self, method: str, params: dict[str, Any] | None = None) -> Any:
        if not method.startswith("_"):
            raise ValueError(f"extension methods start with '_': {method!r}")
        return await self._conn.send_request(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        if not method.startswith("_"):
            raise ValueError(f"extension methods start with '_': {method!r}")
        self._conn.send_notification(method, params)
        await self._conn.drain()

