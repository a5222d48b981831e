"""The ``session/update`` half of the agent's handle on the client: one helper per update kind.

Updates go out through the connection's ordered writer and wait for stdout
when it is backed up (R26); a prompt's updates therefore leave in the order
the prompt produced them and before its response (R05). A kind the client
must opt in to (``UPDATE_GATES``: notice, compaction, plan operations,
subagents) raises CapabilityNotSupported before anything is written when
the client did not advertise it (a MUST NOT in ACP); ``supports_update(kind)``
asks first, and the raw ``session_update`` applies the same rule to the kind
it is given. ``Client`` (client_handle.py) adds the requests, subagents and
MCP over ACP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..wire.errors import MethodNotFound
from ..wire.jsonrpc import encode_notification
from ..wire.routes import NOTIFICATION
from .methods import UPDATE_GATES

if TYPE_CHECKING:
    from ..peer.connection import Connection
    from .context import Context


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
    return drop_none(
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


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Clear:
    """The type of ``CLEAR``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CLEAR"


#: For the patch fields of the newer updates (subagent_update, session_message,
#: compaction_update): None leaves a field off the wire (unchanged), CLEAR sends
#: ``null`` (cleared).
CLEAR: Final = Clear()


def _patch(d: dict[str, Any]) -> dict[str, Any]:
    """Omitted (None) fields off the wire, CLEAR ones as null."""
    return {k: (None if v is CLEAR else v) for k, v in d.items() if v is not None}


def _block(content: str | dict[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": content} if type(content) is str else content  # type: ignore[return-value]


_GATED_KINDS: Final = frozenset(UPDATE_GATES)


def subagent_update_dict(
    child_id: str,
    *,
    title: str | Clear | None = None,
    description: str | Clear | None = None,
    capabilities: dict[str, Any] | Clear | None = None,
    state: str | dict[str, Any] | Clear | None = None,
    cwd: str | Clear | None = None,
    additional_directories: list[str] | Clear | None = None,
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


class SessionUpdates:
    """Sends ``session/update`` notifications on one connection, gated by the client's capabilities."""

    def __init__(self, conn: Connection, context: Callable[[], Context]) -> None:
        self._conn = conn
        self._context = context

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._context().client_capabilities

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
            session_id, drop_none({"sessionUpdate": "usage_update", "used": used, "size": size, "cost": cost})
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
            drop_none({"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}),
        )

    async def compaction_update(
        self,
        session_id: str,
        compaction_id: str,
        status: str,
        *,
        summary: list[dict[str, Any]] | Clear | None = None,
        error: str | Clear | None = None,
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
            plan = drop_none({"type": "markdown", "planId": plan_id, "content": markdown, "path": path})
        else:
            plan = {"type": "file", "planId": plan_id, "uri": uri}
        await self._gated_update(session_id, {"sessionUpdate": "plan_update", "plan": plan})

    async def plan_removed(self, session_id: str, plan_id: str) -> None:
        """Remove the plan ``plan_id`` (``plan``)."""
        await self._gated_update(session_id, {"sessionUpdate": "plan_removed", "planId": plan_id})

    async def session_message(
        self,
        session_id: str,
        message_id: str,
        *,
        sender_session_id: str | Clear | None = None,
        recipient_session_id: str | Clear | None = None,
        sender_message_id: str | Clear | None = None,
        recipient_message_id: str | Clear | None = None,
        content: list[dict[str, Any]] | Clear | None = None,
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
