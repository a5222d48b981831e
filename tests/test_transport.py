"""R26 transport: the coalescing, flow-controlled Writer and the ReadProtocol over real pipes.

Every pipe test runs on both loops (the ``run`` fixture) over ``os.pipe()``
pairs wired with ``connect_read_pipe``/``connect_write_pipe``. The write
end's pipe is shrunk to one page so a stalled reader fills it at once. No
test waits on time: each waits on an Event set by a callback (a write seen,
``pause_writing``, ``on_failure``, EOF at the reader).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from acp_fast.peer.memory import feed_buffered
from acp_fast.peer.reader import ReadProtocol
from acp_fast.peer.writer import WriteProtocol, Writer
from acp_fast.transports.stdio import connect_stdio
from acp_fast.wire import _framing_py
from acp_fast.wire.frames import Oversized, Truncated
from acp_fast.wire.limits import Limits

PAGE = 4096
SMALL = Limits(write_high_water=16 * 1024, write_low_water=4 * 1024)


class Sink:
    """A LineSink that keeps copies of the lines (the framer's views die with the buffer)."""

    def __init__(self, on_line: Callable[[bytes], None] | None = None) -> None:
        self.lines: list[bytes] = []
        self.oversized: list[Oversized] = []
        self.truncated: list[Truncated] = []
        self.eofs: list[BaseException | None] = []
        self.eof = asyncio.Event()
        self.readers: list[ReadProtocol] = []
        self.chunks_done = 0
        self._on_line = on_line

    def feed_line(self, line: bytes | memoryview) -> None:
        data = bytes(line)
        self.lines.append(data)
        if self._on_line is not None:
            self._on_line(data)

    def feed_oversized(self, event: Oversized) -> None:
        self.oversized.append(event)

    def feed_truncated(self, event: Truncated) -> None:
        self.truncated.append(event)

    def feed_eof(self, exc: BaseException | None) -> None:
        self.eofs.append(exc)
        self.eof.set()

    def feed_end(self) -> None:
        self.chunks_done += 1

    def reader_attached(self, reader: ReadProtocol) -> None:
        self.readers.append(reader)


class PathRecorder(ReadProtocol):
    """Records which read path the loop used."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.paths: set[str] = set()

    def buffer_updated(self, nbytes: int) -> None:
        self.paths.add("buffer_updated")
        super().buffer_updated(nbytes)

    def data_received(self, data: bytes) -> None:
        self.paths.add("data_received")
        super().data_received(data)


class CountingTransport(asyncio.WriteTransport):
    """Delegates to a real pipe transport and counts the write calls reaching it."""

    def __init__(self, inner: asyncio.WriteTransport) -> None:
        super().__init__()
        self.inner = inner
        self.writes: list[bytes] = []
        self.wrote = asyncio.Event()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        self.wrote.set()
        self.inner.write(data)

    def get_write_buffer_size(self) -> int:
        return self.inner.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.inner.set_write_buffer_limits(high, low)

    def is_closing(self) -> bool:
        return self.inner.is_closing()

    def close(self) -> None:
        self.inner.close()


def _pipe(small: bool = True) -> tuple[int, int]:
    r, w = os.pipe()
    if small:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PAGE)  # Linux rounds up to one page
    return r, w


async def _writer_on(w: int, limits: Limits = SMALL) -> Writer:
    loop = asyncio.get_running_loop()
    writer = Writer(loop, limits)
    transport, _ = await loop.connect_write_pipe(lambda: WriteProtocol(writer), os.fdopen(w, "wb", buffering=0))
    writer.attach(transport)
    return writer


async def _reader_on(r: int, sink: Sink, framer: Any = None) -> tuple[asyncio.BaseTransport, PathRecorder]:
    loop = asyncio.get_running_loop()
    proto = PathRecorder(sink, framer or _framing_py.LineFramer(), 64 * 1024)
    transport, _ = await loop.connect_read_pipe(lambda: proto, os.fdopen(r, "rb", buffering=0))
    return transport, proto


def _msg(i: int, size: int = 0) -> bytes:
    head = b'{"jsonrpc":"2.0","method":"session/update","params":{"n":%d,"pad":"' % i
    pad = max(0, size - len(head) - 3)
    return head + b"x" * pad + b'"}}\n'


def _drain_to_eof(fd: int) -> bytes:
    """Read a non-blocking fd to EOF; BlockingIOError means the writer has not closed it."""
    os.set_blocking(fd, False)
    out = bytearray()
    while chunk := os.read(fd, 1 << 16):
        out += chunk
    return bytes(out)


async def _read_to_eof(fd: int) -> bytes:
    return await asyncio.get_running_loop().run_in_executor(None, _read_all_and_close, fd)


# -- coalescing --------------------------------------------------------------------------


def test_r26_writes_queued_in_one_loop_turn_leave_in_one_write(run: Any) -> None:
    async def main() -> None:
        r, w = _pipe(small=False)
        writer = await _writer_on(w)
        counting = CountingTransport(writer._transport)  # type: ignore[arg-type]
        writer.attach(counting)
        batch = [_msg(i) for i in range(100)]
        for m in batch:
            writer.write(m)
        assert counting.writes == []  # nothing leaves before the turn ends
        await counting.wrote.wait()
        counting.wrote.clear()
        writer.write(b"next\n")  # a later turn: a second write, not part of the first
        await counting.wrote.wait()
        assert counting.writes == [b"".join(batch), b"next\n"]
        await writer.close()
        assert await _read_to_eof(r) == b"".join(batch) + b"next\n"

    run(main())


# -- 100k lines through the real read and write paths ------------------------------------


def test_r26_100k_lines_round_trip_over_real_pipes_in_order(run: Any, loop_kind: str, framer_cls: type) -> None:
    count = 100_000

    async def main() -> None:
        r, w = _pipe(small=False)
        writer = await _writer_on(w, Limits())
        sink = Sink()
        transport, proto = await _reader_on(r, sink, framer_cls())
        for i in range(count):
            writer.write(b'{"i":%d}\n' % i)
            await writer.drain()
        await writer.close()
        await sink.eof.wait()
        assert len(sink.lines) == count
        assert sink.lines == [b'{"i":%d}' % i for i in range(count)]
        assert sink.eofs == [None] and sink.truncated == [] and sink.oversized == []
        # uvloop reads straight into our buffer; the stdlib pipe transport calls data_received.
        assert proto.paths == {"buffer_updated" if loop_kind == "uvloop" else "data_received"}
        transport.close()

    run(main())


# -- backpressure --------------------------------------------------------------------------


def test_r26_stalled_reader_bounds_the_buffer_and_loses_nothing_once_reading_resumes(run: Any) -> None:
    count, size = 400, 512  # 200 KiB: far beyond one page of pipe plus the 16 KiB high-water mark

    async def main() -> None:
        r, w = _pipe()
        writer = await _writer_on(w)
        paused = asyncio.Event()
        original_pause = writer.pause_writing

        def pause_writing() -> None:
            paused.set()
            original_pause()

        writer.pause_writing = pause_writing  # type: ignore[method-assign]
        most = 0
        sent = 0

        async def producer() -> None:
            nonlocal most, sent
            for i in range(count):
                writer.write(_msg(i, size))
                most = max(most, writer.buffered)
                await writer.drain()
                most = max(most, writer.buffered)
                sent += 1

        task = asyncio.create_task(producer())
        await paused.wait()  # nobody reads: the pipe and then the transport filled up
        assert not task.done()
        assert sent < count
        assert most <= SMALL.write_high_water + size

        sink = Sink()
        transport, _ = await _reader_on(r, sink)  # reading resumes
        await task
        await writer.close()
        await sink.eof.wait()
        assert most <= SMALL.write_high_water + size
        assert sink.lines == [_msg(i, size)[:-1] for i in range(count)]
        assert writer.failed is None
        transport.close()

    run(main())


def test_r26_drain_returns_at_once_below_the_high_water_mark(run: Any) -> None:
    async def main() -> None:
        r, w = _pipe(small=False)
        writer = await _writer_on(w)
        writer.write(_msg(1))
        step = writer.drain().__await__()
        with pytest.raises(StopIteration):  # completes without suspending
            next(step)
        await writer.close()
        assert await _read_to_eof(r) == _msg(1)

    run(main())


# -- close ------------------------------------------------------------------------------------


def test_r14_close_flushes_everything_written_before_it(run: Any) -> None:
    count, size = 100, 1024

    async def main() -> None:
        loop = asyncio.get_running_loop()
        r, w = _pipe()
        writer = await _writer_on(w)
        got = bytearray()
        os.set_blocking(r, False)

        def readable() -> None:
            with contextlib.suppress(BlockingIOError):
                got.extend(os.read(r, 1 << 16))

        loop.add_reader(r, readable)
        try:
            for i in range(count):  # no drain: the last ones still sit in the writer at close()
                writer.write(_msg(i, size))
            await writer.close()
        finally:
            loop.remove_reader(r)
        writer.write(b"after close\n")  # dropped quietly, never raises, nothing kept
        assert writer.buffered == 0
        # close() returned, so the write end is closed already: what is left is in the pipe.
        rest = _drain_to_eof(r)
        os.close(r)
        assert bytes(got) + rest == b"".join(_msg(i, size) for i in range(count))
        assert writer.failed is None

    run(main())


# -- broken pipe --------------------------------------------------------------------------------


def test_r13_broken_pipe_sets_failed_and_calls_on_failure_without_raising(run: Any) -> None:
    async def main() -> None:
        r, w = _pipe()
        writer = await _writer_on(w)
        calls: list[BaseException | None] = []
        failed = asyncio.Event()

        def on_failure(exc: BaseException | None) -> None:
            calls.append(exc)
            failed.set()

        writer.on_failure = on_failure
        os.close(r)
        writer.write(_msg(1))
        await failed.wait()
        assert isinstance(writer.failed, BrokenPipeError | ConnectionResetError)
        assert calls == [writer.failed]
        writer.write(_msg(2))  # the peer is gone: discarded, no exception, nothing kept
        assert writer.buffered == 0
        await writer.drain()
        await writer.close()
        assert calls == [writer.failed]

    run(main())


def test_r13_producer_blocked_in_drain_is_released_when_the_reader_goes_away(run: Any) -> None:
    async def main() -> None:
        r, w = _pipe()
        writer = await _writer_on(w)
        paused, failed = asyncio.Event(), asyncio.Event()
        original_pause = writer.pause_writing

        def pause_writing() -> None:
            paused.set()
            original_pause()

        writer.pause_writing = pause_writing  # type: ignore[method-assign]
        writer.on_failure = lambda exc: failed.set()
        sent = 0

        async def producer() -> int:
            nonlocal sent
            for i in range(400):
                writer.write(_msg(i, 512))
                await writer.drain()
                sent += 1
            return sent

        task = asyncio.create_task(producer())
        await paused.wait()
        blocked_at = sent
        assert not task.done()
        os.close(r)
        await failed.wait()
        assert await task == 400  # the producer ran to its end: no exception, no hang
        assert blocked_at < 400
        assert writer.failed is not None
        await writer.close()

    run(main())


# -- regular files (``agent < in.jsonl > out.jsonl``) ------------------------------------------


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.mark.parametrize(
    ("stdin_kind", "stdout_kind"),
    [("file", "file"), ("file", "pipe"), ("pipe", "file"), ("pipe", "pipe")],
    ids=["in_file-out_file", "in_file-out_pipe", "in_pipe-out_file", "in_pipe-out_pipe"],
)
def test_r26_connect_stdio_serves_regular_files_and_pipes(run: Any, stdin_kind: str, stdout_kind: str) -> None:
    data = b"".join(_msg(i, 200) for i in range(5000))  # ~1 MiB: several reads on the file path

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout:
            fin.write(data)
            fin.flush()
            fin.seek(0)
            if stdin_kind == "file":
                in_fd = fin.fileno()
            else:
                in_fd, feed_w = _pipe(small=False)
                feeder = loop.run_in_executor(None, _write_all_and_close, feed_w, data)
            if stdout_kind == "file":
                out_fd = fout.fileno()
            else:
                pipe_out, out_fd = _pipe(small=False)
                collected = loop.run_in_executor(None, _read_all_and_close, pipe_out)
            before = _open_fds()
            writer = Writer(loop, SMALL)
            sink = Sink(on_line=lambda line: writer.write(line + b"\n"))  # echo every line
            reader = ReadProtocol(sink, _framing_py.LineFramer(), 64 * 1024)
            await connect_stdio(loop, reader, writer, stdin_fd=in_fd, stdout_fd=out_fd)
            await sink.eof.wait()
            await writer.close()
            reader.close()
            assert sink.eofs == [None]
            assert sink.truncated == []
            # connect_stdio works on dups: the caller's descriptors stay open.
            os.fstat(in_fd)
            os.fstat(out_fd)
            if stdin_kind == "file" and stdout_kind == "file":
                # The file transports release their dups by EOF and close(), at once.
                assert _open_fds() <= before
            if stdin_kind == "pipe":
                await feeder
                os.close(in_fd)
            if stdout_kind == "file":
                fout.seek(0)
                echoed = fout.read()
            else:
                os.close(out_fd)
                echoed = await collected
            assert echoed == data

    run(main())


def _write_all_and_close(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _read_all_and_close(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        return f.read()


# -- ReadProtocol: both read paths, one framer --------------------------------------------------


def test_r25_both_read_paths_feed_the_same_framer(framer_cls: type) -> None:
    sink = Sink()
    proto = ReadProtocol(sink, framer_cls(max_line_bytes=64, head_bytes=8), 256)
    proto.data_received(b'{"a":1}\n{"b"')
    feed_buffered(proto, b':2}\n{"c":3}\n{"d"')  # completes a line the other path started
    proto.data_received(b":4}\r\n")
    feed_buffered(proto, b"x" * 70 + b"\n" + b"tail")
    assert sink.lines == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']
    assert sink.oversized == [Oversized(70, b"x" * 8)]
    proto.eof_received()
    proto.connection_lost(None)  # after EOF: reported once, not twice
    assert sink.truncated == [Truncated(4, b"tail", False)]
    assert sink.eofs == [None]


def test_r25_lines_delivered_from_the_read_buffer_are_consumed_before_it_is_reused(framer_cls: type) -> None:
    sink = Sink()
    proto = ReadProtocol(sink, framer_cls(), 64)
    feed_buffered(proto, b"first\nsecond\n")
    feed_buffered(proto, b"THIRD!\nFOURTH\n")  # overwrites the same bytes of the buffer
    assert sink.lines == [b"first", b"second", b"THIRD!", b"FOURTH"]


class _FakeReadTransport(asyncio.ReadTransport):
    """Records the calls ReadProtocol makes, in order; carries no bytes, so it is no second pipe."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.closing = False

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.calls.append("close")
        self.closing = True


def test_r26_pause_requested_before_the_transport_exists_is_applied_on_connection_made() -> None:
    sink = Sink()
    proto = ReadProtocol(sink, _framing_py.LineFramer(), 64)
    proto.pause_reading()
    transport = _FakeReadTransport()
    proto.connection_made(transport)
    assert transport.calls == ["pause"]
    assert sink.readers == [proto]
    proto.pause_reading()  # idempotent
    proto.resume_reading()
    proto.resume_reading()
    proto.close()
    proto.pause_reading()  # a closing transport is left alone
    assert transport.calls == ["pause", "resume", "close"]


def test_r26_a_chunk_delivered_after_a_pause_waits_and_keeps_its_order(framer_cls: type) -> None:
    """A transport may deliver once more after ``pause_reading``: those lines wait behind the pause."""
    sink = Sink()
    proto = ReadProtocol(sink, framer_cls(), 64)
    proto.connection_made(_FakeReadTransport())
    feed_buffered(proto, b"first\n")
    proto.pause_reading()
    feed_buffered(proto, b"second\nthird\n")
    proto.data_received(b"fourth\n")
    assert sink.lines == [b"first"]
    proto.resume_reading()
    assert sink.lines == [b"first", b"second", b"third", b"fourth"]


# The stdlib loop only: on uvloop a regression aborts the whole process (the
# subprocess test below covers uvloop without taking pytest down with it).
@pytest.mark.parametrize("loop_kind", ["asyncio"])
def test_r26_connect_stdio_serves_dev_null_which_the_loop_cannot_poll(run: Any) -> None:
    """``agent < /dev/null > /dev/null``: epoll refuses /dev/null and libuv aborts on it,
    so it must take the unpolled path: EOF at once, writes accepted and discarded."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        in_fd = os.open(os.devnull, os.O_RDONLY)
        out_fd = os.open(os.devnull, os.O_WRONLY)
        try:
            writer = Writer(loop, SMALL)
            sink = Sink()
            reader = ReadProtocol(sink, _framing_py.LineFramer(), 64 * 1024)
            await connect_stdio(loop, reader, writer, stdin_fd=in_fd, stdout_fd=out_fd)
            writer.write(b'{"jsonrpc":"2.0","method":"x"}\n')
            await sink.eof.wait()
            await writer.close()
            reader.close()
            assert sink.eofs == [None] and sink.lines == []
            assert writer.failed is None
        finally:
            os.close(in_fd)
            os.close(out_fd)

    run(main())


def test_r26_agent_process_runs_with_dev_null_for_stdin_and_stdout() -> None:
    """The same end to end: the real agent exits 0 instead of aborting in libuv."""
    import subprocess
    import sys

    with open(os.devnull, "rb") as devnull_in, open(os.devnull, "wb") as devnull_out:
        proc = subprocess.run(
            [sys.executable, "-m", "acp_fast", "demo"],
            stdin=devnull_in,
            stdout=devnull_out,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
