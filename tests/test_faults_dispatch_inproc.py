"""R04, R10, R20, R24 and the context rule in process: the Harness with both framers, both loop kinds.

The same faults as tests/test_faults_dispatch.py, driven byte-for-byte through
the real framer, decoder and dispatch loop, so both dispatch paths can be
forced (``inline_dispatch``) and the internals checked (pending requests,
the dispatch task's cancel count, the caller's context).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import pytest

from acp_fast.agent.base import Agent
from acp_fast.peer.connection import DispatchState, IncomingRequest
from acp_fast.wire.jsonrpc import Notification
from tests.helpers import ConnectionHarness, Harness, close_and_check, prompt_params

_var: contextvars.ContextVar[str] = contextvars.ContextVar("inproc_var", default="<unset>")

PATHS = pytest.mark.parametrize("inline", [True, False], ids=["inline", "queued"])


class EagerBodyAgent(Agent):
    """A prompt body that emits at once, before any suspension: what R10 must keep from running."""

    def __init__(self) -> None:
        self.called = 0
        self.turn_ends: list[tuple[str, str]] = []

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.called += 1
        await self.client.agent_message_chunk(session_id, "emitted before any await")
        self.client.request("session/request_permission", {"sessionId": session_id, "toolCall": {}, "options": []})
        if prompt[0]["text"] == "unencodable":
            return {"stopReason": "end_turn", "extra": {1, 2}}
        await asyncio.Event().wait()
        return "end_turn"

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> Any:
        return {"modes": {1, 2}} if mode_id == "set" else {}

    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.turn_ends.append((session_id, stop_reason))


def _cancel_of(kind: str, sid: str, rid: Any) -> dict[str, Any]:
    if kind == "session/cancel":
        return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}}


@pytest.mark.parametrize("kind", ["session/cancel", "$/cancel_request"])
def test_r10_turn_cancelled_before_its_first_step_never_calls_the_body(
    run: Any, framer_cls: type, kind: str
) -> None:
    async def body() -> None:
        agent = EagerBodyAgent()
        h = Harness(agent, framer_cls=framer_cls)
        await h.initialize()
        sid = await h.new_session()
        prompt = h.request_obj("session/prompt", prompt_params(sid, "hold"))
        h.send(prompt, _cancel_of(kind, sid, prompt["id"]))
        assert (await h.response(prompt["id"]))["result"] == {"stopReason": "cancelled"}
        assert agent.called == 0
        assert agent.turn_ends == [(sid, "cancelled")]  # the end-of-turn hook still ran
        assert h.updates(sid) == [] and h.outgoing_requests() == []
        await close_and_check(h)

    run(body())


def test_r04_unencodable_result_is_one_32603_on_control_and_prompt_paths(run: Any, framer_cls: type) -> None:
    async def body() -> None:
        agent = EagerBodyAgent()
        h = Harness(agent, framer_cls=framer_cls)
        await h.initialize()
        sid = await h.new_session()
        control = await h.call("session/set_mode", {"sessionId": sid, "modeId": "set"})
        assert control["error"]["code"] == -32603 and "set" in control["error"]["message"], control
        pid = h.request("session/prompt", prompt_params(sid, "unencodable"))
        answer = await h.response(pid)
        assert answer["error"]["code"] == -32603 and "set" in answer["error"]["message"], answer
        for m in h.outgoing_requests("session/request_permission"):
            h.send({"jsonrpc": "2.0", "id": m["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        ok = await h.call("session/set_mode", {"sessionId": sid, "modeId": "plain"})
        assert ok["result"] == {}, ok
        assert len(h.responses(control["id"])) == 1 and len(h.responses(pid)) == 1
        await close_and_check(h)

    run(body())


@PATHS
def test_r04_unencodable_result_on_the_bare_connection_is_answered_once(run: Any, inline: bool) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline

        async def handler(req: IncomingRequest) -> None:
            req.respond({2**64} if req.method == "bad" else "fine")

        h.conn.on_receive_request(handler)
        bad = await h.call("bad")
        assert bad["error"]["code"] == -32603 and "set" in bad["error"]["message"], bad
        assert (await h.call("good"))["result"] == "fine"
        assert len(h.responses(bad["id"])) == 1
        await close_and_check(h)

    run(body())


class Boom(BaseException):
    """Neither an Exception nor a cancellation."""


async def _fault(method: str) -> None:
    if method == "timeout0":
        async with asyncio.timeout(0):
            await asyncio.sleep(3600)
    elif method == "raise-cancelled":
        raise asyncio.CancelledError("nobody asked")
    elif method == "self-cancel":
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(3600)
    elif method == "base":
        raise Boom()


FAULTS = {"timeout0": (-32603, "TimeoutError"), "raise-cancelled": (-32603, "CancelledError"),
          "self-cancel": (-32800, None), "base": (-32603, "Boom")}


@PATHS
@pytest.mark.parametrize("suspend_first", [False, True], ids=["at-once", "after-a-suspension"])
def test_r24_base_exceptions_from_handlers_get_one_answer_and_the_loop_keeps_serving(
    run: Any, inline: bool, suspend_first: bool
) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline
        notes: list[str] = []

        async def handler(req: IncomingRequest) -> None:
            if suspend_first:
                await asyncio.sleep(0)
            await _fault(req.method)
            req.respond("ok")

        async def on_note(note: Notification) -> None:
            notes.append(note.method)
            await _fault(note.method)

        h.conn.on_receive_request(handler)
        h.conn.on_receive_notification(on_note)
        for method, (code, error) in FAULTS.items():
            answer = await h.call(method)
            assert answer["error"]["code"] == code, (method, answer)
            if error is not None:
                assert answer["error"]["data"] == {"error": error}, answer
            h.notify(method)  # never answered, and the loop survives it too
            assert (await h.call("plain"))["result"] == "ok", method
            assert h.conn._loop_task is not None and h.conn._loop_task.cancelling() == 0
        assert notes == list(FAULTS)
        assert all(len(h.responses(m["id"])) == 1 for m in h.messages if "id" in m)
        await close_and_check(h)

    run(body())


def test_r20_awaiters_of_one_request_are_independent_and_the_late_reply_is_quiet(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        pending = h.conn.send_request("client/thing")
        first = asyncio.ensure_future(_await(pending))
        second = asyncio.ensure_future(_await(pending))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert first.cancelled() and not second.done() and not pending.done
        assert h.outgoing_requests() and [m for m in h.messages if m.get("method") == "$/cancel_request"] == []
        [sent] = h.outgoing_requests("client/thing")
        h.send(h.respond_to(sent, {"answer": 42}))
        assert await second == {"answer": 42}

        lone = h.conn.send_request("client/other")
        waiter = asyncio.ensure_future(_await(lone))
        await asyncio.sleep(0)
        waiter.cancel()  # the last awaiter: the peer is asked to stop
        await asyncio.gather(waiter, return_exceptions=True)
        [other] = h.outgoing_requests("client/other")
        cancels = [m for m in h.messages if m.get("method") == "$/cancel_request"]
        assert cancels == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": other["id"]}}]
        h.send(h.respond_to(other, {"late": True}))  # the peer still answers once
        await h.wait_for(lambda: lone.done)
        await close_and_check(h)

    with caplog.at_level(logging.DEBUG, logger="acp_fast"):
        run(body())
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == [], [r.getMessage() for r in noisy]


async def _await(pending: Any) -> Any:
    return await pending


@PATHS
def test_context_is_one_per_handler_across_its_awaits_and_the_reader_context_is_untouched(
    run: Any, inline: bool
) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline

        async def handler(req: IncomingRequest) -> None:
            _var.set(req.params["v"])
            await asyncio.sleep(0)
            req.respond(_var.get())

        h.conn.on_receive_request(handler)
        _var.set("reader")
        assert (await h.call("set", {"v": "warm-up"}))["result"] == "warm-up"
        await h.wait_for(lambda: h.conn.dispatch_state is DispatchState.PARKED)  # the next line goes inline, if on
        rid = h.request("set", {"v": "one"})
        assert h.find_response(rid) is None  # suspended at its await either way
        assert (await h.response(rid))["result"] == "one"
        assert _var.get() == "reader"  # the read side's context (this task's) is untouched
        await close_and_check(h)

    run(body())


def test_inline_dispatch_fed_from_inside_the_dispatch_context_falls_back_to_the_loop(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()

        async def handler(req: IncomingRequest) -> None:
            if req.method == "relay":  # this callback runs in the dispatch context, after the loop parks
                h.loop.call_soon(h.send, h.request_obj("echo", id="relayed"))
            req.respond(req.method)

        h.conn.on_receive_request(handler)
        await h.call("relay")
        assert (await h.response("relayed"))["result"] == "echo"
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize(
    ("busy", "target"),
    [(False, "run"), (True, "run"), (False, "dispatch-task")],
    ids=["parked", "in-a-handler", "dispatch-task-parked"],
)
def test_r24_cancelling_run_itself_stops_the_connection_and_answers_what_is_open(
    run: Any, busy: bool, target: str
) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        entered = asyncio.Event()

        async def handler(req: IncomingRequest) -> None:
            if req.method == "warm-up":
                req.respond("ok")
                return
            entered.set()
            await asyncio.Event().wait()  # only a cancel ends it

        h.conn.on_receive_request(handler)
        await h.call("warm-up")
        await h.wait_for(lambda: h.conn.dispatch_state is DispatchState.PARKED)
        if busy:
            rid = h.request("hangs")
            await entered.wait()
        if target == "run":
            h.task.cancel()  # the host gives up on the connection: not the handler's cancel
        else:
            assert h.conn._loop_task is not None
            h.conn._loop_task.cancel()  # as asyncio.run's clean-up does to every task left
        await asyncio.wait({h.task})  # not ``await h.task``: a hang must fail, not look like the cancel
        assert h.task.cancelled() and h.conn.state.value == "closed"
        if busy:
            [answer] = h.responses(rid)
            assert answer["error"]["code"] == -32603 and "shut down" in answer["error"]["message"], answer
        h.assert_no_leaks()

    run(body())


@PATHS
def test_r24_handler_that_cancels_its_task_and_returns_leaves_the_loop_serving(run: Any, inline: bool) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline

        async def handler(req: IncomingRequest) -> None:
            if req.method == "cancel-and-return":
                task = asyncio.current_task()
                assert task is not None
                task.cancel()  # no await follows: nothing in this handler receives it
            req.respond(req.method)

        h.conn.on_receive_request(handler)
        await h.call("warm-up")
        await h.wait_for(lambda: h.conn.dispatch_state is DispatchState.PARKED)
        assert (await h.call("cancel-and-return"))["result"] == "cancel-and-return"
        assert (await h.call("next"))["result"] == "next"  # still serving, after the cancel landed
        assert h.conn._loop_task is not None and h.conn._loop_task.cancelling() == 0
        await close_and_check(h)

    run(body())


@PATHS
def test_r18_a_line_fed_without_feed_end_is_dispatched_and_answered(run: Any, inline: bool) -> None:
    """The transport contract: feed_end is optional, the Connection ends the batch it was given.

    A WebSocket read whose last frame was a PING the library answered itself
    ends without feed_end; the request before it must still be served.
    """

    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline

        async def handler(req: IncomingRequest) -> None:
            req.respond({"echo": req.params})

        h.conn.on_receive_request(handler)
        assert (await h.call("warm"))["result"] == {"echo": None}  # the loop is parked now
        h.conn.feed_line(b'{"jsonrpc":"2.0","id":"no-end","method":"x","params":[1]}')
        msg = await asyncio.wait_for(h.wait_for(lambda: h.responses("no-end")), 5)
        assert msg == [{"jsonrpc": "2.0", "id": "no-end", "result": {"echo": [1]}}]
        assert h.conn.counts["inbox"] == 0
        await close_and_check(h)

    run(body())
