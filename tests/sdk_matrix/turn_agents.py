"""Agents the pipe tests of test_turn_order.py run as processes, written for the installed release:

    python -m tests.sdk_matrix.turn_agents {sdk|compat} {story|spawner}

``sdk`` serves the agent with the release's own ``run_agent`` over stdio, ``compat`` with
``acp_fast.compat.run_agent``; the agent's code is the same.

``story`` (``StoryAgent``) stops its turns the way agents built on a model client do: each session
has one stream of words (a producer task feeding a queue, as a client reading a model's response
does); ``cancel`` takes a step of its own and then cancels the prompt's task, which the prompt kept
from ``asyncio.current_task()``; the prompt's cleanup closes the stream, which takes steps too (its
producer is stopped and awaited), then drops what was queued and says ``stream closed``. A cleanup
interrupted by a second ``CancelledError`` leaves the stream open, and the next prompt's first
updates are the words still queued in it.

``spawner`` (``SpawnerAgent``): the prompt ``"K M"`` starts a task that yields K times and then
sends ``spawned``, yields M times itself and returns; ``session/new`` with ``_meta.spawnTurns`` K
does the same before its answer. Where ``spawned`` lands beside the answer tells how many loop
turns the runtime gives such tasks before it writes the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from tests.sdk_matrix.common import release_agent_module

ReleaseAgent: Any = release_agent_module().ReleaseAgent

#: Words the story's stream holds before its model pauses (the prompt forwards ``STORY_SEEN`` of them).
STORY_QUEUED = 8
STORY_SEEN = 3


def _text(prompt: list[Any]) -> str:
    return str(getattr(prompt[0], "text", "")) if prompt else ""


class _Stream:
    """A model response being read: a producer queues words, then waits for more that never come."""

    def __init__(self) -> None:
        self.words: asyncio.Queue[str] = asyncio.Queue()
        self.closed = False
        self._producer = asyncio.get_running_loop().create_task(self._produce())

    async def _produce(self) -> None:
        for i in range(1, STORY_QUEUED + 1):
            self.words.put_nowait(f"w{i} ")
        try:
            await asyncio.Event().wait()  # the model pauses mid-story
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # hanging up takes a step, as closing a socket does
            raise

    async def aclose(self) -> None:
        self._producer.cancel()
        await asyncio.wait({self._producer})
        while not self.words.empty():
            self.words.get_nowait()
        self.closed = True


class StoryAgent(ReleaseAgent):  # type: ignore[misc, valid-type]
    def __init__(self) -> None:
        super().__init__()
        self.task: asyncio.Task[Any] | None = None
        self.streams: dict[str, _Stream] = {}

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp.schema import PromptResponse

        left = self.streams.get(session_id)
        if left is not None and not left.closed:  # a stream the last turn did not close
            while not left.words.empty():
                await self.conn.session_update(session_id, self.text_update(left.words.get_nowait()))
        if _text(prompt) != "story":
            await self.conn.session_update(session_id, self.text_update("hello"))
            return PromptResponse(stop_reason="end_turn")
        self.task = asyncio.current_task()
        stream = self.streams[session_id] = _Stream()
        try:
            for _ in range(STORY_SEEN):
                await self.conn.session_update(session_id, self.text_update(await stream.words.get()))
            await asyncio.Event().wait()  # the rest of the story is slow to come
        except asyncio.CancelledError:
            await stream.aclose()
            await self.conn.session_update(session_id, self.text_update("stream closed"))
            return PromptResponse(stop_reason="cancelled", field_meta={"stream": "closed"})
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        await asyncio.sleep(0)  # its own bookkeeping first (a model client's interrupt, telemetry)
        if self.task is not None:
            self.task.cancel()


class SpawnerAgent(ReleaseAgent):  # type: ignore[misc, valid-type]
    def __init__(self) -> None:
        super().__init__()
        self.spawned: set[asyncio.Task[None]] = set()

    def _spawn(self, session_id: str, turns: int) -> None:
        async def late() -> None:
            for _ in range(turns):
                await asyncio.sleep(0)
            await self.conn.session_update(session_id, self.text_update("spawned"))

        task = asyncio.get_running_loop().create_task(late())
        self.spawned.add(task)
        task.add_done_callback(self.spawned.discard)

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> Any:
        answer = await super().new_session(cwd, mcp_servers, **kwargs)
        turns = kwargs.get("spawnTurns")
        if isinstance(turns, int):
            self._spawn(answer.session_id, turns)
        return answer

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp.schema import PromptResponse

        spawn_turns, own_turns = (int(n) for n in _text(prompt).split())
        self._spawn(session_id, spawn_turns)
        for _ in range(own_turns):
            await asyncio.sleep(0)
        return PromptResponse(stop_reason="end_turn")


def main(runtime: str, kind: str) -> None:
    agent = StoryAgent() if kind == "story" else SpawnerAgent()
    if runtime == "compat":
        from acp_fast.compat import run_agent
    else:
        from acp import run_agent
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_agent(agent))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
