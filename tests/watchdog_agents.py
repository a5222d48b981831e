"""Agents whose prompt ignores its cancellation, for the cancel watchdog tests (R30).

The prompt's text picks the shape: ``once`` swallows the first cancel, then
waits for ``release``; ``forever`` swallows every cancel until ``release``;
``thread`` waits for a worker thread that returns only on ``release``;
``permission`` catches the cancel, waits for ``release``, then asks for a
permission; ``quick`` returns at once; ``hold`` leaves a request with a
result callback open, fills a one-task spawn limit and waits. Each shape sends an update when it
starts, one right after the cancel (before the answer), and two once
released or aborted ("late" and "finally", after it).
The ``_release`` extension releases every turn and answers once they exited,
with how many messages the connection dropped: usable over a real pipe.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from acp_fast.agent.base import Agent
from acp_fast.wire.errors import AcpError


class IgnoresCancel(Agent):
    """See the module docstring."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()
        self.thread_release = threading.Event()
        self.running = 0
        self.exited = asyncio.Event()
        self.exited.set()
        self.permission_error: int | None = None

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        shape = prompt[0]["text"]
        if shape == "quick":
            return "end_turn"
        if shape == "hold":
            await self._hold(session_id)
        self.running += 1
        self.exited.clear()
        try:
            await self._ignore(shape, session_id)
            await self.client.agent_message_chunk(session_id, "late")
        finally:
            await self.client.agent_message_chunk(session_id, "finally")
            self.running -= 1
            if self.running == 0:
                self.exited.set()
        return "end_turn"

    async def _ignore(self, shape: str, session_id: str) -> None:
        self.started.set()
        await self.client.agent_message_chunk(session_id, "started")
        try:
            if shape == "thread":
                worker = asyncio.get_running_loop().run_in_executor(None, self.thread_release.wait)
                try:
                    await asyncio.shield(worker)
                except asyncio.CancelledError:
                    await self._after_cancel(session_id)
                    await worker  # waits for its thread however often it is cancelled
                return
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await self._after_cancel(session_id)
        while not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                if shape != "forever":
                    raise
        if shape == "permission":
            try:
                await self.client.request_permission(session_id, {"toolCallId": "t1"}, [])
            except AcpError as exc:
                self.permission_error = exc.code

    async def _hold(self, session_id: str) -> None:
        """Leave a request with a result callback open and fill a one-task spawn limit, then wait:
        the shutdown then cannot spawn that callback (R14)."""

        async def on_result(result: Any, error: AcpError | None) -> None:
            await self.client.agent_message_chunk(session_id, "callback ran")

        params = {"sessionId": session_id, "toolCall": {}, "options": []}
        pending = self.client.request("session/request_permission", params)
        pending.on_result(on_result)
        self.client._conn.spawn(asyncio.Event().wait(), name="holds-the-spawn-slot")
        self.started.set()
        await self.client.agent_message_chunk(session_id, "started")
        await asyncio.Event().wait()

    async def _after_cancel(self, session_id: str) -> None:
        self.cancelled.set()
        await self.client.agent_message_chunk(session_id, "after cancel")

    def unblock(self) -> None:
        self.release.set()
        self.thread_release.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        if method == "_release":
            self.unblock()
            await self.exited.wait()
        return {"dropped": self.client._conn.dropped_late, "permissionError": self.permission_error}
