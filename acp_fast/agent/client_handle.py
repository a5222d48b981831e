"""Agent-to-client calls: session updates, permission, fs, terminal, elicitation, subagents.

Updates go out through the connection's ordered writer and wait for stdout
when it is backed up (R26); a prompt's updates therefore leave in the order
the prompt produced them and before its response (R05).

One gating rule for everything the client must opt in to: a request method
(fs, terminal, elicitation; ``CLIENT_METHODS``) and a ``session/update``
kind (notice, compaction, plan operations, subagents; ``UPDATE_GATES``) is
checked against the capabilities the client advertised in ``initialize``,
and CapabilityNotSupported is raised before anything is written (a MUST NOT
in ACP). ``supports(method)`` and ``supports_update(kind)`` ask first. The
raw ``session_update`` applies the same rule to the kind it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Unpack

from ..peer.pending import PendingRequest
from ..wire.errors import MethodNotFound
from ..wire.jsonrpc import encode_notification
from ..wire.routes import NOTIFICATION
from .methods import CLIENT_METHODS, UPDATE_GATES
from .sessions import ChildSession, new_session_id
from .subagents import SubagentRun, SubagentWork

if TYPE_CHECKING:
    from ..peer.connection import Connection
    from .context import Context
    from .mcp_bridge import McpBridge, McpClientConnection, McpInbound, McpRequestOptions
    from .sessions import SessionTable


class CapabilityNotSupported(MethodNotFound):
    """The client did not advertise the capability this call needs."""


def _chunk(kind: str, content: str | dict[str, Any], message_id: str | None) -> dict[str, Any]:
    """A message/thought chunk; a plain string is a text content block."""
    block = {"type": "text", "text": content} if type(content) is str else content
    update = {"sessionUpdate": kind, "content": block}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def _tool_update(
    update_kind: str,
    tool_call_id: str,
    title: str | None,
    kind: str | None,
    status: str | None,
    content: list[dict[str, Any]] | None,
    locations: list[dict[str, Any]] | None,
    raw_input: Any,
    raw_output: Any,
    name: str | None,
) -> dict[str, Any]:
    """``tool_call`` and ``tool_call_update`` share their fields; omitted ones stay off the wire."""
    return _drop_none(
        {
            "sessionUpdate": update_kind,
            "toolCallId": tool_call_id,
            "title": title,
            "name": name,
            "kind": kind,
            "status": status,
            "content": content,
            "locations": locations,
            "rawInput": raw_input,
            "rawOutput": raw_output,
        }
    )


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class _Clear:
    """The type of ``CLEAR``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CLEAR"


#: For the patch fields of the newer updates (subagent_update, session_message,
#: compaction_update): None leaves a field off the wire (unchanged), CLEAR sends
#: ``null`` (cleared).
CLEAR: Final = _Clear()


def _patch(d: dict[str, Any]) -> dict[str, Any]:
    """Omitted (None) fields off the wire, CLEAR ones as null."""
    return {k: (None if v is CLEAR else v) for k, v in d.items() if v is not None}


def _block(content: str | dict[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": content} if type(content) is str else content  # type: ignore[return-value]


_GATED_KINDS: Final = frozenset(UPDATE_GATES)


def _subagent_update(
    child_id: str,
    *,
    title: str | _Clear | None = None,
    description: str | _Clear | None = None,
    capabilities: dict[str, Any] | _Clear | None = None,
    state: str | dict[str, Any] | _Clear | None = None,
    cwd: str | _Clear | None = None,
    additional_directories: list[str] | _Clear | None = None,
) -> dict[str, Any]:
    """A ``subagent_update`` as written: omitted fields off the wire, CLEAR ones null, a bare state name wrapped."""
    return _patch(
        {
            "sessionUpdate": "subagent_update",
            "sessionId": child_id,
            "title": title,
            "description": description,
            "capabilities": capabilities,
            "state": {"state": state} if isinstance(state, str) else state,
            "cwd": cwd,
            "additionalDirectories": additional_directories,
        }
    )


class Client:
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

    def __init__(self, conn: Connection, context: Callable[[], Context]) -> None:
        self._conn = conn
        self._context = context

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._context().client_capabilities

    def supports(self, method: str) -> bool:
        gate = CLIENT_METHODS.get(method)
        return gate is None or self._context().client_supports(gate)

    def supports_update(self, kind: str) -> bool:
        """Whether a ``session/update`` of this kind may be sent (ungated kinds always may)."""
        gate = UPDATE_GATES.get(kind)
        return gate is None or self._context().client_supports(gate)

    def _require_update(self, kind: str) -> None:
        if not self.supports_update(kind):
            raise CapabilityNotSupported(
                f"the client did not advertise the capability {kind!r} updates need "
                f"({'.'.join(UPDATE_GATES[kind])})"
            )

    def request(self, method: str, params: Any = None) -> PendingRequest:
        """Send any agent->client request (gated); await the result or use on_result."""
        if not self.supports(method):
            raise CapabilityNotSupported(
                f"the client did not advertise the capability {method!r} needs "
                f"({'.'.join(CLIENT_METHODS[method] or ())})"
            )
        return self._conn.send_request(method, params)

    # -- session/update, one helper per variant ---------------------------------
    async def session_update(
        self, session_id: str, update: dict[str, Any], field_meta: dict[str, Any] | None = None
    ) -> None:
        """Any update dict, written as given; a gated kind is checked as its helper checks it."""
        if update.get("sessionUpdate") in _GATED_KINDS:
            self._require_update(update["sessionUpdate"])
        if self._send_update(session_id, update, field_meta):
            await self._conn.writer.drain()

    def _send_update(self, session_id: str, update: dict[str, Any], field_meta: dict[str, Any] | None = None) -> bool:
        """Write one ``session/update``; whether the producer must now wait for the pipe (R26).

        The helpers below call this and ``drain`` themselves: one coroutine
        less per update than going through ``session_update``.
        """
        conn = self._conn
        if conn.drop_if is not None and conn.dropping():  # its turn was answered for already (R30)
            return False
        params: dict[str, Any] = {"sessionId": session_id, "update": update}
        if field_meta is not None:
            params["_meta"] = field_meta
        writer = conn.writer
        if writer.routed:
            writer.route(NOTIFICATION, None, session_id)
        writer.write(encode_notification("session/update", params))
        return writer.must_wait

    async def agent_message_chunk(
        self, session_id: str, content: str | dict[str, Any], message_id: str | None = None
    ) -> None:
        if self._send_update(session_id, _chunk("agent_message_chunk", content, message_id)):
            await self._conn.writer.drain()

    async def agent_thought_chunk(
        self, session_id: str, content: str | dict[str, Any], message_id: str | None = None
    ) -> None:
        if self._send_update(session_id, _chunk("agent_thought_chunk", content, message_id)):
            await self._conn.writer.drain()

    async def user_message_chunk(
        self, session_id: str, content: str | dict[str, Any], message_id: str | None = None
    ) -> None:
        if self._send_update(session_id, _chunk("user_message_chunk", content, message_id)):
            await self._conn.writer.drain()

    async def tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        title: str,
        *,
        kind: str | None = None,
        status: str | None = None,
        content: list[dict[str, Any]] | None = None,
        locations: list[dict[str, Any]] | None = None,
        raw_input: Any = None,
        raw_output: Any = None,
        name: str | None = None,
    ) -> None:
        """``name``: the tool's own identifier, beside the human-readable ``title``."""
        if self._send_update(
            session_id,
            _tool_update(
                "tool_call", tool_call_id, title, kind, status, content, locations, raw_input, raw_output, name
            ),
        ):
            await self._conn.writer.drain()

    async def tool_call_update(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        title: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        content: list[dict[str, Any]] | None = None,
        locations: list[dict[str, Any]] | None = None,
        raw_input: Any = None,
        raw_output: Any = None,
        name: str | None = None,
    ) -> None:
        if self._send_update(
            session_id,
            _tool_update(
                "tool_call_update", tool_call_id, title, kind, status, content, locations, raw_input, raw_output, name
            ),
        ):
            await self._conn.writer.drain()

    async def plan(self, session_id: str, entries: list[dict[str, Any]]) -> None:
        if self._send_update(session_id, {"sessionUpdate": "plan", "entries": entries}):
            await self._conn.writer.drain()

    async def available_commands_update(self, session_id: str, commands: list[dict[str, Any]] | Any) -> None:
        """``commands``: the list, or the same already encoded with ``jsonrpc.raw`` (a constant list)."""
        if self._send_update(session_id, {"sessionUpdate": "available_commands_update", "availableCommands": commands}):
            await self._conn.writer.drain()

    async def current_mode_update(self, session_id: str, mode_id: str) -> None:
        if self._send_update(session_id, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}):
            await self._conn.writer.drain()

    async def config_option_update(self, session_id: str, config_options: list[dict[str, Any]]) -> None:
        if self._send_update(session_id, {"sessionUpdate": "config_option_update", "configOptions": config_options}):
            await self._conn.writer.drain()

    async def session_info_update(self, session_id: str, **fields: Any) -> None:
        """``title=...``, ``updated_at=...``; pass None to clear a field."""
        names = {"title": "title", "updated_at": "updatedAt"}
        update = {"sessionUpdate": "session_info_update"}
        update.update({names.get(k, k): v for k, v in fields.items()})
        if self._send_update(session_id, update):
            await self._conn.writer.drain()

    async def usage_update(self, session_id: str, used: int, size: int, cost: dict[str, Any] | None = None) -> None:
        if self._send_update(
            session_id, _drop_none({"sessionUpdate": "usage_update", "used": used, "size": size, "cost": cost})
        ):
            await self._conn.writer.drain()

    # -- gated session/update kinds (UPDATE_GATES): raise before writing when not advertised --
    async def _gated_update(self, session_id: str, update: dict[str, Any]) -> None:
        self._require_update(update["sessionUpdate"])
        if self._send_update(session_id, update):
            await self._conn.writer.drain()

    async def notice(
        self, session_id: str, title: str, *, severity: str = "info", description: str | None = None
    ) -> None:
        """Something for the user that is not session history (``session.notices``).

        ``severity``: ``info``, ``warning``, ``error`` or an ``_``-prefixed extension.
        """
        await self._gated_update(
            session_id,
            _drop_none({"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}),
        )

    async def compaction_update(
        self,
        session_id: str,
        compaction_id: str,
        status: str,
        *,
        summary: list[dict[str, Any]] | _Clear | None = None,
        error: str | _Clear | None = None,
    ) -> None:
        """Create or patch a context compaction (``session.compaction``); ``status``:
        ``in_progress``, ``completed``, ``failed``, ``cancelled``."""
        await self._gated_update(
            session_id,
            _patch(
                {
                    "sessionUpdate": "compaction_update",
                    "compactionId": compaction_id,
                    "status": status,
                    "summary": summary,
                    "error": error,
                }
            ),
        )

    async def compaction_summary_chunk(
        self, session_id: str, compaction_id: str, content: str | dict[str, Any]
    ) -> None:
        """Append one block to a compaction's summary (``session.compaction``); a string is text."""
        await self._gated_update(
            session_id,
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id, "content": _block(content)},
        )

    async def plan_update(
        self,
        session_id: str,
        plan_id: str,
        *,
        entries: list[dict[str, Any]] | None = None,
        markdown: str | None = None,
        path: str | None = None,
        uri: str | None = None,
    ) -> None:
        """Send or replace the plan ``plan_id`` (``plan``): exactly one of ``entries`` (a
        checklist), ``markdown`` (a whole document, optionally naming its file by absolute
        ``path``) or ``uri`` (a file holding the plan)."""
        if (entries is None) + (markdown is None) + (uri is None) != 2:
            raise ValueError("plan_update takes exactly one of entries, markdown, uri")
        if path is not None and markdown is None:
            raise ValueError("plan_update: path goes with a markdown plan")
        if entries is not None:
            plan: dict[str, Any] = {"type": "items", "planId": plan_id, "entries": entries}
        elif markdown is not None:
            plan = _drop_none({"type": "markdown", "planId": plan_id, "content": markdown, "path": path})
        else:
            plan = {"type": "file", "planId": plan_id, "uri": uri}
        await self._gated_update(session_id, {"sessionUpdate": "plan_update", "plan": plan})

    async def plan_removed(self, session_id: str, plan_id: str) -> None:
        """Remove the plan ``plan_id`` (``plan``)."""
        await self._gated_update(session_id, {"sessionUpdate": "plan_removed", "planId": plan_id})

    async def subagent_update(
        self,
        parent_id: str,
        child_id: str,
        *,
        title: str | _Clear | None = None,
        description: str | _Clear | None = None,
        capabilities: dict[str, Any] | _Clear | None = None,
        state: str | dict[str, Any] | _Clear | None = None,
        cwd: str | _Clear | None = None,
        additional_directories: list[str] | _Clear | None = None,
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
            _subagent_update(
                child_id,
                title=title,
                description=description,
                capabilities=capabilities,
                state=state,
                cwd=cwd,
                additional_directories=additional_directories,
            ),
        )

    async def session_message(
        self,
        session_id: str,
        message_id: str,
        *,
        sender_session_id: str | _Clear | None = None,
        recipient_session_id: str | _Clear | None = None,
        sender_message_id: str | _Clear | None = None,
        recipient_message_id: str | _Clear | None = None,
        content: list[dict[str, Any]] | _Clear | None = None,
    ) -> None:
        """Create or patch a message between sessions in ``session_id``'s transcript (``subagents``)."""
        await self._gated_update(
            session_id,
            _patch(
                {
                    "sessionUpdate": "session_message",
                    "messageId": message_id,
                    "senderSessionId": sender_session_id,
                    "recipientSessionId": recipient_session_id,
                    "senderMessageId": sender_message_id,
                    "recipientMessageId": recipient_message_id,
                    "content": content,
                }
            ),
        )

    async def session_message_chunk(self, session_id: str, message_id: str, content: str | dict[str, Any]) -> None:
        """Append one block to a message between sessions (``subagents``); a string is text."""
        await self._gated_update(
            session_id, {"sessionUpdate": "session_message_chunk", "messageId": message_id, "content": _block(content)}
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
            _subagent_update(
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
            _drop_none({"sessionId": session_id, "path": path, "line": line, "limit": limit}),
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
            _drop_none(
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

