"""R18/R19 on the inline path: a message that reaches a parked loop is dispatched in the read callback.

The order and the loop-holding guarantees must be exactly those of the
dispatch task; only the loop turn is saved. ``inline_dispatch=False`` turns
the path off, which is how these tests show they depend on it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_fast.peer.connection import DispatchState, IncomingRequest
from acp_fast.wire.errors import DeadlockError
from tests.helpers import ConnectionHarness, close_and_check

pytestmark = pytest.mark.usefixtures("read_path")


async def parked(h: ConnectionHarness) -> None:
    """Wait until the dispatch loop has drained its inbox and parked."""
    await h.wait_for(lambda: h.conn.dispatch_state is DispatchState.PARKED)


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "queued"])
def test_r18_request_to_a_parked_loop_is_answered_within_the_read_callback(run: Any, inline: bool) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        h.conn.inline_dispatch = inline

        async def echo(req: IncomingRequest) -> None:
            req.respond({"echo": req.params})

        h.conn.on_receive_request(echo)
        await h.call("warm-up")
        await parked(h)
        rid = h.request("echo", {"n": 1})
        # No await since send: answered (and flushed) inside the read callback, or not yet.
        answered = h.find_response(rid)
        if inline:
            assert answered == {"jsonrpc": "2.0", "id": rid, "result": {"echo": {"n": 1}}}
        else:
            assert answered is None
            assert (await h.response(rid))["result"] == {"echo": {"n": 1}}
        await close_and_check(h)

    run(body())


def test_r19_inline_handler_that_suspends_holds_the_loop_until_it_returns(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        release = asyncio.Event()
        order: list[str] = []
        tasks: list[asyncio.Task[Any] | None] = []

        async def handler(req: IncomingRequest) -> None:
            order.append(f"start {req.method}")
            tasks.append(asyncio.current_task())
            if req.method == "slow":
                await release.wait()
            order.append(f"end {req.method}")
            req.respond(req.method)

        h.conn.on_receive_request(handler)
        await h.call("warm-up")
        await parked(h)
        slow = h.request_obj("slow")
        fast = h.request_obj("fast")
        h.send(slow, fast)  # one chunk: "slow" runs inline and suspends, "fast" must wait
        assert order[-1] == "start slow"
        assert h.conn.counts["inbox"] == 1
        await asyncio.sleep(0)  # let the dispatch task take "slow" over; it stays parked on the event
        assert h.conn.counts["inbox"] == 1 and order[-1] == "start slow"
        release.set()
        await h.response(fast["id"])
        assert order[-4:] == ["start slow", "end slow", "start fast", "end fast"]
        assert [m["id"] for m in h.messages if "result" in m][-2:] == [slow["id"], fast["id"]]
        # Inline or not, the handler always ran as the dispatch task.
        assert all(t is h.conn._loop_task for t in tasks)
        await close_and_check(h)

    run(body())


def test_r21_deadlock_is_detected_in_a_handler_run_inline(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness()
        seen: list[BaseException] = []

        async def handler(req: IncomingRequest) -> None:
            try:
                await h.conn.send_request("client/thing")
            except DeadlockError as exc:
                seen.append(exc)
                raise

        h.conn.on_receive_request(handler, name="inline-handler")
        h.send(h.request_obj("warm-up", id="w"))
        await h.response("w")
        await parked(h)
        rid = h.request("again")
        assert h.find_response(rid) is not None  # answered inline, at once: no hang
        assert h.find_response(rid)["error"]["code"] == -32603
        assert len(seen) == 2 and "inline-handler" in str(seen[-1]) and "client/thing" in str(seen[-1])
        for m in h.outgoing_requests("client/thing"):
            h.send(h.respond_to(m, {}))  # answer what was sent, so nothing stays pending
        await close_and_check(h)

    run(body())
