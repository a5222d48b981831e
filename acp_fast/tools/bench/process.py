"""The driver's side of one agent process: spawn, pipes, request ids, waits with a timeout.

Reads go through a 1 MiB zero-copy buffer, each read is stamped once on
arrival, and only lines that carry an ``"id"`` are decoded (responses and
agent requests); notification lines are counted, not parsed, so the driver
stays far from being the bottleneck. A misbehaving agent (exits, closes
stdout, writes a line that is not JSON, answers an id never sent) fails
every wait at once with a :class:`BenchError`; a silent one fails each wait
at its timeout. Nothing here raises from inside a protocol callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import orjson

from . import proc_stats
from .targets import Target

_NOW = time.perf_counter_ns
#: The kernel's per-process CPU clock type that counts scheduler runtime (include/linux/posix-timers.h).
_NL = orjson.OPT_APPEND_NEWLINE

#: Bytes the driver reads from an agent's stdout in one go.
READ_BUFFER_BYTES = 1024 * 1024
#: Longest stdout line the driver buffers; a longer one fails the target (no unbounded buffer).
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Bytes of an agent's stderr kept to explain a failure.
STDERR_TAIL_BYTES = 8 * 1024
#: Seconds any single wait may take by default before it counts as a hang (``--timeout``).
WAIT_TIMEOUT_S = 120.0
#: Seconds an agent gets to exit after its stdin closed before it is killed.
EXIT_TIMEOUT_S = 15.0
#: Requests kept in flight by the pipelined throughput scenario.
PIPELINE_WINDOW = 256

Response = tuple[int, dict[str, Any]]


class BenchError(RuntimeError):
    """A target misbehaved or hung: the measurement is invalid, not slow."""


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class _Pipeline:
    """Requests ``lo..hi`` kept ``window`` deep; finished when all are answered.

    Lines are encoded batch by batch as they are sent: holding many small
    orjson outputs alive at once is slow (each is its own allocation).
    """

    __slots__ = (
        "done",
        "encode",
        "hi",
        "last_ns",
        "lo",
        "next",
        "ok",
        "outstanding",
        "received",
        "results",
        "total",
        "window",
    )

    def __init__(
        self, lo: int, total: int, encode: Callable[[int], bytes], window: int, done: asyncio.Future[None], keep: bool
    ) -> None:
        self.lo = lo
        self.hi = lo + total
        self.total = total
        self.encode = encode
        self.window = window
        self.next = 0
        self.outstanding = 0
        self.received = 0
        self.ok = 0
        self.last_ns = 0
        self.done = done
        self.results: list[Any] | None = [] if keep else None


class _Stdout(asyncio.BufferedProtocol):
    def __init__(self, owner: AgentProcess) -> None:
        self._owner = owner
        self._view = memoryview(bytearray(READ_BUFFER_BYTES))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self._owner._on_stdout(bytes(self._view[:nbytes]))

    def eof_received(self) -> bool:
        self._owner._on_stdout_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._on_stdout_eof()


class _Proc(asyncio.SubprocessProtocol):
    def __init__(self, owner: AgentProcess) -> None:
        self._owner = owner

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self._owner._on_stderr(bytes(data))

    def process_exited(self) -> None:
        self._owner._on_exit()


class AgentProcess:
    """One spawned target and the driver's side of its pipes."""

    def __init__(self, target: Target, timeout: float = WAIT_TIMEOUT_S) -> None:
        self.target = target
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.updates = 0
        self._tail = b""
        self._stderr = bytearray()
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Response]] = {}
        self._watch: bytes | None = None
        self._watch_fut: asyncio.Future[None] | None = None
        self._count_target = 0
        self._count_fut: asyncio.Future[None] | None = None
        self._pipeline: _Pipeline | None = None
        self._exited: asyncio.Future[None] = self.loop.create_future()
        self._broken: BenchError | None = None
        self._proc: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._reader: asyncio.BaseTransport | None = None
        self.spawned_ns = 0
        self.exited_ns = 0
        self.pid = 0

    async def start(self, pin_cpu: int | None = None) -> None:
        read_fd, write_fd = os.pipe()
        self.spawned_ns = _NOW()
        try:
            proc, _ = await self.loop.subprocess_exec(
                lambda: _Proc(self),
                *self.target.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_fd,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            os.close(read_fd)
            raise BenchError(f"{self.target.name}: cannot start {self.target.argv[0]!r}: {exc}") from None
        finally:
            os.close(write_fd)
        self._proc = proc
        self.pid = proc.get_pid()
        if pin_cpu is not None:
            os.sched_setaffinity(self.pid, {pin_cpu})
        # uvloop's pipe transports do not subclass asyncio.WriteTransport.
        self._stdin = cast(asyncio.WriteTransport, proc.get_pipe_transport(0))
        self._reader, _ = await self.loop.connect_read_pipe(
            lambda: _Stdout(self), os.fdopen(read_fd, "rb", buffering=0)
        )

    # -- incoming ---------------------------------------------------------------
    def _on_stdout(self, data: bytes) -> None:
        now = _NOW()
        if self._tail:
            data = self._tail + data
        lines = data.split(b"\n")
        self._tail = lines.pop()
        if len(self._tail) > MAX_LINE_BYTES:
            self._tail = b""
            self._fail_all(f"{self.target.name} wrote a line longer than {MAX_LINE_BYTES} bytes")
            return
        watch = self._watch
        p = self._pipeline
        fast = p is not None and p.results is None
        for line in lines:
            if not line.strip():
                continue
            if b'"id"' not in line:  # a notification: counted, not parsed
                self.updates += 1
                if watch is not None and watch in line:
                    watch = None
                    self._hit_watch()
            elif fast and b'"method"' not in line:
                # Nothing but the pipeline is in flight (pipeline() checks), so
                # every response is one of its answers: counted, not parsed.
                self._pipeline_answer(p, b'"result"' in line, now)  # type: ignore[arg-type]
            else:
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self._fail_all(f"{self.target.name} wrote a line that is not JSON: {line[:200]!r}")
                    return
                if isinstance(msg, dict):
                    if watch is not None and "id" not in msg and watch in line:
                        watch = None  # a notification whose params hold a key named "id"
                        self._hit_watch()
                    self._on_message(msg, now)
                else:
                    self._fail_all(f"{self.target.name} wrote a JSON line that is not an object: {line[:200]!r}")
                    return
        if self._count_fut is not None and self.updates >= self._count_target:
            fut, self._count_fut = self._count_fut, None
            if not fut.done():
                fut.set_result(None)

    def _hit_watch(self) -> None:
        fut, self._watch, self._watch_fut = self._watch_fut, None, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_message(self, msg: dict[str, Any], now: int) -> None:
        if "method" in msg:
            self.updates += 1
            if "id" in msg:  # the agent asked us something: the bench client has no capabilities
                err = {"code": -32601, "message": "the bench client implements no methods"}
                with contextlib.suppress(BenchError):  # its stdin is gone: nobody to answer
                    self.write(orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": err}, option=_NL))
            return
        rid = msg.get("id")
        p = self._pipeline
        if p is not None and type(rid) is int and p.lo <= rid < p.hi:
            if p.results is not None:
                p.results.append(msg.get("result"))
            self._pipeline_answer(p, "result" in msg, now)
            return
        fut = self._pending.pop(rid, None) if type(rid) is int else None
        if fut is None:
            self._fail_all(f"{self.target.name}: response for an id never sent or already answered: {msg!r}"[:500])
            return
        if not fut.done():
            fut.set_result((now, msg))

    def _on_stderr(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL_BYTES:
            del self._stderr[:-STDERR_TAIL_BYTES]

    def _on_stdout_eof(self) -> None:
        self._fail_all(f"{self.target.name} closed its stdout")

    def _on_exit(self) -> None:
        self.exited_ns = _NOW()
        if not self._exited.done():
            self._exited.set_result(None)

    def _fail_all(self, why: str) -> None:
        """Fail every wait now and every later one at once: the connection is unusable."""
        if self._broken is not None:
            return
        err = self._broken = BenchError(f"{why}; stderr tail:\n{self.stderr_tail()}")
        futs: list[asyncio.Future[Any] | None] = [*self._pending.values(), self._watch_fut, self._count_fut]
        if self._pipeline is not None:
            futs.append(self._pipeline.done)
        self._pending.clear()
        for fut in futs:
            if fut is not None and not fut.done():
                fut.set_exception(err)
                fut.exception()  # a waiter still gets it; a future nobody awaits any more must not log it

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")[-2000:]

    # -- outgoing ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._broken is not None:
            raise self._broken
        if self._stdin is None or self._stdin.is_closing():
            raise BenchError(f"{self.target.name}: stdin is closed")
        self._stdin.write(data)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def start_request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Response]]:
        """Write a request now; the future gives (arrival ns, response)."""
        rid = self._new_id()
        line = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, option=_NL)
        fut: asyncio.Future[Response] = self.loop.create_future()
        sent = _NOW()
        self.write(line)
        self._pending[rid] = fut
        return sent, fut

    async def request(self, method: str, params: Any, within: float | None = None) -> tuple[int, dict[str, Any]]:
        """Round trip one request: (nanoseconds, response)."""
        sent, fut = self.start_request(method, params)
        arrived, msg = await self.wait(fut, method, within)
        return arrived - sent, msg

    async def result(self, method: str, params: Any, within: float | None = None) -> Any:
        _, msg = await self.request(method, params, within)
        if "result" not in msg:
            raise BenchError(f"{self.target.name}: {method} answered {describe(msg)}")
        return msg["result"]

    def notify(self, method: str, params: Any) -> int:
        """Write a notification; returns the ns just before the write."""
        line = orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params}, option=_NL)
        sent = _NOW()
        self.write(line)
        return sent

    def watch(self, session_id: str) -> asyncio.Future[None]:
        """A future set by the next notification that names ``session_id``."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self._watch = orjson.dumps(session_id)
        self._watch_fut = fut
        return fut

    async def updates_reach(self, count: int, prompts: Sequence[asyncio.Future[Response]] = ()) -> None:
        """Wait until ``count`` updates have arrived; fail at once if one of ``prompts`` is answered."""
        if self.updates >= count:
            return
        fut: asyncio.Future[None] = self.loop.create_future()
        self._count_target, self._count_fut = count, fut
        try:
            await self.wait(asyncio.wait([fut, *prompts], return_when=asyncio.FIRST_COMPLETED), f"{count} updates")
        finally:
            if self._count_fut is fut:
                self._count_fut = None
        if not fut.done():
            fut.cancel()
            ended = next(p for p in prompts if p.done())
            raise BenchError(f"{self.target.name}: a prompt ended before streaming: {describe(ended.result()[1])}")
        fut.result()  # raises when the connection broke meanwhile

    async def streaming(
        self, seen: asyncio.Future[None], prompt: asyncio.Future[Response], within: float | None = None
    ) -> None:
        """Wait for a prompt's first update; fail at once if the prompt is answered instead."""
        what = "a prompt's first update"
        try:
            await self.wait(asyncio.wait([seen, prompt], return_when=asyncio.FIRST_COMPLETED), what, within)
        finally:
            if self._watch_fut is seen:
                self._watch, self._watch_fut = None, None
        if not seen.done():
            seen.cancel()
            raise BenchError(f"{self.target.name}: the prompt ended before streaming: {describe(prompt.result()[1])}")
        seen.result()

    async def wait_exit(self) -> None:
        await self.wait(asyncio.shield(self._exited), "the process exit")

    async def wait(self, fut: Awaitable[Any], what: str, within: float | None = None) -> Any:
        """``await fut``, but never longer than ``within`` seconds (default: this process's timeout)."""
        limit = self.timeout if within is None else within
        try:
            return await asyncio.wait_for(fut, limit)
        except TimeoutError:
            raise BenchError(
                f"{self.target.name}: no answer to {what} after {limit:g} s; stderr tail:\n{self.stderr_tail()}"
            ) from None

    async def pipeline(self, method: str, params_of: Callable[[int], Any], total: int, keep: bool = False) -> _Pipeline:
        """Send ``total`` requests, PIPELINE_WINDOW in flight; wait for all answers.

        Nothing else may be in flight meanwhile: unless ``keep`` asks for the
        results, the answers are counted by line without being decoded.
        """
        if self._pending or self._pipeline is not None:
            raise BenchError("pipeline() needs a quiet connection")
        lo = self._next_id + 1
        self._next_id += total
        head = b'{"jsonrpc":"2.0","method":' + orjson.dumps(method) + b',"id":'
        dumps = orjson.dumps

        def encode(i: int) -> bytes:
            return b'%s%d,"params":%s}\n' % (head, lo + i, dumps(params_of(i)))

        p = _Pipeline(lo, total, encode, PIPELINE_WINDOW, self.loop.create_future(), keep)
        self._pipeline = p
        self._pipeline_refill(p)
        try:
            await self.wait(p.done, f"{total} pipelined {method}")
        finally:
            self._pipeline = None
        return p

    def _pipeline_refill(self, p: _Pipeline) -> None:
        room = min(p.window - p.outstanding, p.total - p.next)
        if room <= 0:
            return
        encode = p.encode
        data = b"".join([encode(i) for i in range(p.next, p.next + room)])
        p.next += room
        p.outstanding += room
        self.write(data)

    def _pipeline_answer(self, p: _Pipeline, ok: bool, now: int) -> None:
        p.outstanding -= 1
        p.received += 1
        p.last_ns = now
        p.ok += ok
        if p.received == p.total:
            if not p.done.done():
                p.done.set_result(None)
        elif p.outstanding <= p.window // 2:
            self._pipeline_refill(p)

    # -- ACP steps --------------------------------------------------------------
    async def handshake(self) -> tuple[int, str]:
        """initialize + session/new; returns (ns since spawn, session id)."""
        await self.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        _, fut = self.start_request("session/new", {"cwd": "/tmp", "mcpServers": []})
        arrived, msg = await self.wait(fut, "session/new")
        return arrived - self.spawned_ns, self._session_id(msg)

    async def new_session(self) -> str:
        _, msg = await self.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        return self._session_id(msg)

    def _session_id(self, msg: dict[str, Any]) -> str:
        result = msg.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise BenchError(f"{self.target.name}: session/new answered {describe(msg)}")
        return str(result["sessionId"])

    def cpu_ns(self) -> int | None:
        """CPU time the agent process has run so far (all threads), in ns; see ``idle_cpu_ns``."""
        return proc_stats.cpu_ns(self.pid)

    async def idle_cpu_ns(self) -> int | None:
        """``cpu_ns`` once the agent sleeps (at most ``proc_stats.IDLE_WAIT_S`` later)."""
        return await proc_stats.idle_cpu_ns(self.pid)

    def rss_bytes(self) -> int:
        """Resident memory of the spawned process (Linux /proc only)."""
        try:
            return proc_stats.rss_bytes(self.pid)
        except OSError as exc:
            raise BenchError(f"{self.target.name}: cannot read its memory use: {exc}") from None
        except ValueError as exc:
            raise BenchError(f"{self.target.name}: {exc}") from None

    async def close(self, grace: float = EXIT_TIMEOUT_S) -> int | None:
        """Close stdin and wait ``grace`` seconds for the exit, then kill it."""
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()
        if self._proc is None:
            return None
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), grace)
        except TimeoutError:
            if grace > 0:
                log(f"{self.target.name} did not exit {grace:g} s after EOF; killing it")
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await asyncio.wait_for(asyncio.shield(self._exited), EXIT_TIMEOUT_S)
        if self._reader is not None:
            self._reader.close()
        code = self._proc.get_returncode() if self._proc is not None else None
        if self._proc is not None:
            self._proc.close()
        return code


def describe(msg: dict[str, Any]) -> str:
    """A response in a few words: the error code and message, or the result."""
    err = msg.get("error")
    if isinstance(err, dict):
        return f"error {err.get('code')} ({str(err.get('message'))[:120]})"
    return repr(msg.get("result", msg))[:200]


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
