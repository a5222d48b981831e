"""The write side and stdio wiring: coalesced, flow-controlled output (R26).

``Writer`` is the only object that writes bytes. Messages queued in one loop
turn leave in one ``write`` call. Producers that stream (prompt updates) call
``await drain()``: while the bytes buffered in the transport are above the
high-water mark they wait for the pipe, so a client that stops reading slows
the agent down instead of growing its memory. Nothing is ever dropped while
the transport is alive; once it has failed, writes are discarded quietly (the
peer is gone) and ``failed`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any

from .limits import READ_BUFFER_BYTES, Limits

log = logging.getLogger("acp_fast.transport")


class Writer:
    """Coalescing writer over one asyncio write transport."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits) -> None:
        self._loop = loop
        self._high = limits.write_high_water
        self._low = limits.write_low_water
        self._transport: asyncio.WriteTransport | None = None
        # Messages are copied into one buffer as they come rather than kept as
        # separate bytes objects: orjson's outputs, when hundreds stay alive
        # until a join, cost ~10x more to allocate (measured 1.4 vs 0.14 us each).
        self._buf = bytearray()
        self._flush_scheduled = False
        self._paused = False
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

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drainers()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self.failed is None and not self._closed:
            self.failed = exc or ConnectionResetError("stdout closed")
            self._buf = bytearray()
            self._wake_drainers()
            if self.on_failure is not None:
                self.on_failure(self.failed)

    # -- producers --------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue one encoded message; it leaves at the end of this loop turn."""
        if self.failed is not None or self._closed:
            return
        buf = self._buf
        if not buf and len(data) >= self._high and self._transport is not None:
            self._send(data)  # one big message: no copy, nothing queued ahead of it
            return
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
        """Whether a producer should ``await drain()`` now (checked inline on the hot path)."""
        return (self._paused or self.buffered > self._high) and self.failed is None

    async def drain(self) -> None:
        """Wait while output is above the high-water mark (R26)."""
        while self.must_wait:
            self._flush()
            if not self.must_wait:
                return
            if self._drain_waiter is None or self._drain_waiter.done():
                self._drain_waiter = self._loop.create_future()
            await asyncio.shield(self._drain_waiter)

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

    async def close(self) -> None:
        """Flush everything written so far, then close the transport.

        Returns once the OS has every byte (the transport reports it lost after
        its buffer drained) or the peer is gone.
        """
        if self._closed:
            return
        self._flush()
        self._closed = True
        t = self._transport
        if t is None or t.is_closing():
            return
        if self.failed is None and t.get_write_buffer_size() > 0:
            self._lost = self._loop.create_future()
            t.close()
            await self._lost
        else:
            t.close()


class _WriteProtocol(asyncio.Protocol):
    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    def pause_writing(self) -> None:
        self._writer.pause_writing()

    def resume_writing(self) -> None:
        self._writer.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._writer.connection_lost(exc)


def install_event_loop_policy() -> str:
    """Use uvloop where it exists; say so on stderr where it does not."""
    try:
        import uvloop
    except ImportError:
        print("acp_fast: uvloop not available, using the default asyncio loop", file=sys.stderr)
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def _pollable(fd: int, events: int) -> bool:
    """Whether the loop can watch ``fd``: pipes, sockets and ttys yes; regular
    files and /dev/null no (epoll refuses them, and libuv aborts on them)."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    sel = selectors.DefaultSelector()
    try:
        sel.register(fd, events)
    except OSError:
        return False
    finally:
        sel.close()
    return True


async def connect_stdio(
    loop: asyncio.AbstractEventLoop,
    read_protocol: asyncio.BaseProtocol,
    writer: Writer,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> asyncio.BaseTransport:
    """Wire stdin to ``read_protocol`` and stdout to ``writer``.

    Pipes, sockets and ttys go through the loop's pipe transports. What the
    loop cannot poll (regular files, ``agent < in.jsonl > /dev/null``) gets a
    thread reader and blocking writes; both still honour pause/resume.
    """
    # Dup the descriptors so closing the transports never closes fds 0/1 themselves.
    in_fd, out_fd = os.dup(stdin_fd), os.dup(stdout_fd)
    if not _pollable(out_fd, selectors.EVENT_WRITE):
        wt: asyncio.WriteTransport = _FileWriteTransport(out_fd)
    else:
        wt, _ = await loop.connect_write_pipe(
            lambda: _WriteProtocol(writer), os.fdopen(out_fd, "wb", buffering=0)
        )
    writer.attach(wt)
    rt: asyncio.BaseTransport
    if not _pollable(in_fd, selectors.EVENT_READ):
        rt = _FileReadTransport(loop, in_fd, read_protocol)
    else:
        rt, _ = await loop.connect_read_pipe(
            lambda: read_protocol, os.fdopen(in_fd, "rb", buffering=0)
        )
    return rt


class _FileWriteTransport(asyncio.WriteTransport):
    """Blocking writes to a regular file: they never stall, so no flow control."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            os.close(self._fd)


class _FileReadTransport(asyncio.ReadTransport):
    """Reads a regular file in a thread, delivering chunks on the loop."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, protocol: asyncio.BaseProtocol
    ) -> None:
        super().__init__()
        self._loop = loop
        self._fd = fd
        self._protocol: Any = protocol
        self._resume = threading.Event()
        self._resume.set()
        self._closing = False
        loop.call_soon(protocol.connection_made, self)
        threading.Thread(target=self._run, name="acp-stdin-file", daemon=True).start()

    def _run(self) -> None:
        exc: OSError | None = None
        try:
            while not self._closing:
                self._resume.wait()
                data = os.read(self._fd, READ_BUFFER_BYTES)
                if not data:
                    break
                self._loop.call_soon_threadsafe(self._protocol.data_received, data)
        except OSError as err:
            exc = err
        except RuntimeError:  # the loop closed first: nobody is left to tell
            return
        finally:
            os.close(self._fd)  # our dup of stdin: released before the end is reported
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._finish, exc)

    def _finish(self, exc: BaseException | None) -> None:
        if exc is None:
            self._protocol.eof_received()
        self._protocol.connection_lost(exc)

    def pause_reading(self) -> None:
        self._resume.clear()

    def resume_reading(self) -> None:
        self._resume.set()

    def is_reading(self) -> bool:
        return self._resume.is_set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._resume.set()
