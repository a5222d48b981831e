"""The "cancel, agent ignores it" agent on the official Python SDK (``acp-fast bench --cancel-ignored``).

    python -P acp_fast/tools/bench/sdk_ignoring_agent.py      # needs the bench extra (the official SDK)

The same body as acp_fast/tools/bench/cancel_ignored.py's ``IgnoringAgent``: its
prompt loops STEPS times over ``await asyncio.sleep(STEP_S)`` inside
``contextlib.suppress(CancelledError)``, one ``agent_message_chunk`` per
step, then ends the turn. ``session/cancel`` cancels the prompt's task, as
the SDK's examples do; the SDK itself bounds nothing, so the answer leaves
when the body returns. Imports nothing of acp_fast (run with ``-P``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import acp
from acp import schema

STEPS = 400
STEP_S = 0.01


class SdkIgnoringAgent:
    """acp.Agent implementation (structural: the SDK's Agent is a Protocol)."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions = 0
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._cancelled: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION, auth_methods=[])

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self._sessions += 1
        return schema.NewSessionResponse(session_id=f"ignoring-{self._sessions}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        task = self._running.get(session_id)
        if task is not None:
            self._cancelled.add(session_id)
            task.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        task = asyncio.current_task()
        assert task is not None
        self._running[session_id] = task
        try:
            for i in range(STEPS):
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(STEP_S)
                await self._conn.session_update(session_id, acp.update_agent_message_text(f"step {i}"))
        finally:
            del self._running[session_id]
        stop: Literal["cancelled", "end_turn"] = "cancelled" if session_id in self._cancelled else "end_turn"
        return schema.PromptResponse(stop_reason=stop)


def main() -> None:
    agent: Any = SdkIgnoringAgent()
    asyncio.run(acp.run_agent(agent))


if __name__ == "__main__":
    main()
