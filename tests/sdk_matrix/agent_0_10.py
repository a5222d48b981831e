"""A test agent written against agent-client-protocol 0.10.x.

0.10 routes ``session/set_config_option`` (select and boolean variants),
``session/close`` (unstable) and still ``session/set_model`` (unstable);
``session/list`` is stable; elicitation exists; kill models are ``KillTerminal*``.
"""

from __future__ import annotations

from typing import Any

from acp import Agent, text_block, update_agent_message
from acp.schema import (
    KillTerminalResponse,
    SetSessionModelResponse,
)

from tests.sdk_matrix.common import RecordingAgent, SessionOptionsAgent

RELEASE = "0.10"


class ReleaseAgent(RecordingAgent, SessionOptionsAgent, Agent):
    """Records its calls (``RecordingAgent``), also those of the methods 0.10 routes besides."""

    kill_response = KillTerminalResponse

    def text_update(self, text: str) -> Any:
        return update_agent_message(text_block(text))

    async def set_session_model(self, model_id: str, session_id: str, **kwargs: Any) -> SetSessionModelResponse:
        self.calls.append(("set_session_model", {"model_id": model_id, "session_id": session_id, **kwargs}))
        return SetSessionModelResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        answer = await super().prompt(prompt, session_id, **kwargs)
        # As the release's own example agent does: acknowledge the client's messageId (a field 0.10 declares).
        answer.user_message_id = kwargs.get("message_id")
        return answer
