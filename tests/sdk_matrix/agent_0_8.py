"""A test agent written against agent-client-protocol 0.8.x, as agents pinned to it are.

0.8 routes ``session/set_model`` (unstable) and ``session/list`` (unstable),
has no ``session/set_config_option`` route and no elicitation; the terminal
kill models are ``KillTerminalCommand*``.
"""

from __future__ import annotations

from typing import Any

from acp import Agent, text_block, update_agent_message
from acp.schema import (
    KillTerminalCommandResponse,
    SetSessionModelResponse,
)

from tests.sdk_matrix.common import RecordingAgent

RELEASE = "0.8"


class ReleaseAgent(RecordingAgent, Agent):
    """Records its calls (``RecordingAgent``), also those of the methods 0.8 routes besides."""

    kill_response = KillTerminalCommandResponse

    def text_update(self, text: str) -> Any:
        return update_agent_message(text_block(text))

    async def set_session_model(self, model_id: str, session_id: str, **kwargs: Any) -> SetSessionModelResponse:
        self.calls.append(("set_session_model", {"model_id": model_id, "session_id": session_id, **kwargs}))
        return SetSessionModelResponse()
