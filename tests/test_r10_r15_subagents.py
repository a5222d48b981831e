"""R10-R15 for subagent child sessions: ``session/cancel`` on a child cancels its work as it cancels a prompt.

The parent's prompt starts work on a child with ``client.start_subagent``
and waits for its outcome. Every race is forced with barriers: the work sets
``started`` and waits on ``release``; a cancel meant to land before the work
starts is sent from inside the write that carries the child's announcement,
which leaves before the work's task runs a step. Every message is checked
against the schema (the SDK's models, and the bundled JSON schema for the
newer kinds).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_fast.agent.base import Agent, current_turn
from acp_fast.agent.cancel import CancelToken
from acp_fast.agent.client_handle import CapabilityNotSupported
from acp_fast.agent.sessions import ChildSession
from acp_fast.agent.subagents import SubagentRun
from acp_fast.wire.errors import ServerBusy
from acp_fast.wire.limits import Limits
from tests.helpers import AgentProcess, Harness, close_and_check, prompt_params
from tests.schema_oracle import assert_messages_valid, record_sent
from tests.test_session_updates import assert_all_valid
from tests.update_schema import check_update

pytestmark = pytest.mark.usefixtures("read_path")

CAPS: dict[str, Any] = {"subagents": {}}


class ParentAgent(Agent):
    """Each prompt runs one piece of work on a child (``child_id``, or a new one) and waits for it.

    The work records its token, sends one update on the child's own session,
    then waits on ``release`` (``block``) or returns ``"end_turn"``; its
    ``finally`` is counted, as usage accounting would be.
    """

    def __init__(self, block: bool = True, fail: bool = False, wait: bool = True) -> None:
        self.block = block
        self.fail = fail
        self.wait = wait
        self.child_id: str | None = None
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.work_calls = 0
        self.work_tokens: list[CancelToken] = []
        self.turn_tokens: list[CancelToken] = []
        self.finally_ran = 0
        self.cancelled_errors = 0
        self.runs: list[SubagentRun] = []
        self.refused: list[BaseException] = []
        self.parent_finally = 0

    async def work(self, run: SubagentRun) -> str:
        self.work_calls += 1
        self.work_tokens.append(run.token)
        self.turn_tokens.append(current_turn().token)
        try:
            await self.client.agent_message_chunk(run.session_id, "child speaking")
            self.started.set()
            if self.fail:
                raise RuntimeError("subagent broke")
            if self.block:
                await self.release.wait()
            return "end_turn"
        except asyncio.CancelledError:
            self.cancelled_errors += 1
            raise
        finally:
            self.finally_ran += 1

    async def close_session(self, session_id: str, **kw: Any) -> None:
        return None

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> str:
        try:
            run = await self.client.start_subagent(session_id, self.work, child_id=self.child_id, title="search")
        except (CapabilityNotSupported, ServerBusy) as exc:
            self.refused.append(exc)
            return "refusal"
        self.runs.append(run)
        self.child_id = run.session_id
        if not self.wait:  # the child outlives this turn
            return "end_turn"
        try:
            await run
        finally:
            self.parent_finally += 1
        return "end_turn"


async def start(agent: Agent, caps: dict[str, Any] | None = None, limits: Limits | None = None) -> tuple[Harness, str]:
    h = record_sent(Harness(agent, limits))
    await h.initialize(CAPS if caps is None else caps)
    return h, await h.new_session()


async def child_working(agent: ParentAgent) -> tuple[Harness, str, Any, str]:
    """A prompt whose child's work has started: (harness, parent id, prompt request id, child id)."""
    h, sid = await start(agent)
    pid = h.request("session/prompt", prompt_params(sid, "go"))
    await agent.started.wait()
    return h, sid, pid, agent.runs[0].session_id


def subagent_updates(h: Harness, parent: str) -> list[dict[str, Any]]:
    return [u["update"] for u in h.updates(parent) if u["update"]["sessionUpdate"] == "subagent_update"]


def cancel_obj(session_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}


def test_r10_session_cancel_on_the_child_cancels_its_running_work_and_not_the_parent(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, sid, pid, child = await child_working(agent)
        announce = subagent_updates(h, sid)[0]
        assert announce == {"sessionUpdate": "subagent_update", "sessionId": child, "title": "search",
                            "capabilities": {"cancel": {}}, "state": {"state": "running"}}
        h.send(cancel_obj(child))
        resp = await h.response(pid)
        assert resp["result"] == {"stopReason": "end_turn"}, resp  # the parent's turn goes on
        # The work saw both kinds of cancellation, and its finally ran.
        assert agent.cancelled_errors == 1 and agent.finally_ran == 1
        assert agent.work_tokens[0].cancelled and agent.turn_tokens[0] is agent.work_tokens[0]
        assert agent.runs[0].outcome == "cancelled"
        # Announced before the child's first update; reported idle/cancelled before the parent's answer (R05).
        chunk = next(i for i, m in enumerate(h.messages) if m.get("params", {}).get("sessionId") == child)
        first, last = (h.messages.index(m) for m in h.messages
                       if m.get("params", {}).get("update", {}).get("sessionUpdate") == "subagent_update")
        assert first < chunk < last < h.messages.index(resp)
        assert subagent_updates(h, sid)[1] == {"sessionUpdate": "subagent_update", "sessionId": child,
                                               "state": {"state": "idle", "stopReason": "cancelled"}}
        session = h.server.sessions.get(sid)
        assert not session.token.cancelled  # the parent's own token was never touched
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r10_a_child_cancel_sent_on_seeing_the_announcement_cancels_the_work_before_it_starts(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, sid = await start(agent)
        deliver = h.on_output

        def cancel_on_announce(data: bytes) -> None:
            deliver(data)
            for update in subagent_updates(h, sid):
                if update.get("state") == {"state": "running"} and h.on_output is cancel_on_announce:
                    h.on_output = deliver
                    h.send(cancel_obj(update["sessionId"]))  # inside the write: before the work's first step

        h.on_output = cancel_on_announce
        resp = await h.call("session/prompt", prompt_params(sid, "go"))
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        assert agent.work_calls == 0  # never entered, as a prompt cancelled that early (R10)
        assert agent.runs[0].outcome == "cancelled" and agent.runs[0].token.cancelled
        child = agent.runs[0].session_id
        assert h.updates(child) == []  # the child sent nothing
        assert [u.get("state") for u in subagent_updates(h, sid)] == [
            {"state": "running"}, {"state": "idle", "stopReason": "cancelled"}]
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r11_a_cancelled_child_keeps_its_token_and_its_next_work_gets_a_fresh_one(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, sid, pid, child = await child_working(agent)
        h.send(cancel_obj(child))
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        h.send(cancel_obj(child))  # nothing runs on the child now: must not poison its next work
        agent.block = False
        again = await h.call("session/prompt", prompt_params(sid, "two"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        first, second = agent.work_tokens
        assert first.cancelled and second is not first and not second.cancelled
        assert [r.outcome for r in agent.runs] == ["end_turn" if r is agent.runs[1] else "cancelled"
                                                   for r in agent.runs]
        assert agent.runs[1].session_id == child  # the same child, reused
        reuse = subagent_updates(h, sid)[2]
        assert reuse == {"sessionUpdate": "subagent_update", "sessionId": child, "title": "search",
                         "state": {"state": "running"}}  # capabilities unchanged, so not re-sent
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r10_cancelling_the_parent_cancels_the_child_and_the_parent_answers_after_its_report(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, sid, pid, _child = await child_working(agent)
        h.send(cancel_obj(sid))
        resp = await h.response(pid)
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.cancelled_errors == 1 and agent.finally_ran == 1 and agent.parent_finally == 1
        assert agent.runs[0].outcome == "cancelled"
        report = h.messages.index(next(m for m in h.messages if m.get("params", {}).get("update", {}).get("state")
                                       == {"state": "idle", "stopReason": "cancelled"}))
        assert report < h.messages.index(resp)  # R05: the child's last update before the parent's answer
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r10_cancelling_an_idle_parent_cancels_the_work_of_children_that_outlived_its_turn(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent(wait=False)
        h, sid = await start(agent)
        resp = await h.call("session/prompt", prompt_params(sid, "go"))
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        await agent.started.wait()
        assert not agent.runs[0].done  # still working after its parent's turn ended
        h.send(cancel_obj(sid))
        assert await agent.runs[0].wait() == "cancelled"
        assert agent.cancelled_errors == 1 and agent.finally_ran == 1
        assert subagent_updates(h, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
        assert not h.server.sessions.get(sid).token.cancelled  # R11: the parent had no turn to cancel
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r13_eof_during_child_work_cancels_it_and_its_completion_path_runs(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, sid, pid, _child = await child_working(agent)
        await close_and_check(h)  # EOF, the whole shutdown, then no slot or task left (R15)
        assert agent.cancelled_errors == 1 and agent.finally_ran == 1
        assert agent.runs[0].outcome == "cancelled" and agent.work_tokens[0].cancelled
        assert subagent_updates(h, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
        assert h.find_response(pid)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
        child = h.server.sessions.get(agent.runs[0].session_id)
        assert not child.busy
        assert_all_valid(h)

    run(body())


def test_r15_work_that_raises_ends_the_child_as_error_and_frees_it(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent(fail=True)
        h, sid = await start(agent)
        resp = await h.call("session/prompt", prompt_params(sid, "go"))
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        run_ = agent.runs[0]
        assert run_.outcome == "error" and isinstance(run_.error, RuntimeError)
        state = subagent_updates(h, sid)[-1]["state"]
        assert state["state"] == "idle" and state["stopReason"] == "error"
        assert state["error"]["code"] == -32603 and "subagent broke" not in str(state)  # no internals leak
        assert not h.server.sessions.get(run_.session_id).busy
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_r07_a_child_session_takes_no_session_prompt_from_the_client(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent()
        h, _sid, pid, child = await child_working(agent)
        refused = await h.call("session/prompt", prompt_params(child, "hijack"))
        assert refused["error"]["code"] == -32600 and child in refused["error"]["message"], refused
        assert agent.work_calls == 1 and not agent.runs[0].done  # the child's own work is untouched
        agent.release.set()
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        assert agent.runs[0].outcome == "end_turn"
        await close_and_check(h)

    run(body())


def test_r15_children_count_against_max_sessions_and_go_with_their_parent(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent(block=False)
        h, sid = await start(agent, limits=Limits(max_sessions=2))
        agent.child_id = "kid"
        done = await h.call("session/prompt", prompt_params(sid, "one"))
        assert done["result"] == {"stopReason": "end_turn"}
        child = agent.runs[0].session_id
        assert child == "kid" and h.server.sessions.get(child).parent is h.server.sessions.get(sid)
        assert isinstance(h.server.sessions.get(child), ChildSession) and len(h.server.sessions) == 2
        agent.child_id = None  # a second child would be a third session
        full = await h.call("session/prompt", prompt_params(sid, "two"))
        assert full["result"] == {"stopReason": "refusal"}
        assert isinstance(agent.refused[0], ServerBusy)
        assert len(subagent_updates(h, sid)) == 2  # nothing was announced for the refused child
        # Closing the parent removes its children: the table is back to empty.
        assert (await h.call("session/close", {"sessionId": sid}))["result"] == {}
        assert len(h.server.sessions) == 0 and child not in h.server.sessions
        await close_and_check(h)

    run(body())


def test_start_subagent_without_the_client_capability_raises_before_anything(run: Any) -> None:
    async def body() -> None:
        agent = ParentAgent(block=False)
        h, sid = await start(agent, caps={})
        resp = await h.call("session/prompt", prompt_params(sid, "go"))
        assert resp["result"] == {"stopReason": "refusal"}
        assert isinstance(agent.refused[0], CapabilityNotSupported)
        assert h.updates(sid) == [] and len(h.server.sessions) == 1 and agent.work_calls == 0
        await close_and_check(h)

    run(body())


# -- over a real pipe --------------------------------------------------------------------------


class PipeAgent(Agent):
    """For the subprocess test: the child's work speaks once, then waits to be cancelled."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> str:
        async def work(run: SubagentRun) -> str:
            await self.client.agent_message_chunk(run.session_id, "working")
            await asyncio.Event().wait()
            return "end_turn"

        run = await self.client.start_subagent(session_id, work, title="pipe", cwd="/tmp/pipe")
        return "end_turn" if await run == "cancelled" else "refusal"


@pytest.mark.slow
@pytest.mark.parametrize("read_path", ["production"], indirect=True)
def test_r10_r13_child_cancel_over_a_real_pipe(read_path: str) -> None:
    with AgentProcess("serve", "tests.test_r10_r15_subagents:PipeAgent") as agent:
        init = agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": CAPS})
        assert "result" in init, init
        sid = agent.new_session()
        pid = agent.request("session/prompt", prompt_params(sid, "go"))
        announce = agent.next()
        assert announce["params"]["update"]["sessionUpdate"] == "subagent_update", announce
        child = announce["params"]["update"]["sessionId"]
        assert announce["params"]["update"]["cwd"] == "/tmp/pipe"
        chunk = agent.next()
        assert chunk["params"]["sessionId"] == child, chunk
        agent.send(cancel_obj(child))
        before, resp = agent.until_response(pid)
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        assert [m["params"]["update"] for m in before] == [
            {"sessionUpdate": "subagent_update", "sessionId": child, "state": {"state": "idle",
                                                                               "stopReason": "cancelled"}}]
        for msg in [announce, *before]:
            check_update(msg["params"])
        assert_messages_valid([chunk, resp], None)
        agent.close_stdin()
        assert agent.wait() == 0
        assert "Traceback" not in agent.stderr
