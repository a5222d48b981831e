"""Stdio as a peer transport: stdin into a read protocol, stdout under a Writer.

Pipes, sockets and ttys use the loop's pipe transports. Descriptors the loop
cannot poll (a regular file, ``/dev/null``) get a reader thread and blocking
writes instead; libuv aborts on them otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import stat
import threading
from typing import Any

from ..peer.writer import WriteProtocol, Writer
from ..wire.limits import READ_BUFFER_BYTES


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
            lambda: WriteProtocol(writer), os.fdopen(out_fd, "wb", buffering=0)
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
    """Reads a regular file in a thread, delivering chunks on the loop.

    A file never blocks, so nothing but the handshake stops the thread from
    reading the whole file ahead: it hands over one chunk, waits until the
    loop has delivered it, and only then looks at pause/resume again. A pause
    asked for while a chunk is delivered therefore stops the next read, as on
    a pipe, and at most one chunk is ever in flight.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, protocol: asyncio.BaseProtocol
    ) -> None:
        super().__init__()
        self._loop = loop
        self._fd = fd
        self._protocol: Any = protocol
        self._resume = threading.Event()
        self._resume.set()
        self._delivered = threading.Event()
        self._closing = False
        loop.call_soon(protocol.connection_made, self)
        threading.Thread(target=self._run, name="acp-stdin-file", daemon=True).start()

    def _run(self) -> None:
        exc: OSError | None = None
        try:
            while True:
                self._resume.wait()
                if self._closing:
                    break
                data = os.read(self._fd, READ_BUFFER_BYTES)
                if not data:
                    break
                self._delivered.clear()
                self._loop.call_soon_threadsafe(self._deliver, data)
                self._delivered.wait()
        except OSError as err:
            exc = err
        except RuntimeError:  # the loop closed first: nobody is left to tell
            return
        finally:
            os.close(self._fd)  # our dup of stdin: released before the end is reported
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._finish, exc)

    def _deliver(self, data: bytes) -> None:
        try:
            if not self._closing:
                self._protocol.data_received(data)
        finally:
            self._delivered.set()

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
        self._delivered.set()
