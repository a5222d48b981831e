"""R10-R12: cancellation tokens reserved at admission, rotated on cancel, $/cancel_request.

Every race is forced with asyncio.Event barriers: a prompt sets ``started``
and then waits on ``release``; a cancel sent in the same read chunk as its
prompt is handled by the dispatch loop before the prompt's task runs a step.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, ClassVar

import pytest

from acp_fast.agent.base import Agent, current_turn
from acp_fast.agent.cancel import CancelToken
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class GateAgent(Agent):
    """Prompts set ``started[sid]`` and wait on ``release[sid]`` unless ``block`` is off."""

    background_extensions: ClassVar[frozenset[str]] = frozenset({"_slow"})

    def __init__(self, block: bool = True) -> None:
        self.block = block
        self.started: dict[str, asyncio.Event] = {}
        self.release: dict[str, asyncio.Event] = {}
        self.tokens: list[CancelToken] = []
        self.cancelled_at_start: list[bool] = []
        self.cancel_calls: list[tuple[str, bool]] = []
        self.turn_ends: list[tuple[str, str]] = []
        self.ran_past_first_await = 0
        self.ext_started = asyncio.Event()
        self.ext_release = asyncio.Event()

    def ev(self, table: dict[str, asyncio.Event], session_id: str) -> asyncio.Event:
        return table.setdefault(session_id, asyncio.Event())

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        turn = current_turn()
        self.tokens.append(turn.token)
        self.cancelled_at_start.append(turn.cancelled)
        self.ev(self.started, session_id).set()
        if self.block:
            await self.ev(self.release, session_id).wait()
        else:
            await asyncio.sleep(0)  # one ordinary await: where task cancellation lands
        self.ran_past_first_await += 1
        return "end_turn"

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancel_calls.append((session_id, self.ev(self.started, session_id).is_set()))

    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.turn_ends.append((session_id, stop_reason))

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        self.ext_started.set()
        await self.ext_release.wait()
        return {"done": True}


def cancel_obj(session_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}


async def open_harness(agent: Agent, framer_cls: type | None = None) -> tuple[Harness, str]:
    h = Harness(agent, framer_cls=framer_cls)
    await h.initialize()
    return h, await h.new_session()


def test_r10_cancel_in_same_chunk_as_prompt_cancels_it(run: Any, framer_cls: type) -> None:
    async def body() -> None:
        agent = GateAgent(block=False)
        h, sid = await open_harness(agent, framer_cls)
        prompt = h.request_obj("session/prompt", prompt_params(sid, "hi"))
        h.send(prompt, cancel_obj(sid))
        resp = await h.response(prompt["id"])
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        # The agent's cancel hook ran (spawned beside the loop) ...
        assert [call[0] for call in agent.cancel_calls] == [sid]
        # ... and the cancel reached the prompt's token before its task ran a
        # step, so the prompt body was never called; its end-of-turn hook was.
        assert agent.cancelled_at_start == []
        assert agent.ran_past_first_await == 0
        assert agent.turn_ends == [(sid, "cancelled")]
        assert h.updates(sid) == [] and h.outgoing_requests() == []
        await close_and_check(h)

    run(body())


def test_r10_cancel_of_a_running_prompt_cancels_it(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, sid = await open_harness(agent)
        pid = h.request("session/prompt", prompt_params(sid, "hi"))
        await agent.ev(agent.started, sid).wait()
        h.send(cancel_obj(sid))
        resp = await h.response(pid)
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.cancel_calls == [(sid, True)]
        assert agent.ran_past_first_await == 0
        await close_and_check(h)

    run(body())


def test_r11_cancel_after_prompt_finished_changes_nothing_and_next_prompt_runs(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent(block=False)
        h, sid = await open_harness(agent)
        first = await h.call("session/prompt", prompt_params(sid, "one"))
        assert first["result"] == {"stopReason": "end_turn"}, first
        h.send(cancel_obj(sid))  # nothing is running: must not poison the next turn
        second = await h.call("session/prompt", prompt_params(sid, "two"))
        assert second["result"] == {"stopReason": "end_turn"}, second
        assert agent.ran_past_first_await == 2
        assert [t.cancelled for t in agent.tokens] == [False, False]
        # A cancel for a session nobody prompted is no response and no error either.
        assert [m.get("id") for m in h.messages] == [1, 2, 3, 4]
        await close_and_check(h)

    run(body())


def test_r11_cancelled_prompt_keeps_its_token_and_next_turn_gets_a_fresh_one(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, sid = await open_harness(agent)
        session = h.server.sessions.get(sid)
        pid = h.request("session/prompt", prompt_params(sid, "one"))
        await agent.ev(agent.started, sid).wait()
        running_token = agent.tokens[0]
        h.send(cancel_obj(sid))
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        assert running_token.cancelled
        assert session.token is not running_token and not session.token.cancelled
        # The next turn runs normally on the fresh token.
        agent.block = False
        again = await h.call("session/prompt", prompt_params(sid, "two"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        assert agent.tokens[1] is not running_token and not agent.tokens[1].cancelled
        assert running_token.cancelled  # still: the old turn's token is never reset
        await close_and_check(h)

    run(body())


def test_r12_cancel_request_cancels_a_running_prompt_with_stop_reason_cancelled(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, sid = await open_harness(agent)
        pid = h.request("session/prompt", prompt_params(sid, "hi"))
        await agent.ev(agent.started, sid).wait()
        h.notify("$/cancel_request", {"requestId": pid})
        resp = await h.response(pid)
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.ran_past_first_await == 0
        assert agent.turn_ends == [(sid, "cancelled")]
        await close_and_check(h)

    run(body())


def test_r12_cancel_request_cancels_a_background_extension_with_32800(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, _sid = await open_harness(agent)
        rid = h.request("_slow", {})
        await agent.ext_started.wait()
        assert h.server.pool.in_flight == 1  # it really runs in the background lane
        h.notify("$/cancel_request", {"requestId": rid})
        resp = await h.response(rid)
        assert resp["error"]["code"] == -32800, resp
        assert not agent.ext_release.is_set()
        await close_and_check(h)

    run(body())


def test_r12_cancel_request_in_same_chunk_as_background_request_cancels_it(
    run: Any, framer_cls: type
) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, _sid = await open_harness(agent, framer_cls)
        req = h.request_obj("_slow", {}, id="ext-1")
        h.send(req, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "ext-1"}})
        resp = await h.response("ext-1")
        assert resp["error"]["code"] == -32800, resp
        assert not agent.ext_started.is_set()  # cancelled before its task ran a step: never called (R10)
        await close_and_check(h)

    run(body())


def test_r12_cancel_request_for_unknown_or_finished_id_is_ignored(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent(block=False)
        h, sid = await open_harness(agent)
        done = await h.call("session/prompt", prompt_params(sid, "hi"))
        assert done["result"] == {"stopReason": "end_turn"}
        h.notify("$/cancel_request", {"requestId": done["id"]})
        h.notify("$/cancel_request", {"requestId": "never-sent"})
        again = await h.call("session/prompt", prompt_params(sid, "again"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        assert len(h.responses(done["id"])) == 1  # the finished prompt's answer stands alone
        await close_and_check(h)

    run(body())


class OwnCancelAnswer(Agent):
    """Catches its cancellation, sends one more update and returns its own answer, with usage."""

    def __init__(self, returns: str, hook: bool) -> None:
        self.returns = returns
        self.hook = hook
        self.turn_ends: list[str] = []

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> Any:
        await self.client.agent_message_chunk(session_id, "before")
        with contextlib.suppress(asyncio.CancelledError):  # the agent catches its cancel
            await asyncio.Event().wait()
        await self.client.agent_message_chunk(session_id, "after cancel")
        return {"stopReason": self.returns, "usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7}}


class OwnCancelAnswerWithHook(OwnCancelAnswer):
    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.turn_ends.append(stop_reason)


@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
@pytest.mark.parametrize("returns", ["cancelled", "end_turn"])
@pytest.mark.parametrize("hook", [False, True])
def test_r10_r12_a_prompt_that_returns_after_its_cancel_is_answered_with_its_own_result(
    run: Any, how: str, returns: str, hook: bool
) -> None:
    """Its usage and the rest are kept; the stop reason is ``cancelled`` whatever it returned."""

    async def body() -> None:
        agent = (OwnCancelAnswerWithHook if hook else OwnCancelAnswer)(returns, hook)
        h, sid = await open_harness(agent)
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await h.wait_for(lambda: h.updates(sid))
        h.notify(how, {"sessionId": sid} if how == "session/cancel" else {"requestId": pid})
        answer = await h.response(pid)
        assert answer["result"] == {
            "stopReason": "cancelled",
            "usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7},
        }
        at = h.messages.index(answer)
        texts = [m["params"]["update"]["content"]["text"] for m in h.messages[:at] if m.get("method")]
        assert texts == ["before", "after cancel"] and h.messages[at + 1 :] == []
        assert agent.turn_ends == (["cancelled"] if hook else [])
        await close_and_check(h)

    run(body())


def test_r10_a_prompt_that_lets_its_cancel_raise_answers_cancelled_alone(run: Any) -> None:
    async def body() -> None:
        agent = GateAgent()
        h, sid = await open_harness(agent)
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await agent.ev(agent.started, sid).wait()
        h.notify("session/cancel", {"sessionId": sid})
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        await close_and_check(h)

    run(body())
