"""The write side of a peer: coalesced, flow-controlled output (R26).

``Writer`` is the only object that writes bytes. Messages queued in one loop
turn leave in one ``write`` call. Producers that stream (prompt updates) call
``await drain()``: while the bytes buffered in the transport are above the
high-water mark they wait for the pipe, so a client that stops reading slows
the agent down instead of growing its memory. Nothing is ever dropped while
the transport is alive; once it has failed, writes are discarded quietly (the
peer is gone) and ``failed`` says why.

Closing flushes with a bound of its own (``Limits.flush_timeout_s``, R14): a
client that stopped reading cannot keep the process alive; what it never
took is dropped, and one log line says how many bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ..wire.limits import Limits
from ..wire.routes import Route

#: How a transport frames each message on its way into the coalescing buffer:
#: ``framing(buf, data)`` appends ``data`` (one encoded message ending in its
#: newline) to ``buf`` as the transport sends it (a WebSocket frame, say).
#: Without one, messages go in as they are: newline-delimited JSON.
Framing = Callable[[bytearray, bytes], None]

log = logging.getLogger(__name__)


class Writer:
    """Coalescing writer over one asyncio write transport."""

    #: Whether ``route`` must be called before each ``write`` (only a transport
    #: that sorts lines by where they go needs it; the others pay one attribute read).
    routed = False

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits, framing: Framing | None = None) -> None:
        self._loop = loop
        self._framing = framing
        self._high = limits.write_high_water
        self._low = limits.write_low_water
        self._flush_timeout = limits.flush_timeout_s
        self._transport: asyncio.WriteTransport | None = None
        # Messages are copied into one buffer as they come rather than kept as
        # separate bytes objects: orjson's outputs, when hundreds stay alive
        # until a join, cost far more to allocate than bytes appended to one growing buffer.
        self._buf = bytearray()
        self._flush_scheduled = False
        self._paused = False
        #: Whether the transport holds more than the high-water mark and asked us to stop
        #: (never once output failed). A plain attribute, not a property: the dispatch
        #: loop reads it before every message.
        self.paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._lost: asyncio.Future[None] | None = None
        self.failed: BaseException | None = None
        self.on_failure: Callable[[BaseException | None], None] | None = None

    def attach(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        transport.set_write_buffer_limits(high=self._high, low=self._low)

    # -- called by the write protocol ----------------------------------------
    def pause_writing(self) -> None:
        self._paused = True
        self.paused = self.failed is None

    def resume_writing(self) -> None:
        self._paused = False
        self.paused = False
        self._wake_drainers()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self.failed is None and not self._closed:
            self.failed = exc or ConnectionResetError("stdout closed")
            self.paused = False
            self._buf = bytearray()
            self._wake_drainers()
            if self.on_failure is not None:
                self.on_failure(self.failed)

    # -- producers --------------------------------------------------------------
    def route(self, kind: int, rid: Any, session: str | None) -> None:
        """The facts about the line the next ``write`` queues (used when ``routed``)."""

    def write(self, data: bytes) -> None:
        """Queue one encoded message; it leaves at the end of this loop turn."""
        if self.failed is not None or self._closed:
            return
        buf = self._buf
        framing = self._framing
        if framing is not None:
            framing(buf, data)
        elif not buf and len(data) >= self._high and self._transport is not None:
            self._send(data)  # one big message: no copy, nothing queued ahead of it
            return
        else:
            buf += data
        if len(buf) >= self._high:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    @property
    def buffered(self) -> int:
        """Bytes accepted but not yet handed to the OS."""
        t = self._transport
        return len(self._buf) + (t.get_write_buffer_size() if t is not None else 0)

    @property
    def must_wait(self) -> bool:
        """Whether a producer should ``await drain()`` now (checked after every update sent).

        ``buffered > high``, spelled out: two property calls were a third of this.
        """
        if self.failed is not None:
            return False
        if self._paused:
            return True
        t = self._transport
        return len(self._buf) + (t.get_write_buffer_size() if t is not None else 0) > self._high

    async def drain(self) -> None:
        """Wait while output is above the high-water mark (R26).

        One flow cycle at most: a producer woken because the pipe drained (or
        by ``wake``) goes on even if others refilled it meanwhile, so it cannot
        starve behind them; it waits again after its next write.
        """
        if not self.must_wait:
            return
        self._flush()
        if self.must_wait:
            await self.wait_flow()

    async def wait_flow(self) -> None:
        """Wait once: until the transport resumes, fails, or ``wake()``; callers re-check."""
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = self._loop.create_future()
        await asyncio.shield(self._drain_waiter)

    def on_flow(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop when ``wait_flow`` waiters are next released; no task of its own.

        Released by ``resume_writing``, a lost connection or ``wake``: register
        it while ``paused``, or something else must call ``wake``.
        """
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = self._loop.create_future()
        self._drain_waiter.add_done_callback(lambda _f: callback())

    def wake(self) -> None:
        """Release every waiter to re-check its condition (the input ended, say)."""
        self._wake_drainers()

    def _wake_drainers(self) -> None:
        w = self._drain_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def flush(self) -> None:
        """Hand everything queued to the transport now (latency-critical answers)."""
        if self._buf:
            self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._buf or self._transport is None or self.failed is not None:
            return
        data, self._buf = self._buf, bytearray()  # handed over whole, never mutated again
        self._send(data)

    def _send(self, data: bytes | bytearray) -> None:
        assert self._transport is not None
        try:
            self._transport.write(data)
        except (OSError, RuntimeError) as exc:  # EPIPE, ECONNRESET, ENOSPC on a file, closed loop
            self.connection_lost(exc)

    @property
    def peer_gone(self) -> bool:
        """Whether output failed because the client closed its end: a disconnect, not a fault."""
        return isinstance(self.failed, BrokenPipeError | ConnectionResetError)

    async def close(self) -> int:
        """Flush everything written so far, then close the transport; returns bytes dropped.

        Returns once the OS has every byte (the transport reports it lost after
        its buffer drained), the peer is gone, or ``flush_timeout_s`` passed:
        then the transport is aborted and what it still held is dropped.
        """
        if self._closed:
            return 0
        self._flush()
        self._closed = True
        t = self._transport
        if t is None or t.is_closing():
            return 0
        if self.failed is None and t.get_write_buffer_size() > 0:
            self._lost = self._loop.create_future()
            t.close()
            try:
                async with asyncio.timeout(self._flush_timeout):
                    await self._lost
            except TimeoutError:
                dropped = t.get_write_buffer_size()
                t.abort()
                log.warning(
                    "stdout was not read for %.1f s at exit: dropped %d unwritten bytes",
                    self._flush_timeout,
                    dropped,
                )
                return dropped
        else:
            t.close()
        return 0


class WriteProtocol(asyncio.Protocol):
    """What a write transport reports flow control and loss to, forwarded to its Writer."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    def pause_writing(self) -> None:
        self._writer.pause_writing()

    def resume_writing(self) -> None:
        self._writer.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._writer.connection_lost(exc)


class RoutedWriter(Writer):
    """A Writer whose transport gets each line's ``Route`` with it, so it need not parse the line back.

    Every line accepted by ``write`` appends one entry to ``routes``, in order:
    the route its sender gave just before, or None (the transport then reads
    the line itself). The transport pops one entry per line it is handed.
    """

    routed = True

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits) -> None:
        super().__init__(loop, limits)
        self.routes: deque[Route | None] = deque()
        self._next: Route | None = None

    def route(self, kind: int, rid: Any, session: str | None) -> None:
        self._next = (kind, rid, session)

    def write(self, data: bytes) -> None:
        route, self._next = self._next, None
        if self.failed is not None or self._closed:
            return
        self.routes.append(route)
        super().write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        self.routes.clear()
