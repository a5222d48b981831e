"""The asyncio read-side adapter: bytes from the loop into the framer, lines out.

The only asyncio protocol subclass on the read path. It accepts both read
paths: uvloop's ``get_buffer``/``buffer_updated`` (the loop reads straight into
our buffer, and lines inside it reach the decoder as memoryviews with no copy)
and the stdlib's ``data_received``. Everything after the framer happens in the
sink (the Connection), synchronously, before the buffer is reused.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

from ..wire.frames import Oversized, Truncated
from ..wire.framing import LineFramer


class LineSink(Protocol):
    def feed_line(self, line: bytes | memoryview) -> None: ...
    def feed_oversized(self, event: Oversized) -> None: ...
    def feed_truncated(self, event: Truncated) -> None: ...
    def feed_eof(self, exc: BaseException | None) -> None: ...
    def feed_end(self) -> None: ...
    def reader_attached(self, reader: ReadProtocol) -> None: ...


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
        self._paused = False
        self._ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's pipe transports do not subclass asyncio.ReadTransport.
        self._transport = cast(asyncio.ReadTransport, transport)
        if self._paused:
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
        for frame in frames:
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
        tail = self._framer.close()
        if tail is not None:
            self._sink.feed_truncated(tail)
        self._sink.feed_eof(exc)

    def pause_reading(self) -> None:
        if not self._paused:
            self._paused = True
            t = self._transport
            if t is not None and not t.is_closing():
                t.pause_reading()

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            t = self._transport
            if t is not None and not t.is_closing():
                t.resume_reading()

    def close(self) -> None:
        t = self._transport
        if t is not None and not t.is_closing():
            t.close()
