"""The asyncio read-side adapter: bytes from the loop into the framer, lines out.

The only asyncio protocol subclass on the read path. It accepts both read
paths: uvloop's ``get_buffer``/``buffer_updated`` (the loop reads straight into
our buffer, and lines inside it reach the decoder as memoryviews with no copy)
and the stdlib's ``data_received``. Everything after the framer happens in the
sink (the Connection), synchronously, before the buffer is reused.

A pause requested while a chunk is being delivered takes effect at once: the
rest of the chunk's lines are copied aside and delivered on resume, before
the transport reads again. So what waits beyond the inbox bound is at most one
read chunk of raw lines, never decoded messages (R26).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from typing import Protocol, cast

from ..wire.frames import Oversized, Truncated
from ..wire.framing import LineFramer
from .flow import ReadControl


class LineSink(Protocol):
    """What a transport hands incoming messages to (the Connection).

    The contract, for every transport: ``feed_line`` once per complete
    message, in order; ``feed_oversized``/``feed_truncated`` for a message
    the framer could not deliver; ``feed_eof`` once, last. ``feed_end`` says
    "this read is done, dispatch and flush now" and is optional: a sink ends
    every batch it was given by itself, one loop turn later at the latest, so
    a transport that cannot tell where a read ends (a WebSocket whose last
    frame was a control frame the library answered) cannot strand a line.
    """

    def feed_line(self, line: bytes | memoryview) -> None: ...
    def feed_oversized(self, event: Oversized) -> None: ...
    def feed_truncated(self, event: Truncated) -> None: ...
    def feed_eof(self, exc: BaseException | None) -> None: ...
    def feed_end(self) -> None: ...
    def reader_attached(self, reader: ReadControl) -> None: ...


class ReadProtocol(asyncio.BufferedProtocol):
    """Feeds a LineSink from a read transport, with pause/resume for the inbox bound."""

    def __init__(
        self,
        sink: LineSink,
        framer: LineFramer,
        read_buffer_bytes: int,
    ) -> None:
        self._sink = sink
        self._framer = framer
        self._buf = bytearray(read_buffer_bytes)
        self._view = memoryview(self._buf)
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False  # the sink asked for no more lines
        self._transport_paused = False  # the transport was told to stop reading
        self._ended = False
        self._held: deque[bytes | Oversized] = deque()  # lines read but not yet delivered

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's pipe transports do not subclass asyncio.ReadTransport.
        self._transport = cast(asyncio.ReadTransport, transport)
        if self._paused:
            self._transport_paused = True
            self._transport.pause_reading()
        self._sink.reader_attached(self)

    # zero-copy path (uvloop pipes, asyncio sockets)
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self._deliver(self._framer.feed(self._view[:nbytes]))

    # stdlib pipe path
    def data_received(self, data: bytes) -> None:
        self._deliver(self._framer.feed(data))

    def _deliver(self, frames: list[bytes | memoryview | Oversized]) -> None:
        sink = self._sink
        rest = iter(frames)
        if self._paused:  # a transport that delivers after a pause: keep the order
            self._hold(rest)
            return
        for frame in rest:
            if type(frame) is Oversized:
                sink.feed_oversized(frame)
            else:
                sink.feed_line(frame)  # type: ignore[arg-type]
            if self._paused:  # the sink is full
                self._hold(rest)
                break
        sink.feed_end()

    def _hold(self, frames: Iterator[bytes | memoryview | Oversized]) -> None:
        """Keep undelivered lines as copies: the views die when the buffer is reused."""
        self._held.extend(f if isinstance(f, Oversized) else bytes(f) for f in frames)

    def _deliver_held(self, until_paused: bool = True) -> None:
        """Deliver the lines held at a pause, in order, until the sink pauses again."""
        held, sink = self._held, self._sink
        while held and not (until_paused and self._paused):
            frame = held.popleft()
            if type(frame) is Oversized:
                sink.feed_oversized(frame)
            else:
                sink.feed_line(frame)  # type: ignore[arg-type]
        sink.feed_end()

    def eof_received(self) -> bool:
        self._end(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        if self._held:  # they came before the end, so they go first
            self._deliver_held(until_paused=False)
        tail = self._framer.close()
        if tail is not None:
            self._sink.feed_truncated(tail)
        self._sink.feed_eof(exc)

    def pause_reading(self) -> None:
        if not self._paused:
            self._paused = True
            t = self._transport
            if not self._transport_paused and t is not None and not t.is_closing():
                self._transport_paused = True
                t.pause_reading()

    def resume_reading(self) -> None:
        """Deliver what was held first; the transport reads again only once none is left."""
        if self._paused:
            self._paused = False
            if self._held:
                self._deliver_held()
                if self._held or self._paused:
                    return
            t = self._transport
            if self._transport_paused and t is not None and not t.is_closing():
                self._transport_paused = False
                t.resume_reading()

    def close(self) -> None:
        """Stop reading; lines held back at a pause are dropped with what is still unread."""
        self._held.clear()
        t = self._transport
        if t is not None and not t.is_closing():
            t.close()
