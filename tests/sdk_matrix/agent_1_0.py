"""A test agent written against agent-client-protocol 1.0.x.

1.0 builds its router from the ``acp.Agent`` protocol: besides 0.12's routes it
has ``logout`` and ``session/delete``, and (unstable) ``providers/*``, an
agent-side ``mcp/message``, ``nes/*`` and the ``document/*`` notifications;
``session/close`` and ``session/resume`` are stable. ``acp.helpers`` is gone
(updates are built from the schema models) and ``run_agent`` is a coroutine.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import Agent, PromptResponse
from acp.schema import (
    AgentMessageChunk,
    KillTerminalResponse,
    ListProvidersResponse,
    StartNesResponse,
    SuggestNesResponse,
    TextContentBlock,
)

from tests.sdk_matrix.common import RecordingAgent, SessionOptionsAgent

RELEASE = "1.0"


class ReleaseAgent(RecordingAgent, SessionOptionsAgent, Agent):
    """Records its calls (``RecordingAgent``), also those of the methods 1.0 added."""

    kill_response = KillTerminalResponse

    def __init__(self) -> None:
        super().__init__()
        self.notified = asyncio.Event()
        self.suggesting = asyncio.Event()

    def text_update(self, text: str) -> AgentMessageChunk:
        return AgentMessageChunk(content=TextContentBlock(text=text))

    async def delete_session(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("delete_session", {"session_id": session_id, **kwargs}))

    async def logout(self, **kwargs: Any) -> None:
        self.calls.append(("logout", kwargs))

    async def set_session_model(self, model_id: str, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("set_session_model", {"model_id": model_id, "session_id": session_id, **kwargs}))

    async def list_providers(self, **kwargs: Any) -> ListProvidersResponse:
        self.calls.append(("list_providers", kwargs))
        return ListProvidersResponse(providers=[])

    async def set_provider(self, provider_id: str, api_type: str, base_url: str, **kwargs: Any) -> None:
        self.calls.append(("set_provider", {"provider_id": provider_id, "api_type": api_type, "base_url": base_url}))

    async def disable_provider(self, provider_id: str, **kwargs: Any) -> None:
        self.calls.append(("disable_provider", {"provider_id": provider_id}))

    async def start_nes(self, workspace_uri: str | None = None, **kwargs: Any) -> StartNesResponse:
        self.calls.append(("start_nes", {"workspace_uri": workspace_uri}))
        return StartNesResponse(session_id="nes-1")

    async def suggest_nes(self, session_id: str, uri: str, version: int, **kwargs: Any) -> SuggestNesResponse:
        self.calls.append(("suggest_nes", {"session_id": session_id, "uri": uri, "version": version}))
        if uri == "file:///hold":  # waits until cancelled
            self.suggesting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.calls.append(("suggest_cancelled", {"uri": uri}))
                raise
        return SuggestNesResponse(suggestions=[])

    async def did_open(self, session_id: str, uri: str, language_id: str, version: int, text: str, **kw: Any) -> None:
        self.calls.append(("did_open", {"session_id": session_id, "uri": uri, "text": text}))
        self.notified.set()

    async def mcp_message(
        self, connection_id: str, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        self.calls.append(("mcp_message", {"connection_id": connection_id, "method": method}))
        return {"tools": []}

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "")
        if text != "mcp":
            return await super().prompt(prompt, session_id, **kwargs)
        assert self.conn is not None  # MCP over ACP towards the client, as a 1.x connection offers it
        connected = await self.conn.connect_mcp(server_id="srv", trace="t")
        cid = connected.connection_id
        answer = await self.conn.mcp_message(connection_id=cid, method="tools/list", params={"cursor": "n"})
        await self.conn.notify_mcp(connection_id=cid, method="notifications/initialized")
        closed = await self.conn.disconnect_mcp(connection_id=cid)
        self.calls.append(("mcp_client", {"answer": answer, "closed": closed}))
        return PromptResponse(stop_reason="end_turn")
