"""A test agent written against agent-client-protocol 0.12.x.

0.12 no longer routes ``session/set_model`` (a ``set_session_model`` method is
never called); the rest is as in 0.10, plus message transports (HTTP/WebSocket).
"""

from __future__ import annotations

from typing import Any

from acp import Agent, text_block, update_agent_message
from acp.schema import (
    KillTerminalResponse,
)

from tests.sdk_matrix.common import RecordingAgent, SessionOptionsAgent

RELEASE = "0.12"


class ReleaseAgent(RecordingAgent, SessionOptionsAgent, Agent):
    """Records its calls (``RecordingAgent``), also those of the methods 0.12 routes besides."""

    kill_response = KillTerminalResponse

    def text_update(self, text: str) -> Any:
        return update_agent_message(text_block(text))

    async def set_session_model(self, model_id: str, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("set_session_model", {"model_id": model_id, "session_id": session_id, **kwargs}))
