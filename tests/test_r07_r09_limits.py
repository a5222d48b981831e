"""R07-R09 (and R03): one prompt per session, 32 background requests, control stays served.

Prompts park on a per-session ``release`` event after setting ``started``, so
the pool is held full for exactly as long as the test needs.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from acp_fast.agent.base import Agent
from acp_fast.wire.limits import MAX_BACKGROUND, Limits
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class ParkingAgent(Agent):
    """Each prompt streams ``before``, parks until released, streams ``after``."""

    background_extensions: ClassVar[frozenset[str]] = frozenset({"_bg"})

    def __init__(self) -> None:
        self.started: dict[str, asyncio.Event] = {}
        self.release: dict[str, asyncio.Event] = {}
        self.prompted: list[tuple[str, str]] = []
        self.modes: list[tuple[str, str]] = []
        self.ext_started = asyncio.Event()
        self.ext_release = asyncio.Event()

    def ev(self, table: dict[str, asyncio.Event], session_id: str) -> asyncio.Event:
        return table.setdefault(session_id, asyncio.Event())

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        text = prompt[0]["text"]
        self.prompted.append((session_id, text))
        await self.client.agent_message_chunk(session_id, f"{text}:before")
        self.ev(self.started, session_id).set()
        await self.ev(self.release, session_id).wait()
        await self.client.agent_message_chunk(session_id, f"{text}:after")
        return "end_turn"

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self.modes.append((session_id, mode_id))

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        self.ext_started.set()
        await self.ext_release.wait()
        return {"ok": True}


def texts(h: Harness, session_id: str) -> list[str]:
    return [u["update"]["content"]["text"] for u in h.updates(session_id)]


async def open_sessions(h: Harness, n: int) -> list[str]:
    await h.initialize()
    reqs = [h.request_obj("session/new", {"cwd": "/tmp", "mcpServers": []}) for _ in range(n)]
    h.send(*reqs)
    return [(await h.response(r["id"]))["result"]["sessionId"] for r in reqs]


def test_r07_second_prompt_on_busy_session_is_rejected_and_first_completes_intact(
    run: Any, framer_cls: type
) -> None:
    async def body() -> None:
        agent = ParkingAgent()
        h = Harness(agent, framer_cls=framer_cls)
        [sid] = await open_sessions(h, 1)
        first = h.request("session/prompt", prompt_params(sid, "first"))
        await agent.ev(agent.started, sid).wait()
        session = h.server.sessions.get(sid)
        job = session.turn
        assert job is not None
        second = await h.call("session/prompt", prompt_params(sid, "second"))
        err = second["error"]
        assert err["code"] == -32000, second
        assert sid in err["message"], err
        # The running turn is untouched: same job, same token, not cancelled, not restarted.
        assert session.turn is job and session.busy
        assert session.token is job.token and not job.token.cancelled
        assert agent.prompted == [(sid, "first")]
        agent.ev(agent.release, sid).set()
        done = await h.response(first)
        assert done["result"] == {"stopReason": "end_turn"}, done
        assert texts(h, sid) == ["first:before", "first:after"]
        # The slot is free again: the session accepts its next prompt.
        agent.release[sid].set()
        again = await h.call("session/prompt", prompt_params(sid, "third"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        await close_and_check(h)

    run(body())


def test_r08_r09_r03_33rd_background_request_rejected_while_control_is_served(run: Any) -> None:
    async def body() -> None:
        agent = ParkingAgent()
        h = Harness(agent)
        sids = await open_sessions(h, MAX_BACKGROUND + 1)
        busy, spare = sids[:MAX_BACKGROUND], sids[MAX_BACKGROUND]
        pids = {}
        for sid in busy:
            pids[sid] = h.request("session/prompt", prompt_params(sid, sid))
        for sid in busy:
            await agent.ev(agent.started, sid).wait()
        assert h.server.pool.in_flight == MAX_BACKGROUND

        rejected = await h.call("session/prompt", prompt_params(spare, "33rd"))
        err = rejected["error"]
        assert err["code"] == -32000, rejected
        assert f"limit {MAX_BACKGROUND}" in err["message"], err
        assert f"{MAX_BACKGROUND} background requests in flight" in err["message"], err
        ext = await h.call("_bg", {})  # background extensions count against the same limit
        assert ext["error"]["code"] == -32000, ext
        assert not agent.ext_started.is_set()

        # R09/R03: control requests are served at once while every slot is held.
        new = await h.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert "sessionId" in new["result"], new
        mode = await h.call("session/set_mode", {"sessionId": busy[0], "modeId": "plan"})
        assert mode["result"] == {}, mode
        assert agent.modes == [(busy[0], "plan")]
        h.notify("session/cancel", {"sessionId": busy[1]})
        cancelled = await h.response(pids[busy[1]])
        assert cancelled["result"] == {"stopReason": "cancelled"}, cancelled

        # Rejected means not queued: the refused prompt never started once a slot freed.
        assert (spare, "33rd") not in agent.prompted
        retry = h.request("session/prompt", prompt_params(spare, "retry"))
        await agent.ev(agent.started, spare).wait()
        assert [p for p in agent.prompted if p[0] == spare] == [(spare, "retry")]
        for sid in [*busy, spare]:
            agent.ev(agent.release, sid).set()
        for sid in busy:
            if sid != busy[1]:
                assert (await h.response(pids[sid]))["result"] == {"stopReason": "end_turn"}
        assert (await h.response(retry))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())


def test_r08_background_limit_is_configurable_and_counts_extensions(run: Any) -> None:
    async def body() -> None:
        agent = ParkingAgent()
        h = Harness(agent, limits=Limits(max_background=2))
        a, b = await open_sessions(h, 2)
        pa = h.request("session/prompt", prompt_params(a, "a"))
        ext = h.request("_bg", {})
        await agent.ev(agent.started, a).wait()
        await agent.ext_started.wait()
        refused = await h.call("session/prompt", prompt_params(b, "b"))
        assert refused["error"]["code"] == -32000, refused
        assert "limit 2" in refused["error"]["message"], refused
        assert refused["error"]["data"] == {"limit": 2, "inFlight": 2}, refused
        agent.ext_release.set()
        assert (await h.response(ext))["result"] == {"ok": True}
        # One slot freed: the next background request is admitted again.
        agent.ev(agent.release, b).set()
        ok = await h.call("session/prompt", prompt_params(b, "b2"))
        assert ok["result"] == {"stopReason": "end_turn"}, ok
        agent.ev(agent.release, a).set()
        assert (await h.response(pa))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())


def test_r07_r15_slots_are_free_by_the_time_the_answer_is_written(run: Any) -> None:
    """A client that sends its next prompt the instant it reads an answer is never refused.

    The test client reacts inside the write itself (the earliest moment the
    answer exists outside the agent), after a completed turn and after a
    cancelled one, with the background limit at 1 so the pool slot is checked
    as well as the session's prompt slot.
    """

    async def body() -> None:
        agent = ParkingAgent()
        h = Harness(agent, Limits(max_background=1))
        await h.initialize()
        sid = (await open_sessions(h, 1))[0]
        watch: dict[Any, str] = {}  # answer id -> text of the prompt to send on seeing it
        sent: dict[Any, Any] = {}  # answer id -> id of the follow-up prompt
        deliver = h.on_output

        def on_data(data: bytes) -> None:
            deliver(data)
            for msg in list(h.messages):
                rid = msg.get("id")
                if "method" not in msg and rid in watch and rid not in sent:
                    sent[rid] = h.request("session/prompt", prompt_params(sid, watch[rid]))

        def release_and_rearm() -> None:
            old = agent.ev(agent.release, sid)
            agent.release[sid] = asyncio.Event()  # the follow-up parks on a fresh event
            agent.started[sid] = asyncio.Event()
            old.set()

        h.on_output = on_data
        watch[101] = "after-completed"
        h.send(h.request_obj("session/prompt", prompt_params(sid, "first"), id=101))
        await agent.ev(agent.started, sid).wait()
        release_and_rearm()
        assert (await h.response(101))["result"] == {"stopReason": "end_turn"}
        second = sent[101]
        # Either the follow-up runs (admitted) or it was answered (refused): fail fast on the latter.
        await h.wait_for(lambda: agent.ev(agent.started, sid).is_set() or h.find_response(second))
        assert h.find_response(second) is None, h.find_response(second)
        assert agent.prompted[-1] == (sid, "after-completed")
        watch[second] = "after-cancelled"
        h.notify("session/cancel", {"sessionId": sid})
        assert (await h.response(second))["result"] == {"stopReason": "cancelled"}
        third = sent[second]
        await h.wait_for(lambda: agent.prompted[-1:] == [(sid, "after-cancelled")] or h.find_response(third))
        assert [m for m in h.messages if "error" in m] == []
        agent.ev(agent.release, sid).set()
        assert (await h.response(third))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())
