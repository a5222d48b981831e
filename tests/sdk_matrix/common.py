"""What every release's test agent does alike, written with schema names all releases from 0.8 share.

A release module mixes ``RecordingAgent`` in before the release's ``acp.Agent``
and adds what its release routes, its kill-terminal model and how it builds
a text update (``acp.helpers`` before 1.0, the schema models from 1.0).
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import Any

from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    ListSessionsResponse,
    NewSessionResponse,
    PromptResponse,
    TextContentBlock,
)


def _release() -> str:
    from acp_fast.compat import SDK_VERSION

    return f"{SDK_VERSION[0]}.{SDK_VERSION[1]}"


#: The installed release, major.minor.
RELEASE = _release()
#: 0.9 routes what 0.10 does and 0.11 what 0.12 does (read from their routers): they share those agents.
SAME_API = {"0.9": "0.10", "0.11": "0.12"}
_AGENT_MODULES = {"0.8": "agent_0_8", "0.9": "agent_0_10", "0.10": "agent_0_10", "0.11": "agent_0_12"}


def release_agent_module() -> ModuleType:
    """The module of the test agent written for the installed release's API (its ``ReleaseAgent``)."""
    name = "agent_1_0" if int(RELEASE.split(".")[0]) >= 1 else _AGENT_MODULES.get(RELEASE, "agent_0_12")
    return importlib.import_module(f"tests.sdk_matrix.{name}")


class RecordingAgent:
    """Records its calls; prompt commands: ``echo X``, ``terminal``, ``raw``, ``crash``, ``whoami``."""

    #: The release's kill-terminal response model (renamed in 0.10).
    kill_response: type = type(None)

    def __init__(self) -> None:
        self.conn: Any = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.sessions = 0
        self.cancel_seen = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def text_update(self, text: str) -> Any:
        """The release's agent message chunk carrying ``text``."""
        raise NotImplementedError

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        self.calls.append(("initialize", {"protocol_version": protocol_version}))
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"s{self.sessions}")

    async def list_sessions(self, cursor: str | None = None, cwd: str | None = None, **kwargs: Any) -> Any:
        self.calls.append(("list_sessions", {}))
        return ListSessionsResponse(sessions=[])

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
            assert killed is None or isinstance(killed, self.kill_response)
            text = f"terminal {created.terminal_id}"
        elif text == "raw":
            out = await self.conn._conn.send_request("terminal/output", {"sessionId": session_id, "terminalId": "t1"})
            text = f"raw {out['output']}"
        elif text == "whoami":
            text = f"session {session_id}"
        await self.conn.session_update(session_id, self.text_update(text))
        return PromptResponse(stop_reason="end_turn")


class SessionOptionsAgent:
    """``close_session`` and ``set_config_option``, for the releases that route them (0.10 on)."""

    calls: list[tuple[str, dict[str, Any]]]

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("close_session", {"session_id": session_id}))

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool, **kwargs: Any) -> Any:
        from acp.schema import SetSessionConfigOptionResponse  # 0.8 has no such model

        self.calls.append(("set_config_option", {"config_id": config_id, "value": value}))
        return SetSessionConfigOptionResponse(config_options=[])
