"""An in-memory byte stream with a pipe's flow control: peers in one loop, no descriptors.

``MemoryTransport`` is the write end a ``Writer`` attaches to. What is written
reaches ``deliver`` (a callable, or a read protocol connected with
``connect``), in order. It reports ``pause_writing`` above its high-water mark
and ``resume_writing`` below the low one, exactly like a pipe transport, so
backpressure (R26) behaves as it does over stdio. The product pairs two
connections with it (``link``); tests and benchmarks use the same class, with
``stall``/``unstall`` to play a reader that stops reading and ``break_pipe`` to
play one that died.

A connected read protocol is fed through the same path the loop would use:
``get_buffer``/``buffer_updated`` for a buffered protocol (uvloop's zero-copy
path), ``data_received`` otherwise.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

from ..wire.limits import WRITE_HIGH_WATER, WRITE_LOW_WATER
from .writer import Writer


class FlowControlled(Protocol):
    """What the write end reports to: a Writer, or its WriteProtocol."""

    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...
    def connection_lost(self, exc: BaseException | None) -> None: ...


class Unwatched:
    """A write end whose flow reports go nowhere: a feeder that writes and never waits.

    A pipe's feeding end in tests and benchmarks; the stream still holds what
    a reader does not take, as a real pipe would.
    """

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def connection_lost(self, exc: BaseException | None) -> None:
        pass


class MemoryTransport(asyncio.WriteTransport):
    """The write end of one direction of an in-memory stream.

    ``immediate=True`` delivers inside ``write`` (a test double that sees
    every byte the moment it is written); otherwise delivery is one
    ``call_soon`` later, as a real pipe would, so two peers never re-enter
    each other.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: FlowControlled,
        deliver: Callable[[bytes], None] | None = None,
        *,
        immediate: bool = False,
    ) -> None:
        super().__init__()
        self._loop = loop
        self._writer = writer
        self._deliver_fn = deliver
        self._immediate = immediate
        self._reader: asyncio.BaseProtocol | None = None
        self._queue: deque[bytes] = deque()
        self._size = 0
        self._high = WRITE_HIGH_WATER
        self._low = WRITE_LOW_WATER
        self._scheduled = False
        self._stalled = False
        self._closing = False
        self._eof_sent = False
        self._fail_with: BaseException | None = None
        self.paused = False
        self.max_held = 0
        self.read_end = MemoryReadEnd(self)

    # -- the far end -----------------------------------------------------------------
    def connect(self, reader: asyncio.BaseProtocol, *, zero_copy: bool = True) -> None:
        """Feed ``reader`` (a read protocol) with what is written, and tell it of the end.

        ``zero_copy=False`` feeds even a buffered protocol through
        ``data_received``, as the stdlib's pipe transports do, so both read
        paths of one protocol can be driven.
        """
        self._reader = reader
        if zero_copy and isinstance(reader, asyncio.BufferedProtocol):
            self._deliver_fn = lambda data: feed_buffered(reader, data)
        else:
            self._deliver_fn = reader.data_received  # type: ignore[attr-defined]
        reader.connection_made(self.read_end)

    # -- asyncio.WriteTransport ----------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._fail_with is not None:
            raise self._fail_with
        if self._closing:
            return
        self._queue.append(bytes(data))
        self._size += len(data)
        if self._immediate:
            self._deliver()  # what the reader takes at once is never held
        else:
            self._schedule()
        self.max_held = max(self.max_held, self._size)
        if self._size > self._high and not self.paused:
            self.paused = True
            self._writer.pause_writing()

    def get_write_buffer_size(self) -> int:
        return self._size

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is not None:
            self._high = high
        if low is not None:
            self._low = low

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Deliver what is queued (a stalled end is released), then report the end."""
        if not self._closing:
            self._closing = True
            self._stalled = False
            self._schedule()

    def abort(self) -> None:
        """Drop what is queued and end now: the reader is not taking it (a bounded flush gave up)."""
        self._closing = True
        self._queue.clear()
        self._size = 0
        self._stalled = False
        if not self._eof_sent:
            self._eof_sent = True
            reader = self._reader
            if reader is not None:
                reader.eof_received()  # type: ignore[attr-defined]
            self._writer.connection_lost(None)

    # -- test and benchmark controls ------------------------------------------------------
    def stall(self) -> None:
        """Hold every write, as a reader that stopped reading would."""
        self._stalled = True

    def unstall(self) -> None:
        self._stalled = False
        self._deliver()

    def break_pipe(self) -> None:
        """The reader died: the next write fails with EPIPE."""
        self._fail_with = BrokenPipeError(32, "Broken pipe")

    # -- delivery ----------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._deliver)

    def _deliver(self) -> None:
        self._scheduled = False
        deliver = self._deliver_fn
        while deliver is not None and not self._stalled and self.read_end.reading and self._queue:
            data = self._queue.popleft()
            self._size -= len(data)
            deliver(data)
        if self.paused and self._size <= self._low:
            self.paused = False
            self._writer.resume_writing()
        if self._closing and not self._queue and not self._eof_sent:
            self._eof_sent = True
            reader = self._reader
            if reader is not None:
                reader.eof_received()  # type: ignore[attr-defined]
            self._writer.connection_lost(None)


class MemoryReadEnd(asyncio.ReadTransport):
    """The transport a connected read protocol sees: pause/resume reach the write end."""

    def __init__(self, pipe: MemoryTransport) -> None:
        super().__init__()
        self._pipe = pipe
        self.reading = True
        self.closed = False

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True
        self._pipe._schedule()

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def feed_buffered(reader: asyncio.BufferedProtocol, data: bytes) -> None:
    """The loop's zero-copy read path: copy into the protocol's buffer, then report."""
    view = memoryview(data)
    while view:
        buf = memoryview(reader.get_buffer(len(view)))
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        reader.buffer_updated(n)
        view = view[n:]


def link(loop: asyncio.AbstractEventLoop, writer: Writer, reader: asyncio.BaseProtocol) -> MemoryTransport:
    """One direction of an in-memory connection: ``writer``'s bytes reach ``reader``."""
    pipe = MemoryTransport(loop, writer)
    writer.attach(pipe)
    pipe.connect(reader)
    return pipe
