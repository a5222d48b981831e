"""R30: a cancelled turn is answered within ``cancel_grace_s`` even when its body ignores the cancel.

Every shape of tests/watchdog_agents.py, in memory and over a real pipe: the
answer arrives once, after the updates sent before it (R05); nothing of that
turn reaches the client after it (dropped and counted); the session and the
pool slot stay taken until the body exits (R07, R08); shutdown stays bounded
(R14). The grace is tiny, and the tests order on events, never on durations.
Also: the opt-in turn timeout, a shutdown whose steps raise (R14), and the
abort path's answer as the last message of its turn (R05).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_fast.peer.connection import State
from acp_fast.wire.limits import Limits
from tests.helpers import AgentProcess, Harness, close_and_check, prompt_params
from tests.watchdog_agents import IgnoresCancel

SHAPES = ["once", "forever", "thread", "permission"]
TARGET = "tests.watchdog_agents:IgnoresCancel"


def _texts(messages: list[Any], session_id: str) -> list[str]:
    return [
        m["params"]["update"]["content"]["text"]
        for m in messages
        if isinstance(m, dict) and m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


def _requests(messages: list[Any]) -> list[Any]:
    return [m for m in messages if isinstance(m, dict) and "method" in m and "id" in m]


def _dropped(shape: str) -> int:
    """What the body sends once answered for: "late" and "finally", and for one shape a permission request."""
    return 3 if shape == "permission" else 2


@pytest.mark.parametrize("shape", SHAPES)
def test_r30_r10_ignored_cancel_is_answered_and_the_rest_of_the_turn_dropped(
    run: Any, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        agent = IgnoresCancel()
        h = Harness(agent, limits=Limits(cancel_grace_s=0.01, max_background=1))
        try:
            await h.initialize()
            sid = await h.new_session()
            other = await h.new_session()
            pid = h.request("session/prompt", prompt_params(sid, shape))
            await agent.started.wait()
            h.notify("session/cancel", {"sessionId": sid})
            answer = await h.response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            at = h.messages.index(answer)
            assert _texts(h.messages[:at], sid) == ["started", "after cancel"]  # R05: sent before, written before
            [job] = h.server.pool.jobs()
            assert job.orphaned and job.task is not None and not job.task.done()
            busy = await h.call("session/prompt", prompt_params(sid, "quick"))
            assert busy["error"]["code"] == -32000, busy
            assert "still finishing its cancellation" in busy["error"]["message"], busy
            full = await h.call("session/prompt", prompt_params(other, "quick"))  # R08: the slot is still taken
            assert full["error"]["code"] == -32000 and "background" in full["error"]["message"], full
            released = (await h.call("_release", {}))["result"]
            assert released["dropped"] == _dropped(shape) == h.conn.dropped_late
            assert released["permissionError"] == (-32800 if shape == "permission" else None)
            assert job.released and h.server.pool.in_flight == 0 and not h.server.sessions.get(sid).busy
            assert h.conn.drop_if is None
            after = h.messages[at + 1 :]
            assert _texts(after, sid) == [] and _requests(after) == [] and h.responses(pid) == [answer]
            again = await h.call("session/prompt", prompt_params(sid, "quick"))
            assert again["result"] == {"stopReason": "end_turn"}, again
            await close_and_check(h)
        finally:
            agent.unblock()

    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        run(body())
    [warning] = [r.getMessage() for r in caplog.records if "ignored its cancellation" in r.getMessage()]
    assert "IgnoresCancel.prompt" in warning and "session/cancel" in warning, warning
    assert "_ignore" in warning, warning  # the stack names where the body is stuck


def test_r30_cooperative_cancel_arms_and_disarms_the_watchdog_and_answers_as_before(run: Any) -> None:
    async def body() -> None:
        agent = IgnoresCancel()
        h = Harness(agent, limits=Limits(cancel_grace_s=3600.0))
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "once"))
        await agent.started.wait()
        h.notify("$/cancel_request", {"requestId": pid})
        await agent.cancelled.wait()
        [job] = h.server.pool.jobs()
        assert job.timer is not None  # armed by the cancel
        agent.unblock()  # the body ends on its own, well within the grace
        answer = await h.response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}
        assert job.timer is None and not job.orphaned and h.conn.dropped_late == 0
        at = h.messages.index(answer)
        assert _texts(h.messages[:at], sid) == ["started", "after cancel", "late", "finally"]
        await close_and_check(h)

    run(body())


def test_r30_max_turn_s_cancels_a_long_turn_as_a_timeout(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        agent = IgnoresCancel()
        h = Harness(agent, limits=Limits(max_turn_s=0.01, cancel_grace_s=0.01))
        try:
            await h.initialize()
            sid = await h.new_session()
            pid = h.request("session/prompt", prompt_params(sid, "forever"))
            answer = await h.response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            assert agent.cancelled.is_set()
            await h.call("_release", {})
            await close_and_check(h)
        finally:
            agent.unblock()

    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        run(body())
    messages = [r.getMessage() for r in caplog.records]
    assert any("max_turn_s" in m and "timeout" in m for m in messages), messages
    assert any("ignored its cancellation (max_turn_s (timeout))" in m for m in messages), messages


def test_r30_max_turn_s_is_off_by_default_and_costs_no_timer(run: Any) -> None:
    async def body() -> None:
        agent = IgnoresCancel()
        h = Harness(agent)
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "once"))
        await agent.started.wait()
        [job] = h.server.pool.jobs()
        assert job.timer is None
        h.notify("session/cancel", {"sessionId": sid})
        await agent.cancelled.wait()
        agent.unblock()
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize("grace", [0.01, 3600.0], ids=["watchdog-first", "abort-first"])
def test_r13_r14_r05_eof_with_a_stuck_turn_answers_it_last_and_shuts_down(run: Any, grace: float) -> None:
    """At EOF the turn is answered by the watchdog or, with a long grace, by shutdown's abort: either
    way the answer is the turn's last message, its ``finally`` update dropped, and shutdown ends."""

    async def body() -> None:
        agent = IgnoresCancel()
        h = Harness(agent, limits=Limits(cancel_grace_s=grace, shutdown_grace_s=0.02, abort_join_s=5.0))
        try:
            await h.initialize()
            sid = await h.new_session()
            pid = h.request("session/prompt", prompt_params(sid, "once"))
            await agent.started.wait()
            [job] = h.server.pool.jobs()
            await h.close()  # the abort's cancel ends the "once" body, in its finally
            h.assert_no_leaks()
            answer = h.find_response(pid)
            assert answer is not None and answer["result"] == {"stopReason": "cancelled"}
            assert h.responses(pid) == [answer]
            at = h.messages.index(answer)
            assert _texts(h.messages[:at], sid) == ["started", "after cancel"]
            assert _texts(h.messages[at + 1 :], sid) == []
            assert h.conn.dropped_late == 1 and job.orphaned  # the finally's update
            assert h.conn.state is State.CLOSED
        finally:
            agent.unblock()

    run(body())


def _serve(*flags: str) -> AgentProcess:
    return AgentProcess("serve", TARGET, "--cancel-grace-s", "0.01", "--max-background", "1", *flags)


def _until_started(agent: AgentProcess, session_id: str) -> list[Any]:
    """Messages up to the turn's "started" update: its body runs, so a cancel now reaches it there."""
    seen = []
    while _texts(seen, session_id) != ["started"]:
        seen.append(agent.next())
    return seen


@pytest.mark.parametrize("shape", SHAPES)
def test_r30_r14_over_a_pipe_ignored_cancel_is_answered_and_shutdown_is_bounded(shape: str) -> None:
    with _serve() as agent:
        agent.initialize()
        sid = agent.new_session()
        other = agent.new_session()
        pid = agent.request("session/prompt", prompt_params(sid, shape))
        before = _until_started(agent, sid)
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        seen, answer = agent.until_response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}, answer
        assert _texts(before + seen, sid) == ["started", "after cancel"]
        busy = agent.call("session/prompt", prompt_params(sid, "quick"))
        assert "still finishing its cancellation" in busy["error"]["message"], busy
        full = agent.call("session/prompt", prompt_params(other, "quick"))
        assert full["error"]["code"] == -32000 and "background" in full["error"]["message"], full
        released = agent.call("_release", {})["result"]
        assert released["dropped"] == _dropped(shape), released
        again = agent.call("session/prompt", prompt_params(sid, "quick"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        agent.close_stdin()
        assert agent.wait() == 0
        assert agent.no_more_output() == []
        assert "ignored its cancellation" in agent.stderr


def test_r30_r14_over_a_pipe_eof_while_a_turn_swallows_every_cancel_still_exits() -> None:
    with _serve("--shutdown-grace-s", "0.05", "--abort-join-s", "0.05") as agent:
        agent.initialize()
        sid = agent.new_session()
        pid = agent.request("session/prompt", prompt_params(sid, "forever"))
        before = _until_started(agent, sid)
        agent.close_stdin()
        seen, answer = agent.until_response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}, answer
        assert _texts(before + seen, sid) == ["started", "after cancel"]
        assert agent.wait() == 1  # R14: it exits, and says a task was abandoned
        assert _texts(agent.no_more_output(), sid) == []
        assert "abandoning it" in agent.stderr


def test_r14_over_a_pipe_shutdown_runs_every_step_when_a_result_callback_cannot_be_spawned() -> None:
    flags = ("--max-spawned", "1", "--shutdown-grace-s", "0.05", "--abort-join-s", "0.05")
    with AgentProcess("serve", TARGET, *flags) as agent:
        agent.initialize()
        sid = agent.new_session()
        pid = agent.request("session/prompt", prompt_params(sid, "hold"))
        before = _until_started(agent, sid)
        assert [m["method"] for m in _requests(before)] == ["session/request_permission"]
        agent.close_stdin()
        seen, answer = agent.until_response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}, answer
        assert agent.wait() == 0  # the spawned task was cancelled and joined: nothing abandoned
        assert _texts(seen + agent.no_more_output(), sid) == []
        assert "not run at shutdown" in agent.stderr
        assert "Traceback" not in agent.stderr


def test_r30_compat_sdk_agent_ignoring_its_cancel_is_answered_and_muted(run: Any) -> None:
    """The same watchdog serves an agent written on the official SDK (one mechanism). Its turn is
    stopped by its own ``cancel`` alone, as under the SDK; this one's does not stop it, so the
    watchdog answers and only then cancels the task, once: what its cleanup sends comes too late."""
    from acp import PromptResponse, text_block, update_agent_message

    from acp_fast.compat import wrap_sdk_agent
    from tests.interop.sdk_sample_agent import SampleAgent

    class Stubborn(SampleAgent):
        async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
            conn = self._client()
            await conn.session_update(session_id, update_agent_message(text_block("started")))
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await conn.session_update(session_id, update_agent_message(text_block("after cancel")))
            await self.release.wait()
            await conn.session_update(session_id, update_agent_message(text_block("late")))
            return PromptResponse(stop_reason="end_turn")

    async def body() -> None:
        sample = Stubborn()
        h = Harness(wrap_sdk_agent(sample), limits=Limits(cancel_grace_s=0.01))
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await h.wait_for(lambda: _texts(h.messages, sid))
        h.notify("session/cancel", {"sessionId": sid})
        answer = await h.response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}, answer
        [job] = h.server.pool.jobs()
        assert job.orphaned and not job.task.done()
        sample.release.set()
        await job.task
        at = h.messages.index(answer)
        assert _texts(h.messages[:at], sid) == ["started"]
        assert _texts(h.messages[at + 1 :], sid) == [] and h.conn.dropped_late == 2
        await close_and_check(h)

    run(body())


class _StubbornChildParent:
    """A parent prompt that waits on a subagent child whose work swallows every cancel until ``release``."""

    @staticmethod
    def make() -> Any:
        from acp_fast.agent.base import Agent

        class Parent(Agent):
            def __init__(self) -> None:
                self.started = asyncio.Event()
                self.release = asyncio.Event()
                self.child_cancels = 0
                self.child_exited = asyncio.Event()
                self.runs: list[Any] = []

            async def work(self, run: Any) -> str:
                try:
                    await self.client.agent_message_chunk(run.session_id, "child started")
                    self.started.set()
                    while not self.release.is_set():
                        try:
                            await self.release.wait()
                        except asyncio.CancelledError:  # ignored, every time (R30)
                            self.child_cancels += 1
                            if self.child_cancels == 1:
                                await self.client.agent_message_chunk(run.session_id, "child after cancel")
                    await self.client.agent_message_chunk(run.session_id, "child late")
                    return "end_turn"
                finally:
                    self.child_exited.set()

            async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
                run = await self.client.start_subagent(session_id, self.work, title="search")
                self.runs.append(run)
                await run
                await self.client.agent_message_chunk(session_id, "parent late")
                return "end_turn"

        return Parent()


def _of_turn(messages: list[Any], sessions: set[str]) -> list[Any]:
    return [m for m in messages if isinstance(m, dict) and m.get("params", {}).get("sessionId") in sessions]


def test_r30_r05_parent_waiting_on_a_child_that_ignores_cancel_is_answered_and_the_child_muted(run: Any) -> None:
    """session/cancel of the parent: the parent is answered by the watchdog (its wait on the child is
    what ignores the cancel); nothing of the child's turn reaches the client after that answer, the
    child's report included; the slot is freed when the bodies exit, and shutdown stays bounded."""

    async def body() -> None:
        agent = _StubbornChildParent.make()
        h = Harness(agent, limits=Limits(cancel_grace_s=0.01, shutdown_grace_s=0.02, abort_join_s=0.02))
        try:
            await h.initialize({"subagents": {}})
            sid = await h.new_session()
            pid = h.request("session/prompt", prompt_params(sid, "go"))
            await agent.started.wait()
            child = agent.runs[0].session_id
            h.notify("session/cancel", {"sessionId": sid})
            answer = await h.response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            at = h.messages.index(answer)
            [job] = h.server.pool.jobs()
            assert job.orphaned and not job.task.done() and agent.child_cancels >= 1
            assert h.server.sessions.get(sid).busy  # R07, R30: taken until the bodies exit
            agent.release.set()
            await agent.child_exited.wait()
            await job.task
            assert h.server.pool.in_flight == 0 and not h.server.sessions.get(sid).busy
            after = _of_turn(h.messages[at + 1 :], {sid, child})
            assert after == [], after  # R05, R30: the child's late update and its idle report dropped
            assert h.responses(pid) == [answer]
            await close_and_check(h)
        finally:
            agent.release.set()

    run(body())


def test_r14_eof_while_a_child_ignores_every_cancel_shuts_down_bounded_and_answers_the_parent(run: Any) -> None:
    async def body() -> None:
        agent = _StubbornChildParent.make()
        h = Harness(agent, limits=Limits(cancel_grace_s=3600.0, shutdown_grace_s=0.02, abort_join_s=0.02))
        try:
            await h.initialize({"subagents": {}})
            sid = await h.new_session()
            pid = h.request("session/prompt", prompt_params(sid, "go"))
            await agent.started.wait()
            child = agent.runs[0].session_id
            await h.close()  # bounded: the abort ends the parent's wait; the child is abandoned
            answer = h.find_response(pid)
            assert answer is not None and answer["result"] == {"stopReason": "cancelled"}, answer
            assert h.responses(pid) == [answer]
            at = h.messages.index(answer)
            agent.release.set()
            await agent.child_exited.wait()
            assert _of_turn(h.messages[at + 1 :], {sid, child}) == []
        finally:
            agent.release.set()

    run(body())
