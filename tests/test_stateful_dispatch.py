"""R04, R05, R07, R08, R10-R15, R20, R24, R30: a hypothesis state machine drives the dispatcher.

Random interleavings of session/new, prompt (held open, released, failing,
waiting on the client: a permission request or an fs read, or ignoring its
first cancel or every cancel, answered for by the watchdog and released later),
session/cancel, $/cancel_request, set_mode (ok and failing), the client's
answers to the agent's requests (in time, late after the turn was cancelled,
or in the same read as a cancel, either order) and EOF run against a real
AgentServer through the in-memory Harness, on one asyncio loop kept on the
machine (the eager variant sets ``asyncio.eager_task_factory`` on it). A
small model says what each step must produce; after every step the
invariants check the whole output so far: one response per request, none for
notifications, at most one running prompt per session, a prompt's updates
before its response, ``$/cancel_request`` exactly for the agent requests a
cancelled turn abandoned unanswered, no noise from late answers, and after
EOF no slot, reservation or task left. For a turn that ignores its cancel
(R30): the watchdog is due ``cancel_grace_s`` after the cancel and answers in
the very callback that fires then, while the body still runs; one answer;
nothing of that turn after it (also once shutdown abandoned the body and it
ends later); its session and slot stay taken until the body exits. Every wait is ``Harness.wait_for``
(event-driven); the outer timeout only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from acp_fast.agent.base import Agent, current_turn
from acp_fast.peer.dispatch_state import (
    DISPATCH_TRANSITIONS,
    INPUT_TRANSITIONS,
    DispatchEvent,
    DispatchState,
    DispatchStateError,
    InputEvent,
    InputState,
    dispatch_next,
    input_next,
)
from acp_fast.wire.limits import Limits
from tests.helpers import Harness, prompt_params

T = TypeVar("T")
POOL = 3  # small, so the R08 refusal is reached often
#: A body that swallows every cancel costs this much at EOF (shutdown's abort join). Far below it, a
#: loaded machine's loop lag cuts the shutdown hook short at its own deadline, before it released the slot.
ABORT_JOIN_S = 0.25
HANG_S = 10.0


#: What the agent asks the client for, by prompt text, and the client's answer to it.
ASKS: dict[str, tuple[str, Any]] = {
    "ask": ("session/request_permission", {"outcome": {"outcome": "selected", "optionId": "allow"}}),
    "read": ("fs/read_text_file", {"content": "hello"}),
}


class ModelAgent(Agent):
    """A prompt says ``start <id>``, then waits for ``release[id]``; ``fail`` raises after the update.

    ``ask`` and ``read`` first wait for the client's answer to a permission
    request or an fs read, and say ``answered <id>`` when it came. ``stubborn``
    swallows its first cancellation and goes on waiting; ``forever`` swallows
    every one until released, shutdown's abort included (R30).
    """

    def __init__(self) -> None:
        self.release: dict[Any, asyncio.Event] = {}
        self.finalized: list[Any] = []

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.opened = getattr(self, "opened", 0) + 1
        return {"sessionId": f"s{self.opened}"}  # deterministic: hypothesis replays must draw alike

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        if mode_id == "boom":
            raise RuntimeError("set_mode handler failure")

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        rid = current_turn().request_id
        try:
            await self.client.agent_message_chunk(session_id, f"start {rid}")
            text = prompt[0]["text"]
            if text == "fail":
                raise RuntimeError("prompt handler failure")
            if text == "ask":
                allow = {"optionId": "allow", "name": "Allow", "kind": "allow_once"}
                await self.client.request_permission(session_id, {"toolCallId": f"t-{rid}"}, [allow])
                await self.client.agent_message_chunk(session_id, f"answered {rid}")
            elif text == "read":
                await self.client.read_text_file(session_id, "/tmp/x")
                await self.client.agent_message_chunk(session_id, f"answered {rid}")
            elif text == "stubborn":
                try:
                    await self.release.setdefault(rid, asyncio.Event()).wait()
                except asyncio.CancelledError:  # swallowed once: the watchdog answers for it (R30)
                    await self.client.agent_message_chunk(session_id, f"swallowed {rid}")
            elif text == "forever":
                release = self.release.setdefault(rid, asyncio.Event())
                while not release.is_set():
                    try:
                        await release.wait()
                    except asyncio.CancelledError:  # every cancel swallowed, the abort's too
                        await self.client.agent_message_chunk(session_id, f"swallowed {rid}")
            await self.release.setdefault(rid, asyncio.Event()).wait()
            await self.client.agent_message_chunk(session_id, f"end {rid}")
            return "end_turn"
        finally:
            self.finalized.append(rid)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class DispatchMachine(RuleBasedStateMachine):
    eager = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        if self.eager:
            self.loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
        self.loop_errors: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _l, ctx: self.loop_errors.append(ctx))
        self.log = _Records()
        logging.getLogger("acp_fast").addHandler(self.log)
        self.agent = ModelAgent()
        self.h: Harness = self._run(self._make())
        self.sessions: list[str] = []
        self.running: dict[str, Any] = {}  # session -> id of its running prompt
        self.finishing: dict[str, Any] = {}  # session -> id of a prompt answered for while its body runs (R30)
        self.requests: set[Any] = set()  # every request id sent
        self.prompts: set[Any] = set()  # ids of prompts that were admitted
        self.asking: dict[Any, Any] = {}  # prompt id -> id of the agent request it awaits
        self.unanswered: dict[Any, tuple[Any, str]] = {}  # agent request id -> (prompt id, method)
        self.abandoned: set[Any] = set()  # agent requests a cancelled turn left unanswered
        self.answered_out: set[Any] = set()  # agent requests the client has answered
        self.closed = False
        self.armed: list[tuple[float, float]] = []  # (loop time after a watchdog was armed, when it is due)
        self.overdue: list[tuple[Any, bool, bool]] = []  # (request id, answered, body done) as the watchdog fired
        self._watch(self.h.server.pool)

    async def _make(self) -> Harness:
        limits = Limits(max_background=POOL, cancel_grace_s=0.001, shutdown_grace_s=0.01, abort_join_s=ABORT_JOIN_S)
        return Harness(self.agent, limits)

    def _watch(self, pool: Any) -> None:
        """Record each watchdog as armed and as it fires (R30), through the pool's own methods."""
        arm, overdue = pool._arm_watchdog, pool._overdue

        def armed(job: Any) -> None:
            arm(job)
            self.armed.append((self.loop.time(), job.timer.when()))

        def fired(job: Any) -> None:
            overdue(job)
            self.overdue.append((job.request.id, job.request.answered, job.task.done()))

        pool._arm_watchdog, pool._overdue = armed, fired

    def _run(self, aw: Awaitable[T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(aw, HANG_S))

    def _request(self, method: str, params: Any) -> Any:
        rid = self.h.request(method, params)
        self.requests.add(rid)
        return rid

    def _response(self, rid: Any) -> dict[str, Any]:
        return self._run(self.h.response(rid))

    def _started(self, rid: Any) -> bool:
        return self._said(f"start {rid}")

    def _said(self, text: str) -> bool:
        return any(u["update"]["content"]["text"] == text for u in self.h.updates())

    def _asked_by(self, sid: str) -> dict[str, Any] | None:
        """The agent request of session ``sid``'s running prompt the model does not know yet."""
        known = set(self.unanswered) | self.answered_out
        return next(
            (m for m in self.h.outgoing_requests() if m["id"] not in known and m["params"]["sessionId"] == sid),
            None,
        )

    def _barrier(self) -> None:
        """Everything sent so far has been dispatched: a control request's answer came."""
        self._response(self._request("session/set_mode", {"sessionId": self.sessions[0], "modeId": "ask"}))

    def _cancelled(self, sid: str, rid: Any) -> None:
        """The model's side of a turn ending as cancelled: what it awaited is now abandoned; a
        stubborn body is answered for but keeps its session and slot until released (R30)."""
        out = self.asking.pop(rid, None)
        if out is not None:
            event("a cancelled turn abandoned its agent request")
            self.abandoned.add(out)
        if self.stubborn(rid):
            event("a cancelled turn ignored its cancel")
            self.finishing[sid] = rid

    def stubborn(self, rid: Any) -> bool:
        job = self.h.server.pool.get(rid)
        return job is not None and job.request.params["prompt"][0]["text"] in ("stubborn", "forever")

    # -- rules ---------------------------------------------------------------------------
    @precondition(lambda self: not self.closed and len(self.sessions) < 5)
    @rule()
    def new_session(self) -> None:
        if not self.sessions:
            caps = {"fs": {"readTextFile": True}}
            init = {"protocolVersion": 1, "clientCapabilities": caps}
            assert "result" in self._response(self._request("initialize", init))
        resp = self._response(self._request("session/new", {"cwd": "/tmp", "mcpServers": []}))
        self.sessions.append(resp["result"]["sessionId"])

    @precondition(lambda self: not self.closed and self.sessions)
    @rule(data=st.data(), kind=st.sampled_from(["hold", "fail", "ask", "read", "stubborn", "forever"]))
    def prompt(self, data: st.DataObject, kind: str) -> None:
        sid = data.draw(st.sampled_from(self.sessions))
        fail = kind == "fail"
        rid = self._request("session/prompt", prompt_params(sid, kind))
        busy = sid in self.running or sid in self.finishing
        if busy or len(self.running) + len(self.finishing) >= POOL:  # R07, R08, R30: refused at once
            resp = self._response(rid)
            assert resp["error"]["code"] == -32000, resp
            if sid in self.finishing:
                assert "still finishing its cancellation" in resp["error"]["message"], resp
            assert not self._started(rid)
            return
        self.prompts.add(rid)
        if fail:  # a handler exception is -32603 and frees the session (R15, R24)
            assert self._response(rid)["error"]["code"] == -32603
            return
        self._run(self.h.wait_for(lambda: self._started(rid) or self.h.find_response(rid)))
        assert self.h.find_response(rid) is None, self.h.find_response(rid)  # admitted, running
        self.running[sid] = rid
        if kind in ASKS:
            asked = self._run(self.h.wait_for(lambda: self._asked_by(sid)))
            assert asked["method"] == ASKS[kind][0], asked
            self.asking[rid] = asked["id"]
            self.unanswered[asked["id"]] = (rid, kind)

    @precondition(lambda self: not self.closed and self.unanswered)
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        """The client answers one agent request: in time, or late after its turn was cancelled."""
        out = data.draw(st.sampled_from(sorted(self.unanswered)))
        rid, kind = self.unanswered.pop(out)
        self.answered_out.add(out)
        self.h.send({"jsonrpc": "2.0", "id": out, "result": ASKS[kind][1]})
        if self.asking.get(rid) == out:
            event("agent request answered in time")
            del self.asking[rid]  # the prompt goes on, then holds until released
            self._run(self.h.wait_for(lambda: self._said(f"answered {rid}")))
        else:
            event("agent request answered late, after its turn was cancelled")
            self._barrier()  # a late answer: dispatched, and nothing follows from it

    @precondition(lambda self: not self.closed and self.asking)
    @rule(data=st.data(), answer_first=st.booleans())
    def answer_races_cancel(self, data: st.DataObject, answer_first: bool) -> None:
        """The client's answer and a session/cancel in one read: the turn ends cancelled either way."""
        rid = data.draw(st.sampled_from(sorted(self.asking, key=repr)))
        out = self.asking.pop(rid)
        _, kind = self.unanswered.pop(out)
        self.answered_out.add(out)
        sid = next(s for s, r in self.running.items() if r == rid)
        reply = {"jsonrpc": "2.0", "id": out, "result": ASKS[kind][1]}
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        event(f"answer and cancel in one read, {'answer' if answer_first else 'cancel'} first")
        self.h.send(*((reply, cancel) if answer_first else (cancel, reply)))
        del self.running[sid]
        assert self._response(rid)["result"] == {"stopReason": "cancelled"}

    @precondition(lambda self: not self.closed and any(r not in self.asking for r in self.running.values()))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from([s for s, r in self.running.items() if r not in self.asking]))
        rid = self.running.pop(sid)
        self.agent.release.setdefault(rid, asyncio.Event()).set()
        assert self._response(rid)["result"] == {"stopReason": "end_turn"}

    @precondition(lambda self: not self.closed and self.sessions)
    @rule(data=st.data())
    def cancel_session(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(self.sessions))
        self.h.notify("session/cancel", {"sessionId": sid})
        if sid in self.running:  # R10-R12: answered as cancelled, not as an error
            rid = self.running.pop(sid)
            self._cancelled(sid, rid)
            assert self._response(rid)["result"] == {"stopReason": "cancelled"}

    @precondition(lambda self: not self.closed and self.requests)
    @rule(data=st.data())
    def cancel_request(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.requests)))
        self.h.notify("$/cancel_request", {"requestId": rid})
        sid = next((s for s, r in self.running.items() if r == rid), None)
        if sid is not None:
            del self.running[sid]
            self._cancelled(sid, rid)
            assert self._response(rid)["result"] == {"stopReason": "cancelled"}

    @precondition(lambda self: not self.closed and any(self.stubborn(r) for r in self.running.values()))
    @rule(data=st.data(), by_request=st.booleans())
    def cancel_stubborn(self, data: st.DataObject, by_request: bool) -> None:
        """A cancel of a prompt that ignores it: answered cancelled all the same (R30)."""
        sid = data.draw(st.sampled_from(sorted(s for s, r in self.running.items() if self.stubborn(r))))
        rid = self.running.pop(sid)
        if by_request:
            self.h.notify("$/cancel_request", {"requestId": rid})
        else:
            self.h.notify("session/cancel", {"sessionId": sid})
        self._cancelled(sid, rid)
        assert self._response(rid)["result"] == {"stopReason": "cancelled"}

    @precondition(lambda self: not self.closed and self.finishing)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        """A body answered for returns at last: only now are its session and slot free (R30, R15)."""
        sid = data.draw(st.sampled_from(sorted(self.finishing)))
        rid = self.finishing.pop(sid)
        job = self.h.server.pool.get(rid)
        assert job is not None and job.orphaned and job.task is not None
        self.agent.release.setdefault(rid, asyncio.Event()).set()
        self._run(job.task)
        assert self.h.server.pool.get(rid) is None and not self.h.server.sessions.get(sid).busy

    @precondition(lambda self: not self.closed and self.sessions)
    @rule(data=st.data(), boom=st.booleans())
    def set_mode(self, data: st.DataObject, boom: bool) -> None:
        sid = data.draw(st.sampled_from(self.sessions))
        params = {"sessionId": sid, "modeId": "boom" if boom else "ask"}
        resp = self._response(self._request("session/set_mode", params))
        assert (resp["error"]["code"] == -32603) if boom else (resp["result"] == {}), resp

    @precondition(lambda self: not self.closed)
    @rule()
    def eof(self) -> None:
        forever = {j.request.id: j.task for j in self.h.server.pool.jobs() if self._text(j) == "forever"}
        self._run(self.h.close())  # R13: every running prompt is cancelled, then answered
        for rid in self.running.values():
            assert self.h.find_response(rid)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
        if forever:  # R14: shutdown abandoned them; they end later, and nothing of theirs is sent
            event("shutdown abandoned a body that swallows every cancel")
            for rid, task in forever.items():
                assert task is not None and not task.done()
                self.agent.release.setdefault(rid, asyncio.Event()).set()
            self._run(asyncio.wait([t for t in forever.values() if t is not None]))
        self.running.clear()
        self.finishing.clear()
        self.asking.clear()  # nothing is read after EOF: no $/cancel_request is owed
        self.closed = True

    @precondition(lambda self: self.closed)
    @rule()
    def after_eof(self) -> None:
        """Nothing is left to drive; the invariants re-check the final state."""
        assert self.h.task.done()

    # -- invariants, checked after every step ------------------------------------------------
    @invariant()
    def one_response_per_request_and_none_for_notifications(self) -> None:
        answered = [m["id"] for m in self.h.messages if "method" not in m]
        assert len(answered) == len(set(answered)), answered  # R04
        assert set(answered) <= self.requests, set(answered) - self.requests  # R06
        unanswered = self.requests - set(answered)
        assert unanswered == set(self.running.values()), (unanswered, self.running)

    @invariant()
    def at_most_one_prompt_running_per_session(self) -> None:
        if not self.closed:
            per_session = [j.session.id for j in self.h.server.pool.jobs() if j.session is not None]
            assert len(per_session) == len(set(per_session)), per_session  # R07
            # R15, R30: no slot held by a finished job; a body answered for keeps its own
            assert self.h.server.pool.in_flight == len(self.running) + len(self.finishing)

    @invariant()
    def updates_of_a_prompt_come_before_its_response(self) -> None:
        last_update: dict[Any, int] = {}
        answered_at: dict[Any, int] = {}
        for i, m in enumerate(self.h.messages):
            if m.get("method") == "session/update":
                last_update[m["params"]["update"]["content"]["text"].split()[1]] = i
            elif "method" not in m:
                answered_at[str(m["id"])] = i
        for rid, i in last_update.items():
            assert rid not in answered_at or answered_at[rid] > i, rid  # R05

    @invariant()
    def cancel_requests_exactly_for_abandoned_agent_requests(self) -> None:
        sent = [m["params"]["requestId"] for m in self.h.messages if m.get("method") == "$/cancel_request"]
        assert len(sent) == len(set(sent)), sent
        assert set(sent) == self.abandoned, (sent, self.abandoned)
        asked = [m["id"] for m in self.h.outgoing_requests()]
        assert len(asked) == len(set(asked)), asked

    @invariant()
    def late_answers_make_no_noise(self) -> None:
        for record in self.log.records:
            text = record.getMessage() + repr(record.exc_info)
            for noise in ("InvalidStateError", "unknown request id", "second answer", "never retrieved"):
                assert noise not in text, text

    @invariant()
    def nothing_leaked_after_eof(self) -> None:
        if self.closed:
            self.h.assert_no_leaks()  # R15
            assert sorted(self.agent.finalized, key=repr) == sorted(self.prompts, key=repr)  # R13

    @invariant()
    def a_turn_ignoring_its_cancel_is_answered_by_the_watchdog_and_holds_its_slot(self) -> None:
        grace = self.h.conn.limits.cancel_grace_s
        for armed_at, due in self.armed:
            assert due <= armed_at + grace, (armed_at, due)  # R30: due cancel_grace_s after the cancel
        for rid, answered, done in self.overdue:
            if not done:  # it fired on a running body: answered in that very callback
                assert answered, rid
        if not self.closed:
            for sid, rid in self.finishing.items():  # R30, R07, R08: answered, yet still holding both
                job = self.h.server.pool.get(rid)
                assert job is not None and job.orphaned and job.task is not None and not job.task.done()
                assert self.h.server.sessions.get(sid).busy and self.h.responses(rid)

    @invariant()
    def the_dispatch_state_is_one_the_loop_can_rest_in(self) -> None:
        """Between steps no read callback runs: never INLINE; DONE exactly once the connection ended."""
        state = self.h.conn.dispatch_state
        assert state is not DispatchState.INLINE, state
        assert (state is DispatchState.DONE) == self.h.task.done(), (state, self.h.task)
        if self.closed:
            assert self.h.conn.input_state is InputState.ENDED

    @staticmethod
    def _text(job: Any) -> str:
        return str(job.request.params["prompt"][0]["text"]) if job.request.method == "session/prompt" else ""

    def teardown(self) -> None:
        try:
            if not self.closed:
                self.eof()
                self.nothing_leaked_after_eof()
            assert not self.loop_errors, self.loop_errors
        finally:
            logging.getLogger("acp_fast").removeHandler(self.log)
            self.loop.close()


class EagerDispatchMachine(DispatchMachine):
    """The same machine with ``asyncio.eager_task_factory`` (3.12+)."""

    eager = True


SETTINGS = settings(
    max_examples=400,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.usefixtures("read_path")
def test_dispatch_state_machine() -> None:
    run_state_machine_as_test(DispatchMachine, settings=SETTINGS)


@pytest.mark.skipif(
    not hasattr(asyncio, "eager_task_factory"), reason="asyncio.eager_task_factory is new in Python 3.12"
)
@pytest.mark.usefixtures("read_path")
def test_dispatch_state_machine_eager() -> None:
    run_state_machine_as_test(EagerDispatchMachine, settings=SETTINGS)


def test_every_dispatch_state_has_a_row_and_an_illegal_change_raises() -> None:
    assert set(DISPATCH_TRANSITIONS) == set(DispatchState) and set(INPUT_TRANSITIONS) == set(InputState)
    for state, events in DISPATCH_TRANSITIONS.items():
        assert (DispatchEvent.END in events) == (state is not DispatchState.DONE), state
    assert dispatch_next(DispatchState.PARKED, DispatchEvent.INLINE) is DispatchState.INLINE
    with pytest.raises(DispatchStateError, match="WAKE in INLINE"):
        dispatch_next(DispatchState.INLINE, DispatchEvent.WAKE)  # the task cannot run inside a read callback
    with pytest.raises(DispatchStateError, match="QUEUE in RUNNING"):
        dispatch_next(DispatchState.RUNNING, DispatchEvent.QUEUE)
    with pytest.raises(DispatchStateError):
        dispatch_next(DispatchState.DONE, DispatchEvent.END)
    with pytest.raises(DispatchStateError, match="RESUME in ENDED"):
        input_next(InputState.ENDED, InputEvent.RESUME)
    reachable = {DispatchState.RUNNING}
    for _ in DispatchState:  # every state is reachable from the initial one
        reachable |= {new for state in reachable for new in DISPATCH_TRANSITIONS[state].values()}
    assert reachable == set(DispatchState)
