"""The two seams a host composes into an AgentServer (agent/seams.py): a session source that
``session/load`` and ``session/resume`` ask first, and a prompt budget the pool checks before a
prompt and gives back on every path (R15, R28). Served over the in-memory pipe of the harness.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_fast.agent.base import Agent
from acp_fast.agent.pool import BackgroundPool
from acp_fast.agent.server import AgentServer
from acp_fast.agent.sessions import Session, SessionTable
from acp_fast.wire.errors import InvalidParams, ServerBusy
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class SeamHarness(Harness):
    """The harness with a source and a budget composed into its server."""

    def __init__(self, agent: Agent, source: Any = None, budget: Any = None) -> None:
        self._wire(None, None)
        pool = BackgroundPool(self.loop, self.limits.max_background, budget)
        self.server = AgentServer(agent, self.conn, pool=pool, source=source)
        self.agent = agent
        self.task = self.loop.create_task(self.conn.run(), name="harness.run")


class Source:
    """Holds sessions kept elsewhere; refuses the ids in ``refused``."""

    def __init__(self, kept: dict[str, Session], refused: frozenset[str] = frozenset()) -> None:
        self.kept = kept
        self.refused = refused
        self.asked: list[str] = []

    async def reattach(self, session_id: str, sessions: SessionTable, agent: Agent) -> None:
        self.asked.append(session_id)
        if session_id in self.refused:
            raise InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})
        session = self.kept.pop(session_id, None)
        if session is not None:
            sessions.add(session)


class Loader(Agent):
    """Records, when its load or resume runs, whether the session was in the table already."""

    def __init__(self) -> None:
        self.saw_open: list[tuple[str, bool]] = []

    async def load_session(self, session_id: str, cwd: str, mcp_servers: Any, **kw: Any) -> None:
        self.saw_open.append((session_id, self.client.sessions is not None and session_id in self.client.sessions))

    async def resume_session(self, session_id: str, cwd: str, mcp_servers: Any = None, **kw: Any) -> None:
        self.saw_open.append((session_id, self.client.sessions is not None and session_id in self.client.sessions))


def test_a_session_source_is_asked_before_load_and_resume_and_its_session_keeps_its_state(run: Any) -> None:
    async def main() -> None:
        kept = Session("kept", "/old", None)
        kept.data["n"] = 7
        source = Source({"kept": kept})
        agent = Loader()
        h = SeamHarness(agent, source=source)
        await h.initialize()
        loaded = await h.call("session/load", {"sessionId": "kept", "cwd": "/new", "mcpServers": []})
        assert loaded["result"] == {}, loaded
        resumed = await h.call("session/resume", {"sessionId": "other", "cwd": "/new"})
        assert resumed["result"] == {}, resumed
        assert source.asked == ["kept", "other"]
        assert agent.saw_open == [("kept", True), ("other", False)]
        session = h.server.sessions.get("kept")
        assert session is kept and session.data == {"n": 7} and session.cwd == "/new"
        await close_and_check(h)

    run(main())


def test_a_session_source_refusal_answers_the_load_and_the_agent_is_not_called(run: Any) -> None:
    async def main() -> None:
        agent = Loader()
        h = SeamHarness(agent, source=Source({}, refused=frozenset({"theirs"})))
        await h.initialize()
        resp = await h.call("session/load", {"sessionId": "theirs", "cwd": "/tmp", "mcpServers": []})
        assert resp["error"]["code"] == -32602 and resp["error"]["data"] == {"sessionId": "theirs"}, resp
        assert agent.saw_open == []
        assert "theirs" not in h.server.sessions
        await close_and_check(h)

    run(main())


class Budget:
    """A shared prompt count with room for ``room`` prompts."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.running = 0
        self.started = 0

    def check_prompt(self) -> None:
        if self.running >= self.room:
            raise ServerBusy(f"server busy: {self.running} prompts running here", {"limit": self.room})

    def prompt_started(self) -> None:
        self.running += 1
        self.started += 1

    def prompt_ended(self) -> None:
        self.running -= 1


class Waiter(Agent):
    """Each prompt waits for ``go`` (or its cancel)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.entered = asyncio.Event()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> str:
        self.entered.set()
        await self.go.wait()
        return "end_turn"


def test_a_prompt_budget_refuses_past_its_room_and_is_given_back_on_every_path(run: Any) -> None:
    async def main() -> None:
        budget = Budget(room=1)
        agent = Waiter()
        h = SeamHarness(agent, budget=budget)
        await h.initialize()
        first, second = await h.new_session(), await h.new_session()
        running = h.request("session/prompt", prompt_params(first, "a"))
        await agent.entered.wait()
        refused = await h.call("session/prompt", prompt_params(second, "b"))
        assert refused["error"]["code"] == -32000 and refused["error"]["data"] == {"limit": 1}, refused
        assert budget.running == 1 and not h.server.sessions.get(second).busy
        agent.go.set()
        assert (await h.response(running))["result"] == {"stopReason": "end_turn"}
        assert budget.running == 0
        agent.go.clear()
        cancelled = h.request("session/prompt", prompt_params(second, "c"))
        await h.wait_for(lambda: h.server.sessions.get(second).busy)
        h.notify("session/cancel", {"sessionId": second})
        assert (await h.response(cancelled))["result"] == {"stopReason": "cancelled"}
        assert budget.running == 0 and budget.started == 2
        await close_and_check(h)

    run(main())
