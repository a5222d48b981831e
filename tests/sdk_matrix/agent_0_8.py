"""A test agent written against agent-client-protocol 0.8.x, as agents pinned to it are.

0.8 routes ``session/set_model`` (unstable) and ``session/list`` (unstable),
has no ``session/set_config_option`` route and no elicitation; the terminal
kill models are ``KillTerminalCommand*``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import Agent, Client, InitializeResponse, NewSessionResponse, PromptResponse, text_block, update_agent_message
from acp.schema import (
    AgentCapabilities,
    KillTerminalCommandResponse,
    ListSessionsResponse,
    SetSessionModelResponse,
    TextContentBlock,
)

RELEASE = "0.8"


class ReleaseAgent(Agent):
    """Records its calls; prompt commands: ``echo X``, ``terminal``, ``raw``, ``crash``, ``whoami``."""

    def __init__(self) -> None:
        self.conn: Client | None = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.sessions = 0
        self.cancel_seen = asyncio.Event()

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        self.calls.append(("initialize", {"protocol_version": protocol_version}))
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"s{self.sessions}")

    async def list_sessions(self, cursor: str | None = None, cwd: str | None = None, **kwargs: Any) -> Any:
        self.calls.append(("list_sessions", {}))
        return ListSessionsResponse(sessions=[])

    async def set_session_model(self, model_id: str, session_id: str, **kwargs: Any) -> SetSessionModelResponse:
        self.calls.append(("set_session_model", {"model_id": model_id, "session_id": session_id, **kwargs}))
        return SetSessionModelResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("cancel", {"session_id": session_id}))
        self.cancel_seen.set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        self.calls.append(("prompt", {"session_id": session_id, "prompt": prompt, **kwargs}))
        assert self.conn is not None
        text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "")
        if text == "crash":
            raise ValueError("the release agent crashed")
        if text == "terminal":
            created = await self.conn.create_terminal(command="ls", session_id=session_id)
            killed = await self.conn.kill_terminal(session_id=session_id, terminal_id=created.terminal_id)
            assert killed is None or isinstance(killed, KillTerminalCommandResponse)
            text = f"terminal {created.terminal_id}"
        elif text == "raw":
            out = await self.conn._conn.send_request("terminal/output", {"sessionId": session_id, "terminalId": "t1"})
            text = f"raw {out['output']}"
        elif text == "whoami":
            text = f"session {session_id}"
        await self.conn.session_update(session_id, update_agent_message(text_block(text)))
        return PromptResponse(stop_reason="end_turn")
