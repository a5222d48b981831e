"""R26: a stalled stdout makes streaming prompts wait; nothing is dropped or reordered.

The harness's output pipe is the product's ``MemoryTransport``; its
``stall()`` holds every write and reports a growing buffer, pausing the
writer above the high-water mark, as a pipe whose reader stopped would.
The test observes the producer blocked in ``drain`` through a thin wrapper,
never through timing.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import orjson
import pytest

from acp_fast.agent.base import Agent
from acp_fast.wire import jsonrpc
from acp_fast.wire.limits import KiB, Limits
from tests.helpers import ConnectionHarness, Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")

UPDATES = 300
PAD = "x" * 200


class FirehoseAgent(Agent):
    """One prompt streams UPDATES numbered chunks as fast as the writer lets it."""

    def __init__(self) -> None:
        self.produced = 0
        self.mode_set = asyncio.Event()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        for i in range(UPDATES):
            await self.client.agent_message_chunk(session_id, f"{i:05d}:{PAD}")
            self.produced += 1
        return "end_turn"

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self.mode_set.set()


def test_r26_stalled_reader_bounds_transport_bytes_and_loses_no_update(
    run: Any, framer_cls: type
) -> None:
    high = 8 * KiB

    async def body() -> None:
        agent = FirehoseAgent()
        h = Harness(agent, limits=Limits(write_high_water=high, write_low_water=2 * KiB), framer_cls=framer_cls)
        await h.initialize()
        sid = await h.new_session()
        h.transport.stall()
        delivered = len(h.raw)

        blocked = asyncio.Event()
        drain = h.writer.drain

        async def observed_drain() -> None:
            if h.transport.paused:
                blocked.set()  # the producer is about to wait for the pipe
            await drain()

        h.writer.drain = observed_drain  # type: ignore[method-assign]
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await blocked.wait()
        produced = agent.produced
        assert 0 < produced < UPDATES
        # Answers are output too: a control request waits in the inbox, not in the pipe.
        mid = h.request("session/set_mode", {"sessionId": sid, "modeId": "m"})
        assert h.conn.counts["inbox"] == 1 and not agent.mode_set.is_set()
        assert agent.produced == produced
        assert len(h.raw) == delivered  # nothing reached the client while stalled

        h.transport.unstall()
        assert "result" in await h.response(mid)
        done = await h.response(pid)
        assert done["result"] == {"stopReason": "end_turn"}, done
        texts = [u["update"]["content"]["text"] for u in h.updates(sid)]
        assert texts == [f"{i:05d}:{PAD}" for i in range(UPDATES)]  # all of them, in order
        largest = max(len(line) + 1 for line in bytes(h.raw).split(b"\n") if line)
        assert h.transport.max_held <= high + largest, (h.transport.max_held, high, largest)
        await close_and_check(h)

    run(body())


def test_r26_send_notification_never_waits_and_drain_waits_for_the_stalled_pipe(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness(limits=Limits(write_high_water=4 * KiB, write_low_water=1 * KiB))
        await h.conn.drain()  # nothing backed up: returns at once
        h.transport.stall()
        sent = 0
        while not h.transport.paused:  # bounded: the pipe pauses past 4 KiB
            assert sent < 100
            h.conn.send_notification("_stream/item", {"n": sent, "pad": PAD})
            sent += 1
        drained = asyncio.ensure_future(h.conn.drain())
        for _ in range(3):
            await asyncio.sleep(0)
        assert not drained.done()  # the producer waits for the pipe ...
        assert h.raw == b""
        h.transport.unstall()
        await drained  # ... and resumes once it drained
        items = [m["params"]["n"] for m in h.messages if m.get("method") == "_stream/item"]
        assert items == list(range(sent))
        await close_and_check(h)

    run(body())


def test_r26_answers_are_backpressure_too_and_reading_stops_mid_chunk(run: Any, framer_cls: type) -> None:
    high, inbox = 1 * KiB, 8
    n = 200

    async def body() -> None:
        limits = Limits(write_high_water=high, write_low_water=high // 4, max_inbox=inbox)
        h = Harness(FirehoseAgent(), limits=limits, framer_cls=framer_cls)
        await h.initialize()
        h.transport.stall()
        # One read chunk of malformed lines and a probe: every line wants an answer.
        probe = h.request_obj("session/list")  # unsupported by this agent: -32601, an answer all the same
        h.send_raw(b"x\n" * n + orjson.dumps(probe) + b"\n")
        # Past the high-water mark nothing more is dispatched; past the inbox bound nothing more
        # is decoded: the rest of the chunk waits as raw lines, and the transport reads no more.
        assert h.transport.paused
        assert h.conn.counts["inbox"] <= inbox
        assert not h.read_transport.reading
        answered = h.raw.count(b"\n")
        assert answered == 1  # only initialize's answer reached the client
        largest = len(orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700}})) + 256
        assert h.transport.max_held <= high + largest, h.transport.max_held

        h.transport.unstall()
        await h.wait_for(lambda: len(h.messages) == 1 + n + 1)
        errors, last = h.messages[1:-1], h.messages[-1]
        assert all(m["id"] is None and m["error"]["code"] == -32700 for m in errors)
        assert last["id"] == probe["id"], last  # every answer, in order, once the client reads
        assert h.read_transport.reading
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize("decoder", ["live", "python"])
def test_r26_a_bad_line_waiting_in_the_inbox_keeps_nothing_of_its_read_chunk(
    run: Any, decoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox is bounded in items; that bounds memory only if a queued error holds no more than its answer.

    A line is a view into the read buffer, and the frames of the read callback
    hold the chunk's other lines: an error that kept any of them alive (the
    pure-Python decoder's chained JSON error, through its traceback, once did)
    grew a flooded agent by four times what the compiled path does.
    """
    if decoder == "python":
        monkeypatch.setattr(jsonrpc, "decode", jsonrpc.decode_py)

    async def body() -> None:
        h = ConnectionHarness()
        line = memoryview(bytearray(b"x"))
        ref = weakref.ref(line)
        h.conn.feed_line(line)
        del line
        assert h.conn.counts["inbox"] == 1
        assert ref() is None, "the queued error keeps its line alive"
        h.conn.feed_end()
        await h.wait_for(lambda: len(h.messages) == 1)
        assert h.messages[0]["id"] is None and h.messages[0]["error"]["code"] == -32700, h.messages
        await close_and_check(h)

    run(body())


def test_r13_r26_lines_held_at_a_pause_are_dropped_when_reading_is_closed(run: Any, framer_cls: type) -> None:
    high, inbox, n = 1 * KiB, 8, 200

    async def body() -> None:
        limits = Limits(write_high_water=high, write_low_water=high // 4, max_inbox=inbox)
        h = Harness(FirehoseAgent(), limits=limits, framer_cls=framer_cls)
        await h.initialize()
        h.transport.stall()
        h.send_raw(b"x\n" * n)
        queued = h.conn.counts["inbox"]
        assert 0 < queued <= inbox and not h.read_transport.reading
        # What SIGTERM does: stop reading, end the input. The held lines are as unread as the pipe's.
        h.reader.close()
        h.reader.connection_lost(None)
        await h.task  # the shutdown flush releases the stalled transport
        answered = [m for m in h.messages[1:] if m.get("error", {}).get("code") == -32700]
        assert len(answered) < n - inbox, len(answered)  # the inbox was answered, the held rest was not
        h.assert_no_leaks()

    run(body())


def test_r26_a_waiting_producer_is_not_starved_by_answers_that_refill_the_pipe(run: Any) -> None:
    """Woken by a drained pipe, a producer goes on even if answers refilled it before it ran.

    Answers never wait, so under a flood of cheap requests the pipe is full
    again by the time a woken producer runs; re-checking would park every
    session-start callback for good (their tasks then pile up to the spawn
    limit). The bound still holds: a producer waits again after its next write.
    """

    async def body() -> None:
        h = ConnectionHarness(limits=Limits(write_high_water=4 * KiB, write_low_water=1 * KiB))

        def fill() -> None:
            h.transport.stall()
            for n in range(100):  # bounded: the pipe pauses past 4 KiB
                if h.transport.paused:
                    return
                h.conn.send_notification("_fill/item", {"n": n, "pad": PAD})
            raise AssertionError("the pipe never paused")

        fill()
        drained = asyncio.ensure_future(h.conn.drain())
        await asyncio.sleep(0)
        assert not drained.done()
        h.transport.unstall()  # the pipe drains: the producer is woken ...
        fill()  # ... and before it runs, answers fill the pipe again
        for _ in range(5):
            await asyncio.sleep(0)
        assert drained.done()
        assert h.conn.writer.must_wait  # it went on although the pipe is full again
        h.transport.unstall()
        await close_and_check(h)

    run(body())
