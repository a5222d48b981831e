"""Agent-to-client calls: session updates, permission, fs, terminal, elicitation.

Updates go out through the connection's ordered writer and wait for stdout
when it is backed up (R26); a prompt's updates therefore leave in the order
the prompt produced them and before its response (R05). Every gated method
checks the client's advertised capabilities first and raises
CapabilityNotSupported before anything is sent (a MUST NOT in ACP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..peer.pending import PendingRequest
from ..wire.errors import MethodNotFound
from ..wire.jsonrpc import encode_notification
from .methods import CLIENT_METHODS

if TYPE_CHECKING:
    from ..peer.connection import Connection
    from .context import Context
    from .mcp_bridge import McpBridge, McpClientConnection, McpInbound


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
) -> dict[str, Any]:
    """``tool_call`` and ``tool_call_update`` share their fields; omitted ones stay off the wire."""
    return _drop_none(
        {
            "sessionUpdate": update_kind,
            "toolCallId": tool_call_id,
            "title": title,
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


class Client:
    """The agent's handle on the client at the other end of the connection."""

    #: The MCP-over-ACP tables, installed by the AgentServer (R17).
    mcp: McpBridge | None = None

    def __init__(self, conn: Connection, context: Callable[[], Context]) -> None:
        self._conn = conn
        self._context = context

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._context().client_capabilities

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

    # -- session/update, one helper per variant ---------------------------------
    async def session_update(
        self, session_id: str, update: dict[str, Any], field_meta: dict[str, Any] | None = None
    ) -> None:
        if self._send_update(session_id, update, field_meta):
            await self._conn.writer.drain()

    def _send_update(self, session_id: str, update: dict[str, Any], field_meta: dict[str, Any] | None = None) -> bool:
        """Write one ``session/update``; whether the producer must now wait for the pipe (R26).

        The helpers below call this and ``drain`` themselves: one coroutine
        less per update than going through ``session_update``.
        """
        params: dict[str, Any] = {"sessionId": session_id, "update": update}
        if field_meta is not None:
            params["_meta"] = field_meta
        writer = self._conn.writer
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
    ) -> None:
        if self._send_update(
            session_id,
            _tool_update("tool_call", tool_call_id, title, kind, status, content, locations, raw_input, raw_output),
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
    ) -> None:
        if self._send_update(
            session_id,
            _tool_update(
                "tool_call_update", tool_call_id, title, kind, status, content, locations, raw_input, raw_output
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
        """Send ``mcp/connect`` now; messages wait on the returned connection until it is answered."""
        if self.mcp is None:
            raise MethodNotFound("MCP over ACP is not available on this connection")
        return self.mcp.open_client(server_id, inbound)

    async def connect_mcp(self, server_id: str, inbound: McpInbound | None = None) -> McpClientConnection:
        """Connect to a server the client declared with ``{"type": "acp", "serverId"}``."""
        connection = self.open_mcp(server_id, inbound)
        await connection.wait_connected()
        return connection

    async def ext_method(self, method: str, params: dict[str, Any] | None = None) -> Any:
        if not method.startswith("_"):
            raise ValueError(f"extension methods start with '_': {method!r}")
        return await self._conn.send_request(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        if not method.startswith("_"):
            raise ValueError(f"extension methods start with '_': {method!r}")
        self._conn.send_notification(method, params)
        await self._conn.drain()

