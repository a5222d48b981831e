"""R01-R06: the ordered control lane, the concurrent background lane, and what leaves when.

Messages that must race are sent in one read chunk (``Harness.send`` with
several objects), which is what one pipe read delivers; prompts park on
events, so every interleaving below is forced, not hoped for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_fast.agent.base import Agent, Turn, current_context, current_turn
from acp_fast.agent.context import Context
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class LaneAgent(Agent):
    """Records what each control call and each prompt saw; prompts park on ``release``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.turns: dict[str, Turn] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.release: dict[str, asyncio.Event] = {}
        self.mode_gate: asyncio.Event | None = None
        self.mode_entered = asyncio.Event()
        self.seen_mode: dict[str, str | None] = {}

    def ev(self, table: dict[str, asyncio.Event], key: str) -> asyncio.Event:
        return table.setdefault(key, asyncio.Event())

    async def initialize(self, protocol_version: int, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("initialize", protocol_version))
        return {}

    async def authenticate(self, method_id: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("authenticate", method_id))
        return {}

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> None:
        self.calls.append(("session/new", cwd))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self.calls.append(("session/set_mode", mode_id))
        if self.mode_gate is not None:
            self.mode_entered.set()
            await self.mode_gate.wait()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        text = prompt[0]["text"]
        turn = current_turn()
        self.turns[text] = turn
        self.ev(self.started, text).set()
        await self.ev(self.release, text).wait()
        self.seen_mode[text] = turn.session.mode_id  # shared session handle, read late
        return "end_turn"


def obj(h: Harness, method: str, params: Any) -> dict[str, Any]:
    return h.request_obj(method, params)


def test_r01_initialize_and_session_new_in_one_chunk_run_in_order(
    run: Any, framer_cls: type
) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent, framer_cls=framer_cls)
        init = obj(h, "initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}})
        new = obj(h, "session/new", {"cwd": "/tmp", "mcpServers": []})
        h.send(init, new)
        assert "result" in await h.response(init["id"])
        created = await h.response(new["id"])
        assert "sessionId" in created["result"], created  # not "session/new before initialize"
        assert agent.calls == [("initialize", 1), ("session/new", "/tmp")]
        assert [m["id"] for m in h.messages] == [init["id"], new["id"]]
        await close_and_check(h)

    run(body())


def test_r01_context_is_updated_before_the_next_message_is_admitted(run: Any) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent)
        caps = {"fs": {"readTextFile": True}}
        init = obj(h, "initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        new = obj(h, "session/new", {"cwd": "/tmp", "mcpServers": []})
        h.send(init, new)
        sid = (await h.response(new["id"]))["result"]["sessionId"]
        # A prompt sent in the same chunk as authenticate is admitted after it finished.
        auth = obj(h, "authenticate", {"methodId": "token"})
        prompt = obj(h, "session/prompt", prompt_params(sid, "p"))
        h.send(auth, prompt)
        await agent.ev(agent.started, "p").wait()
        snap = agent.turns["p"].context
        assert snap is not None
        assert snap.initialized and snap.client_capabilities == caps
        assert snap.authenticated and snap.auth_method == "token"
        agent.ev(agent.release, "p").set()
        assert (await h.response(prompt["id"]))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())


def test_r01_control_requests_run_one_at_a_time_holding_the_loop(run: Any) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent)
        await h.initialize()
        sid = await h.new_session()
        agent.mode_gate = asyncio.Event()
        first = obj(h, "session/set_mode", {"sessionId": sid, "modeId": "one"})
        second = obj(h, "session/set_mode", {"sessionId": sid, "modeId": "two"})
        h.send(first, second)
        await agent.mode_entered.wait()
        # The first is still running: the second has not even been taken from the inbox.
        assert h.conn.counts["inbox"] == 1
        assert agent.calls[-1] == ("session/set_mode", "one")
        agent.mode_gate.set()
        await h.response(second["id"])
        assert [c for c in agent.calls if c[0] == "session/set_mode"] == [
            ("session/set_mode", "one"),
            ("session/set_mode", "two"),
        ]
        assert h.server.sessions.get(sid).mode_id == "two"
        assert [m["id"] for m in h.messages[-2:]] == [first["id"], second["id"]]
        await close_and_check(h)

    run(body())


def test_r02_prompt_gets_context_snapshot_of_its_admission_and_shares_sessions(run: Any) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent)
        await h.initialize()
        a, b = await h.new_session(), await h.new_session()
        # a is admitted, then authenticate runs before a's task takes its first step.
        pa_obj = obj(h, "session/prompt", prompt_params(a, "a"))
        auth = obj(h, "authenticate", {"methodId": "m1"})
        h.send(pa_obj, auth)
        pa = pa_obj["id"]
        assert (await h.response(auth["id"]))["result"] == {}
        await agent.ev(agent.started, "a").wait()
        assert (await h.call("session/set_mode", {"sessionId": a, "modeId": "late"}))["result"] == {}
        pb = h.request("session/prompt", prompt_params(b, "b"))
        await agent.ev(agent.started, "b").wait()
        snap_a, snap_b = agent.turns["a"].context, agent.turns["b"].context
        assert snap_a is not None and snap_b is not None
        assert not snap_a.authenticated  # as of a's admission, not of now
        assert snap_b.authenticated and snap_b.auth_method == "m1"
        assert h.server.context.authenticated
        # The session store is shared, not copied: a sees the mode set after its admission.
        assert agent.turns["a"].session is h.server.sessions.get(a)
        agent.ev(agent.release, "a").set()
        agent.ev(agent.release, "b").set()
        await h.response(pa)
        await h.response(pb)
        assert agent.seen_mode["a"] == "late"
        await close_and_check(h)

    run(body())


class ContextLaneAgent(LaneAgent):
    """A LaneAgent whose prompts also record ``current_context()``; no end-of-turn hook."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: dict[str, Context | None] = {}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        try:
            self.contexts[prompt[0]["text"]] = current_context()
        except RuntimeError:  # none set: recorded, so the test fails on it instead of waiting
            self.contexts[prompt[0]["text"]] = None
        return await super().prompt(session_id, prompt, **kwargs)


class ContextLaneAgentWithTurnEnd(ContextLaneAgent):
    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.calls.append(("on_turn_end", stop_reason))


@pytest.mark.parametrize("agent_cls", [ContextLaneAgent, ContextLaneAgentWithTurnEnd])
def test_r02_current_context_in_a_prompt_is_its_admission_snapshot(
    run: Any, agent_cls: type[ContextLaneAgent]
) -> None:
    """With or without an on_turn_end hook (the server runs the two kinds of turn differently)."""

    async def body() -> None:
        agent = agent_cls()
        h = Harness(agent)
        await h.initialize()
        a = await h.new_session()
        pa_obj = obj(h, "session/prompt", prompt_params(a, "a"))
        auth = obj(h, "authenticate", {"methodId": "m1"})
        h.send(pa_obj, auth)
        assert (await h.response(auth["id"]))["result"] == {}
        await agent.ev(agent.started, "a").wait()
        seen = agent.contexts["a"]
        assert seen is not None and seen is agent.turns["a"].context
        assert not seen.authenticated and h.server.context.authenticated
        agent.ev(agent.release, "a").set()
        assert (await h.response(pa_obj["id"]))["result"] == {"stopReason": "end_turn"}
        if agent_cls is ContextLaneAgentWithTurnEnd:
            assert agent.calls[-1] == ("on_turn_end", "end_turn")
        await close_and_check(h)

    run(body())


def test_r03_control_requests_do_not_queue_behind_a_running_prompt(run: Any) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent)
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "long"))
        await agent.ev(agent.started, "long").wait()
        # The prompt stays parked for the whole block below.
        assert "sessionId" in (await h.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]
        assert (await h.call("session/set_mode", {"sessionId": sid, "modeId": "m"}))["result"] == {}
        assert h.find_response(pid) is None and not agent.ev(agent.release, "long").is_set()
        h.notify("session/cancel", {"sessionId": sid})
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        await close_and_check(h)

    run(body())


def test_r04_background_responses_leave_out_of_order(run: Any) -> None:
    async def body() -> None:
        agent = LaneAgent()
        h = Harness(agent)
        await h.initialize()
        a, b = await h.new_session(), await h.new_session()
        first = obj(h, "session/prompt", prompt_params(a, "first"))
        second = obj(h, "session/prompt", prompt_params(b, "second"))
        h.send(first, second)
        await agent.ev(agent.started, "first").wait()
        await agent.ev(agent.started, "second").wait()
        agent.ev(agent.release, "second").set()
        await h.response(second["id"])
        assert h.find_response(first["id"]) is None  # the earlier request is still running
        agent.ev(agent.release, "first").set()
        await h.response(first["id"])
        ids = [m["id"] for m in h.messages if m.get("id") in (first["id"], second["id"])]
        assert ids == [second["id"], first["id"]]  # exactly one response each, by id
        await close_and_check(h)

    run(body())


class StreamingAgent(Agent):
    """Every prompt writes ``steps`` updates; all prompts move in lock step via a barrier."""

    def __init__(self, prompts: int, steps: int) -> None:
        self.steps = steps
        self.barrier = asyncio.Barrier(prompts)

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        for step in range(self.steps):
            await self.barrier.wait()  # every prompt wrote its last step before anyone goes on
            await self.client.agent_message_chunk(session_id, str(step))
        return "end_turn"


def test_r05_updates_of_each_prompt_in_order_and_before_its_response_with_32_interleaving(
    run: Any,
) -> None:
    prompts, steps = 32, 4

    async def body() -> None:
        h = Harness(StreamingAgent(prompts, steps))
        await h.initialize()
        reqs = [obj(h, "session/new", {"cwd": "/tmp", "mcpServers": []}) for _ in range(prompts)]
        h.send(*reqs)
        sids = [(await h.response(r["id"]))["result"]["sessionId"] for r in reqs]
        start = len(h.messages)
        calls = [obj(h, "session/prompt", prompt_params(sid, "go")) for sid in sids]
        h.send(*calls)
        for c in calls:
            assert (await h.response(c["id"]))["result"] == {"stopReason": "end_turn"}
        out = h.messages[start:]
        first_round = [m["params"]["sessionId"] for m in out[:prompts]]
        assert sorted(first_round) == sorted(sids)  # really interleaved, not one prompt after another
        for sid, call in zip(sids, calls, strict=True):
            mine = [
                i
                for i, m in enumerate(out)
                if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
            ]
            assert [out[i]["params"]["update"]["content"]["text"] for i in mine] == [
                str(s) for s in range(steps)
            ]
            answer = next(i for i, m in enumerate(out) if m.get("id") == call["id"])
            assert max(mine) < answer, (sid, mine, answer)
        await close_and_check(h)

    run(body())


def test_r06_session_cancel_never_gets_a_response_even_malformed(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        h = Harness(LaneAgent())
        await h.initialize()
        before = len(h.messages)
        cancels = [
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such"}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {}},
            {"jsonrpc": "2.0", "method": "session/cancel"},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 7}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": ["sess"]},
        ]
        follow = obj(h, "session/new", {"cwd": "/tmp", "mcpServers": []})
        h.send(*cancels, follow)
        await h.response(follow["id"])
        assert h.messages[before:] == [h.find_response(follow["id"])]
        await close_and_check(h)

    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        run(body())
    dropped = [r for r in caplog.records if "malformed session/cancel" in r.getMessage()]
    assert len(dropped) == 4, [r.getMessage() for r in caplog.records]
