"""R18-R21: the generic dispatch API on a bare Connection (no ACP layer).

The loop being held is observed directly: while a handler or result callback
parks on an event, the next message is still in the connection's inbox.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_fast.agent.base import Agent
from acp_fast.peer.connection import IncomingRequest
from acp_fast.peer.pending import PendingRequest
from acp_fast.wire.errors import AcpError, ConnectionClosed, DeadlockError
from acp_fast.wire.jsonrpc import Notification
from acp_fast.wire.limits import Limits
from tests.helpers import ConnectionHarness, Harness, close_and_check

pytestmark = pytest.mark.usefixtures("read_path")


def note(method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params or {}}


def test_r18_handlers_are_offered_each_message_in_registration_order(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        offered: list[tuple[str, str]] = []

        def handler(name: str, claims: str) -> Any:
            async def handle(req: IncomingRequest) -> bool:
                offered.append((name, req.method))
                if not req.method.startswith(claims):
                    return False
                req.respond({"by": name})
                return True

            return handle

        def note_handler(name: str, claims: str) -> Any:
            async def handle(n: Notification) -> bool:
                offered.append((name, n.method))
                return n.method.startswith(claims)

            return handle

        h.conn.on_receive_request(handler("first", "a/"))
        h.conn.on_receive_request(handler("second", "b/"))
        h.conn.on_receive_notification(note_handler("n1", "x/"))
        h.conn.on_receive_notification(note_handler("n2", "y/"))
        reqs = [h.request_obj(m) for m in ("b/one", "a/two", "c/none")]
        h.send(reqs[0], note("y/n"), reqs[1], note("z/unclaimed"), reqs[2])
        answers = [await h.response(r["id"]) for r in reqs]
        assert answers[0]["result"] == {"by": "second"}
        assert answers[1]["result"] == {"by": "first"}
        assert answers[2]["error"]["code"] == -32601, answers[2]  # nobody claimed it
        assert offered == [
            ("first", "b/one"),
            ("second", "b/one"),
            ("n1", "y/n"),
            ("n2", "y/n"),
            ("first", "a/two"),
            ("n1", "z/unclaimed"),
            ("n2", "z/unclaimed"),
            ("first", "c/none"),
            ("second", "c/none"),
        ]
        assert len(h.messages) == 3  # notifications, claimed or not, get no answer
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize("kind", ["request", "notification"])
def test_r19_ordered_handler_holds_the_loop_until_it_returns(run: Any, kind: str) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        entered, gate = asyncio.Event(), asyncio.Event()
        order: list[str] = []

        async def on_request(req: IncomingRequest) -> bool:
            order.append(req.method)
            if req.method == "slow":
                entered.set()
                await gate.wait()
            req.respond({})
            return True

        async def on_note(n: Notification) -> bool:
            order.append(n.method)
            entered.set()
            await gate.wait()
            return True

        h.conn.on_receive_request(on_request)
        h.conn.on_receive_notification(on_note)
        fast = h.request_obj("fast")
        first = h.request_obj("slow") if kind == "request" else note("slow")
        h.send(first, fast)
        await entered.wait()
        assert h.conn.counts["inbox"] == 1  # "fast" waits: the loop is held
        assert order == ["slow"] and h.find_response(fast["id"]) is None
        gate.set()
        await h.response(fast["id"])
        assert order == ["slow", "fast"]
        await close_and_check(h)

    run(body())


class Asker:
    """Handles ``ask`` by sending ``client/q`` to the peer; keeps the PendingRequest."""

    def __init__(self, h: ConnectionHarness) -> None:
        self.h = h
        self.pending: PendingRequest | None = None
        self.callback_on_loop: list[bool] = []
        self.outcomes: list[tuple[Any, AcpError | None]] = []
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.done = asyncio.Event()
        self.register_in_handler = True
        h.conn.on_receive_request(self.handle)

    async def callback(self, result: Any, error: AcpError | None) -> None:
        self.callback_on_loop.append(self.h.conn.in_dispatch_loop())
        self.entered.set()
        await self.gate.wait()
        self.outcomes.append((result, error))
        self.done.set()

    async def handle(self, req: IncomingRequest) -> bool:
        if req.method == "ask":
            self.pending = self.h.conn.send_request("client/q", {"n": 1})
            if self.register_in_handler:
                self.pending.on_result(self.callback)
        req.respond({"method": req.method})
        return True

    async def asked(self) -> dict[str, Any]:
        outgoing: list[dict[str, Any]] = await self.h.wait_for(
            lambda: self.h.outgoing_requests("client/q")
        )
        return outgoing[0]


def test_r20_result_callback_registered_before_routing_holds_the_loop(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        asker = Asker(h)
        await h.call("ask")
        q = await asker.asked()
        nxt = h.request_obj("next")
        h.send(h.respond_to(q, {"answer": 42}), nxt)
        await asker.entered.wait()
        assert asker.callback_on_loop == [True]
        assert h.conn.counts["inbox"] == 1 and h.find_response(nxt["id"]) is None
        asker.gate.set()
        await h.response(nxt["id"])
        assert asker.outcomes == [({"answer": 42}, None)]
        await close_and_check(h)

    run(body())


def test_r20_result_callback_registered_after_routing_carries_no_barrier(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        asker = Asker(h)
        asker.register_in_handler = False
        await h.call("ask")
        q = await asker.asked()
        h.send(h.respond_to(q, {"answer": 7}))
        await h.call("sync")  # the response above has been routed by now
        assert asker.pending is not None and asker.pending.done
        asker.pending.on_result(asker.callback)
        await asker.entered.wait()
        assert asker.callback_on_loop == [False]
        # The callback is still parked, yet the loop serves the next message.
        assert (await h.call("next"))["result"] == {"method": "next"}
        assert asker.outcomes == []
        asker.gate.set()
        await asker.done.wait()
        assert asker.outcomes == [({"answer": 7}, None)]
        await close_and_check(h)

    run(body())


def test_r20_failure_at_eof_is_delivered_without_a_barrier(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        asker = Asker(h)
        asker.gate.set()
        await h.call("ask")
        await asker.asked()
        await close_and_check(h)  # EOF with client/q unanswered
        assert asker.callback_on_loop == [False]
        [(result, error)] = asker.outcomes
        assert result is None and isinstance(error, ConnectionClosed)
        assert "client/q" in error.message

    run(body())


def test_r20_awaiting_a_pending_request_from_a_spawned_task_does_not_hold_the_loop(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()

        async def wait_and_answer(req: IncomingRequest, pending: PendingRequest) -> None:
            req.respond({"got": await pending})

        async def handle(req: IncomingRequest) -> bool:
            if req.method == "ask":
                h.conn.spawn(wait_and_answer(req, h.conn.send_request("client/q")), name="asker")
            else:
                req.respond({})
            return True

        h.conn.on_receive_request(handle)
        ask = h.request("ask")
        [q] = await h.wait_for(lambda: h.outgoing_requests("client/q"))
        assert h.conn.counts["spawned"] == 1
        await h.call("other")  # served while the spawned task waits for the answer
        assert h.find_response(ask) is None
        h.send(h.respond_to(q, "yes"))
        assert (await h.response(ask))["result"] == {"got": "yes"}
        await close_and_check(h)

    run(body())


def test_r21_awaiting_a_response_inside_an_ordered_handler_raises_deadlock_error(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        caught: list[str] = []

        async def handle(req: IncomingRequest) -> bool:
            if req.method == "caught":
                try:
                    await h.conn.send_request("fs/read_text_file", {"path": "/x"})
                except DeadlockError as exc:
                    caught.append(str(exc))
                req.respond({})
            elif req.method == "uncaught":
                await h.conn.send_request("terminal/create", {})
            else:
                req.respond({})
            return True

        h.conn.on_receive_request(handle, name="tests.blocking_handler")
        assert (await h.call("caught"))["result"] == {}
        [message] = caught
        assert "tests.blocking_handler" in message and "fs/read_text_file" in message
        failed = await h.call("uncaught")
        assert failed["error"]["code"] == -32603, failed
        assert failed["error"]["data"] == {"error": "DeadlockError"}, failed
        assert (await h.call("after"))["result"] == {}  # the connection keeps serving
        await close_and_check(h)

    run(body())


def test_r21_awaiting_inside_a_result_callback_raises_deadlock_error(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        caught: list[str] = []

        async def callback(result: Any, error: AcpError | None) -> None:
            try:
                await h.conn.send_request("client/second")
            except DeadlockError as exc:
                caught.append(str(exc))

        async def handle(req: IncomingRequest) -> bool:
            h.conn.send_request("client/first").on_result(callback)
            req.respond({})
            return True

        h.conn.on_receive_request(handle)
        await h.call("go")
        [q] = await h.wait_for(lambda: h.outgoing_requests("client/first"))
        h.send(h.respond_to(q, {}))
        [second] = await h.wait_for(lambda: h.outgoing_requests("client/second"))
        await h.wait_for(lambda: caught)
        assert "client/second" in caught[0] and "client/first" in caught[0]
        h.send(h.respond_to(second, {}))
        await h.call("sync")
        await close_and_check(h)

    run(body())


class BlockingControlAgent(Agent):
    """A control-lane handler that (wrongly) awaits the client."""

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> Any:
        await self.client.request_permission("s", {"toolCallId": "t"}, [])
        return None


def test_r21_acp_control_handler_awaiting_the_client_gets_deadlock_error_not_a_hang(
    run: Any,
) -> None:
    async def body() -> None:
        h = Harness(BlockingControlAgent())
        await h.initialize()
        resp = await h.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert resp["error"]["code"] == -32603, resp
        assert resp["error"]["data"] == {"error": "DeadlockError"}, resp
        await h.initialize()  # still serving
        await close_and_check(h)

    run(body())


def test_r21_spawn_is_tracked_its_failures_logged_and_joined_at_shutdown(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        gate = asyncio.Event()
        finished: list[str] = []

        async def patient() -> None:
            await gate.wait()
            finished.append("patient")

        async def failing() -> None:
            raise ValueError("spawned work broke")

        async def open_gate() -> None:
            gate.set()  # runs at shutdown, before spawned tasks are joined

        h.conn.on_shutdown(open_gate)
        task = h.conn.spawn(patient(), name="tests.patient")
        assert h.conn.counts["spawned"] == 1
        broken = h.conn.spawn(failing(), name="tests.failing")
        await asyncio.wait({broken})
        await h.call("x")  # -32601; the loop is unaffected by the failure
        assert h.conn.counts["spawned"] == 1 and not task.done()
        await close_and_check(h)
        assert finished == ["patient"] and not task.cancelled()  # waited for, not cut short

    with caplog.at_level(logging.ERROR, logger="acp_fast"):
        run(body())
    failures = [r for r in caplog.records if "tests.failing" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert isinstance(failures[0].exc_info[1], ValueError)


def test_r21_spawned_task_outliving_the_grace_period_is_cancelled_and_joined(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness(limits=Limits(shutdown_grace_s=0.05))
        never = asyncio.Event()
        task = h.conn.spawn(never.wait(), name="tests.forever")
        await close_and_check(h)
        assert task.cancelled()

    run(body())


@pytest.mark.parametrize("fault", ["hangs", "cancelled-inside"])
def test_r14_a_shutdown_hook_that_hangs_or_is_cancelled_cannot_stop_the_shutdown(
    run: Any, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """R14: the shutdown ends even when a hook (an MCP provider's disconnect, say) never returns."""

    async def body() -> None:
        h = ConnectionHarness(limits=Limits(shutdown_grace_s=0.01, abort_join_s=0.01))
        after: list[str] = []

        async def bad_hook() -> None:
            if fault == "hangs":
                await asyncio.Event().wait()
            raise asyncio.CancelledError  # as a library that swallows and re-raises the wrong cancel

        async def next_hook() -> None:
            after.append("ran")

        h.conn.on_shutdown(bad_hook)
        h.conn.on_shutdown(next_hook)
        await asyncio.wait_for(close_and_check(h), timeout=30)  # only turns a hang into a failure
        assert after == ["ran"]  # the hooks after the bad one still ran

    with caplog.at_level(logging.ERROR, logger="acp_fast"):
        run(body())
    expected = "did not finish by the shutdown deadline" if fault == "hangs" else "was cancelled from inside"
    assert any(expected in r.getMessage() and "bad_hook" in r.getMessage() for r in caplog.records)


def test_connection_attributes_stay_within_the_shared_keys_budget() -> None:
    """A Connection keeps its attributes in CPython's shared-key instance layout: at most 29 of them.

    Every message reads a dozen of them. Measured on CPython 3.11 (valgrind, PYTHONHASHSEED=0,
    benchmarks/per_request.py): a 30th attribute, any one, cost about +380 instructions per
    pipelined request, metrics on or off. New per-connection state belongs on an object one
    attribute holds (as the instrument, peer/instrument.py, does), not in another attribute here.
    """
    from acp_fast.peer.connection import Connection
    from acp_fast.peer.writer import Writer

    loop = asyncio.new_event_loop()
    try:
        conn = Connection(loop, Writer(loop, Limits()))
        attributes = sorted(vars(conn))
    finally:
        loop.close()
    assert len(attributes) <= 29, f"{len(attributes)} attributes: {attributes}"
