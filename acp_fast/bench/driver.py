"""``acp-fast bench``: end-to-end latency, throughput and cost over real pipes.

One driver, identical for every target, spawns each agent as a subprocess
and talks ACP to it over its stdin/stdout, in the same run, side by side:

- ``acp_fast``: the demo agent, ``python -m acp_fast demo``;
- ``sdk``: the same agent logic on the official Python SDK
  (``benchmarks/sdk_demo_agent.py``, the same python);
- ``floor``: ``benchmarks/echo_floor.py``, a uvloop+orjson process that
  answers every request at once, so its numbers are the pipe round trip.

Scenarios (all with the demo's ``stream N DELAY_MS`` prompt): cancel during
a long prompt and ``session/set_mode`` during a long prompt, each idle and
with 31 other sessions streaming at full speed; pipelined ``session/set_mode``
requests per second; ``session/update`` notifications per second from one
fast prompt and from 32; RSS per open session and per running prompt; and
handshake time (spawn to the ``session/new`` answer) next to a bare
``python -c "import asyncio, uvloop, orjson"``.

The driver is asyncio on uvloop with orjson. It reads each agent's stdout
through a 1 MiB zero-copy buffer, stamps each read once, on arrival, and
decodes only lines that carry an ``"id"`` (responses); notification lines
are counted, not parsed, so it stays far from being the bottleneck. Speed
is reported, never asserted: the goals are printed as met or missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

import orjson

_NOW = time.perf_counter_ns
_NL = orjson.OPT_APPEND_NEWLINE

#: Bytes the driver reads from an agent's stdout in one go.
READ_BUFFER_BYTES = 1024 * 1024
#: Bytes of an agent's stderr kept to explain a failure.
STDERR_TAIL_BYTES = 8 * 1024
#: Seconds any single wait may take before the run fails (a hang, not a result).
WAIT_TIMEOUT_S = 120.0
#: Seconds an agent gets to exit after its stdin closed.
EXIT_TIMEOUT_S = 15.0
#: Requests kept in flight by the pipelined throughput scenario.
PIPELINE_WINDOW = 256
#: Sessions streaming at full speed in the busy variants (plus the measured one).
BUSY_STREAMS = 31
#: Prompts run at once in the 32-prompt scenarios (the default pool size).
PROMPTS_AT_ONCE = 32
#: Effectively endless prompt length; such prompts always end by cancel.
ENDLESS = 1_000_000_000
#: Chunk period of the "long prompt" that the cancel and control rounds run beside.
LONG_PROMPT_DELAY_MS = 5
#: Chunk period of the prompts held open by the memory scenario.
IDLE_PROMPT_DELAY_MS = 1000

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
BARE_IMPORTS = "import asyncio, uvloop, orjson"


class BenchError(RuntimeError):
    """A target misbehaved or hung: the run is invalid, not slow."""


@dataclass(frozen=True)
class Sizes:
    cancels: int
    controls: int
    pipelined: int
    updates_one: int
    updates_each: int
    sessions: int
    handshakes: int


QUICK = Sizes(cancels=40, controls=40, pipelined=4000, updates_one=8000, updates_each=250, sessions=200, handshakes=3)
FULL = Sizes(
    cancels=300, controls=300, pipelined=30000, updates_one=60000, updates_each=2000, sessions=2000, handshakes=10
)


@dataclass(frozen=True)
class Target:
    name: str
    argv: tuple[str, ...]
    description: str


def default_targets(python: str, sdk_uvloop: bool = False) -> list[Target]:
    sdk = [python, str(BENCH_DIR / "sdk_demo_agent.py"), *(["--uvloop"] if sdk_uvloop else [])]
    return [
        Target("acp_fast", (python, "-m", "acp_fast", "demo"), "acp_fast demo agent (python -m acp_fast demo)"),
        Target("sdk", tuple(sdk), "same logic on the official SDK (benchmarks/sdk_demo_agent.py)"),
        Target("floor", (python, str(BENCH_DIR / "echo_floor.py")), "uvloop+orjson echo (benchmarks/echo_floor.py)"),
    ]


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# -- the agent under test ----------------------------------------------------------


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

    def __init__(self, target: Target) -> None:
        self.target = target
        self.loop = asyncio.get_running_loop()
        self.updates = 0
        self._tail = b""
        self._stderr = bytearray()
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[tuple[int, dict[str, Any]]]] = {}
        self._watch: bytes | None = None
        self._watch_fut: asyncio.Future[None] | None = None
        self._count_target = 0
        self._count_fut: asyncio.Future[None] | None = None
        self._pipeline: _Pipeline | None = None
        self._exited: asyncio.Future[None] = self.loop.create_future()
        self._eof = False
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
        watch = self._watch
        p = self._pipeline
        fast = p is not None and p.results is None
        for line in lines:
            if b'"id"' not in line:  # a notification: counted, not parsed
                self.updates += 1
                if watch is not None and watch in line:
                    watch = None
                    self._hit_watch()
            elif fast and b'"method"' not in line:
                # Nothing but the pipeline is in flight (pipeline() checks), so
                # every response is one of its answers: counted, not parsed.
                self._pipeline_answer(p, b'"result"' in line, now)  # type: ignore[arg-type]
            elif line:
                self._on_message(orjson.loads(line), now)
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
            raise BenchError(f"{self.target.name}: response for unknown id {rid!r}: {msg!r}")
        if not fut.done():
            fut.set_result((now, msg))

    def _on_stderr(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL_BYTES:
            del self._stderr[:-STDERR_TAIL_BYTES]

    def _on_stdout_eof(self) -> None:
        self._eof = True
        self._fail_all(f"{self.target.name} closed its stdout")

    def _on_exit(self) -> None:
        self.exited_ns = _NOW()
        if not self._exited.done():
            self._exited.set_result(None)

    def _fail_all(self, why: str) -> None:
        err = BenchError(f"{why}; stderr tail:\n{self.stderr_tail()}")
        futs: list[asyncio.Future[Any] | None] = [*self._pending.values(), self._watch_fut, self._count_fut]
        if self._pipeline is not None:
            futs.append(self._pipeline.done)
        self._pending.clear()
        for fut in futs:
            if fut is not None and not fut.done():
                fut.set_exception(err)

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")[-2000:]

    # -- outgoing ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._stdin is None or self._stdin.is_closing():
            raise BenchError(f"{self.target.name}: stdin is closed")
        self._stdin.write(data)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def start_request(self, method: str, params: Any) -> tuple[int, asyncio.Future[tuple[int, dict[str, Any]]]]:
        """Write a request now; the future gives (arrival ns, response)."""
        rid = self._new_id()
        fut: asyncio.Future[tuple[int, dict[str, Any]]] = self.loop.create_future()
        self._pending[rid] = fut
        line = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, option=_NL)
        sent = _NOW()
        self.write(line)
        return sent, fut

    async def request(self, method: str, params: Any) -> tuple[int, dict[str, Any]]:
        """Round trip one request: (nanoseconds, response)."""
        sent, fut = self.start_request(method, params)
        arrived, msg = await self.wait(fut, method)
        return arrived - sent, msg

    async def result(self, method: str, params: Any) -> Any:
        _, msg = await self.request(method, params)
        if "result" not in msg:
            raise BenchError(f"{self.target.name}: {method} failed: {msg!r}")
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

    async def updates_reach(self, count: int, prompts: Sequence[asyncio.Future[Any]] = ()) -> None:
        """Wait until ``count`` updates have arrived; fail at once if one of ``prompts`` is answered."""
        if self.updates >= count:
            return
        fut: asyncio.Future[None] = self.loop.create_future()
        self._count_target, self._count_fut = count, fut
        await self.wait(asyncio.wait([fut, *prompts], return_when=asyncio.FIRST_COMPLETED), f"{count} updates")
        if not fut.done():
            self._count_fut = None
            fut.cancel()
            ended = next(p for p in prompts if p.done())
            raise BenchError(f"{self.target.name}: a prompt ended before streaming: {ended.result()[1]!r}")

    async def streaming(self, seen: asyncio.Future[None], prompt: asyncio.Future[tuple[int, dict[str, Any]]]) -> None:
        """Wait for a prompt's first update; fail at once if the prompt is answered instead."""
        await self.wait(asyncio.wait([seen, prompt], return_when=asyncio.FIRST_COMPLETED), "a prompt's first update")
        if not seen.done():
            self._watch, self._watch_fut = None, None
            seen.cancel()
            raise BenchError(f"{self.target.name}: the prompt ended before streaming: {prompt.result()[1]!r}")

    async def wait(self, fut: Awaitable[Any], what: str) -> Any:
        try:
            return await asyncio.wait_for(fut, WAIT_TIMEOUT_S)
        except TimeoutError:
            raise BenchError(
                f"{self.target.name}: no answer to {what} after {WAIT_TIMEOUT_S:.0f} s; "
                f"stderr tail:\n{self.stderr_tail()}"
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
        if "result" not in msg:
            raise BenchError(f"{self.target.name}: session/new failed: {msg!r}")
        return arrived - self.spawned_ns, str(msg["result"]["sessionId"])

    async def new_session(self) -> str:
        result = await self.result("session/new", {"cwd": "/tmp", "mcpServers": []})
        return str(result["sessionId"])

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise BenchError(f"no VmRSS for pid {self.pid}")

    async def close(self) -> int | None:
        """Close stdin and wait for the exit; kill it if it hangs."""
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), EXIT_TIMEOUT_S)
        except TimeoutError:
            log(f"{self.target.name} did not exit {EXIT_TIMEOUT_S:.0f} s after EOF; killing it")
            if self._proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._exited
        if self._reader is not None:
            self._reader.close()
        code = self._proc.get_returncode() if self._proc is not None else None
        if self._proc is not None:
            self._proc.close()
        return code


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


# -- scenarios -------------------------------------------------------------------


@dataclass
class Latency:
    samples_ns: list[int] = field(default_factory=list)
    correct: int = 0

    def summary(self) -> dict[str, Any]:
        us = sorted(s / 1000 for s in self.samples_ns)
        return {
            "n": len(us),
            "correct": self.correct == len(us) and bool(us),
            "p50_us": percentile(us, 50),
            "p99_us": percentile(us, 99),
            "max_us": us[-1] if us else float("nan"),
            "mean_us": statistics.fmean(us) if us else float("nan"),
            "samples_us": [round(x, 2) for x in us],
        }


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


async def cancel_rounds(a: AgentProcess, sid: str, reps: int, rng: random.Random) -> Latency:
    """Start a long prompt, let it stream, cancel it; time cancel written -> "cancelled" read."""
    out = Latency()
    for _ in range(reps):
        seen = a.watch(sid)
        _, fut = a.start_request("session/prompt", prompt_params(sid, f"stream {ENDLESS} {LONG_PROMPT_DELAY_MS}"))
        await a.streaming(seen, fut)
        await asyncio.sleep(rng.uniform(0, LONG_PROMPT_DELAY_MS / 1000))  # land anywhere in the chunk period
        sent = a.notify("session/cancel", {"sessionId": sid})
        arrived, msg = await a.wait(fut, "the cancelled prompt's response")
        out.samples_ns.append(arrived - sent)
        if msg.get("result", {}).get("stopReason") == "cancelled":
            out.correct += 1
    return out


async def control_rounds(a: AgentProcess, sid: str, reps: int) -> Latency:
    """session/set_mode round trips, one at a time, while ``sid`` runs a long prompt."""
    out = Latency()
    seen = a.watch(sid)
    _, fut = a.start_request("session/prompt", prompt_params(sid, f"stream {ENDLESS} {LONG_PROMPT_DELAY_MS}"))
    await a.streaming(seen, fut)
    for i in range(reps):
        ns, msg = await a.request("session/set_mode", {"sessionId": sid, "modeId": ("code", "ask")[i % 2]})
        out.samples_ns.append(ns)
        if "result" in msg:
            out.correct += 1
    a.notify("session/cancel", {"sessionId": sid})
    _, msg = await a.wait(fut, "the long prompt's response")
    if msg.get("result", {}).get("stopReason") != "cancelled":
        out.correct = 0
    return out


async def start_busy(a: AgentProcess, sessions: list[str]) -> list[asyncio.Future[tuple[int, dict[str, Any]]]]:
    """Start endless full-speed prompts on ``sessions`` and wait until all of them stream."""
    base = a.updates
    futs = [a.start_request("session/prompt", prompt_params(s, f"stream {ENDLESS} 0"))[1] for s in sessions]
    await a.updates_reach(base + 50 * len(sessions), futs)
    return futs


async def stop_prompts(
    a: AgentProcess, sessions: list[str], futs: list[asyncio.Future[tuple[int, dict[str, Any]]]]
) -> bool:
    for s in sessions:
        a.notify("session/cancel", {"sessionId": s})
    answers = [await a.wait(f, "a cancelled prompt") for f in futs]
    return all(m.get("result", {}).get("stopReason") == "cancelled" for _, m in answers)


@dataclass
class Rate:
    count: int
    seconds: float
    correct: bool

    def summary(self) -> dict[str, Any]:
        per_s = self.count / self.seconds
        return {"count": self.count, "seconds": self.seconds, "per_s": per_s, "correct": self.correct}


async def throughput_requests(a: AgentProcess, sid: str, n: int) -> Rate:
    modes = [{"sessionId": sid, "modeId": "code"}, {"sessionId": sid, "modeId": "ask"}]
    start = _NOW()
    p = await a.pipeline("session/set_mode", lambda i: modes[i % 2], n)
    return Rate(n, (p.last_ns - start) / 1e9, p.ok == n)


async def throughput_updates(a: AgentProcess, sessions: list[str], each: int) -> Rate:
    await a.result("session/set_mode", {"sessionId": sessions[0], "modeId": "ask"})  # barrier
    base = a.updates
    start = _NOW()
    futs = [a.start_request("session/prompt", prompt_params(s, f"stream {each} 0"))[1] for s in sessions]
    answers = [await a.wait(f, "a streaming prompt") for f in futs]
    last = max(t for t, _ in answers)
    got = a.updates - base
    total = each * len(sessions)
    ended = all(m.get("result", {}).get("stopReason") == "end_turn" for _, m in answers)
    # Session-start announcements may still trickle in; anything else is wrong.
    return Rate(total, (last - start) / 1e9, ended and total <= got <= total + len(sessions))


# -- the run -----------------------------------------------------------------------


@dataclass
class Options:
    sizes: Sizes
    targets: list[Target]
    pin: bool
    seed: int


class Runner:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.results: dict[str, dict[str, Any]] = {}
        self.rng = random.Random(opts.seed)

    def put(self, scenario: str, target: str, value: dict[str, Any]) -> None:
        self.results.setdefault(scenario, {})[target] = value
        shown = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in value.items() if k != "samples_us"}
        log(f"  {target:9} {scenario}: {shown}")

    async def spawn(self, target: Target) -> tuple[AgentProcess, str]:
        a = AgentProcess(target)
        await a.start(pin_cpu=1 if self.opts.pin else None)
        _, sid = await a.handshake()
        return a, sid

    async def finish(self, a: AgentProcess) -> None:
        code = await a.close()
        if code not in (0, None):
            log(f"{a.target.name} exited with {code}; stderr tail:\n{a.stderr_tail()}")

    async def run(self) -> None:
        if self.opts.pin:
            os.sched_setaffinity(0, {0})
        s = self.opts.sizes
        log("handshake vs bare python start")
        await self.handshakes(s.handshakes)
        for t in self.opts.targets:
            log(f"{t.name}: idle latency and throughput")
            await self.idle_group(t)
        for t in self.opts.targets:
            log(f"{t.name}: latency with {BUSY_STREAMS} sessions streaming at full speed")
            await self.busy_group(t)
        for t in self.opts.targets:
            log(f"{t.name}: memory")
            await self.memory(t)

    async def handshakes(self, reps: int) -> None:
        bare = Target("bare", (sys.executable, "-c", BARE_IMPORTS), f'python -c "{BARE_IMPORTS}"')
        samples: dict[str, list[int]] = {t.name: [] for t in [bare, *self.opts.targets]}
        for _ in range(reps):
            b = AgentProcess(bare)
            await b.start()
            await b.wait(asyncio.shield(b._exited), "the bare python start")
            samples["bare"].append(b.exited_ns - b.spawned_ns)
            await b.close()
            for t in self.opts.targets:
                a = AgentProcess(t)
                await a.start()
                ns, _ = await a.handshake()
                samples[t.name].append(ns)
                await self.finish(a)
        for name, values in samples.items():
            ms = sorted(v / 1e6 for v in values)
            self.put("handshake", name, {"n": len(ms), "p50_ms": percentile(ms, 50), "min_ms": ms[0], "correct": True})

    async def idle_group(self, t: Target) -> None:
        s = self.opts.sizes
        a, sid = await self.spawn(t)
        try:
            self.put("cancel_idle", t.name, (await cancel_rounds(a, sid, s.cancels, self.rng)).summary())
            self.put("control_idle", t.name, (await control_rounds(a, sid, s.controls)).summary())
            self.put("requests_per_s", t.name, (await throughput_requests(a, sid, s.pipelined)).summary())
            self.put("updates_per_s_1", t.name, (await throughput_updates(a, [sid], s.updates_one)).summary())
            more = [sid] + [await a.new_session() for _ in range(PROMPTS_AT_ONCE - 1)]
            rate = await throughput_updates(a, more, s.updates_each)
            self.put(f"updates_per_s_{PROMPTS_AT_ONCE}", t.name, rate.summary())
        finally:
            await self.finish(a)

    async def busy_group(self, t: Target) -> None:
        s = self.opts.sizes
        a, sid = await self.spawn(t)
        try:
            busy = [await a.new_session() for _ in range(BUSY_STREAMS)]
            futs = await start_busy(a, busy)
            cancel = (await cancel_rounds(a, sid, s.cancels, self.rng)).summary()
            control = (await control_rounds(a, sid, s.controls)).summary()
            ok = await stop_prompts(a, busy, futs)
            cancel["correct"] = cancel["correct"] and ok
            control["correct"] = control["correct"] and ok
            self.put("cancel_busy", t.name, cancel)
            self.put("control_busy", t.name, control)
        finally:
            await self.finish(a)

    async def memory(self, t: Target) -> None:
        s = self.opts.sizes
        a, sid = await self.spawn(t)
        try:
            await a.result("session/set_mode", {"sessionId": sid, "modeId": "ask"})
            rss0 = a.rss_bytes()
            new = {"cwd": "/tmp", "mcpServers": []}
            p = await a.pipeline("session/new", lambda _i: new, s.sessions, keep=True)
            await a.result("session/set_mode", {"sessionId": sid, "modeId": "ask"})
            rss1 = a.rss_bytes()
            ids = [str(r["sessionId"]) for r in (p.results or [])[:PROMPTS_AT_ONCE]]
            base = a.updates
            futs = [
                a.start_request("session/prompt", prompt_params(i, f"stream {ENDLESS} {IDLE_PROMPT_DELAY_MS}"))[1]
                for i in ids
            ]
            await a.updates_reach(base + len(ids), futs)
            await a.result("session/set_mode", {"sessionId": sid, "modeId": "ask"})
            rss2 = a.rss_bytes()
            ok = await stop_prompts(a, ids, futs)
            self.put(
                "memory",
                t.name,
                {
                    "rss_start_mib": rss0 / 2**20,
                    "per_session_kib": (rss1 - rss0) / s.sessions / 1024,
                    "per_prompt_kib": (rss2 - rss1) / len(ids) / 1024,
                    "sessions": s.sessions,
                    "prompts": len(ids),
                    "correct": p.ok == s.sessions and ok,
                },
            )
        finally:
            await self.finish(a)


# -- reporting -------------------------------------------------------------------

# (label, scenario, key, lower is better, format)
ROWS: list[tuple[str, str, str, bool, str]] = [
    ("cancel idle p50 (us)", "cancel_idle", "p50_us", True, "{:,.0f}"),
    ("cancel idle p99 (us)", "cancel_idle", "p99_us", True, "{:,.0f}"),
    ("cancel idle max (us)", "cancel_idle", "max_us", True, "{:,.0f}"),
    ("cancel 31 busy p50 (us)", "cancel_busy", "p50_us", True, "{:,.0f}"),
    ("cancel 31 busy p99 (us)", "cancel_busy", "p99_us", True, "{:,.0f}"),
    ("cancel 31 busy max (us)", "cancel_busy", "max_us", True, "{:,.0f}"),
    ("set_mode idle p50 (us)", "control_idle", "p50_us", True, "{:,.0f}"),
    ("set_mode idle p99 (us)", "control_idle", "p99_us", True, "{:,.0f}"),
    ("set_mode 31 busy p50 (us)", "control_busy", "p50_us", True, "{:,.0f}"),
    ("set_mode 31 busy p99 (us)", "control_busy", "p99_us", True, "{:,.0f}"),
    ("pipelined set_mode (req/s)", "requests_per_s", "per_s", False, "{:,.0f}"),
    ("updates/s, 1 prompt", "updates_per_s_1", "per_s", False, "{:,.0f}"),
    (f"updates/s, {PROMPTS_AT_ONCE} prompts", f"updates_per_s_{PROMPTS_AT_ONCE}", "per_s", False, "{:,.0f}"),
    ("handshake p50 (ms)", "handshake", "p50_ms", True, "{:,.1f}"),
    ("RSS at start (MiB)", "memory", "rss_start_mib", True, "{:,.1f}"),
    ("RSS per open session (KiB)", "memory", "per_session_kib", True, "{:,.2f}"),
    ("RSS per running prompt (KiB)", "memory", "per_prompt_kib", True, "{:,.1f}"),
]


def _get(results: dict[str, dict[str, Any]], scenario: str, target: str, key: str) -> float | None:
    value = results.get(scenario, {}).get(target, {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def table(results: dict[str, dict[str, Any]], names: list[str]) -> str:
    head = ["metric", *names, "acp_fast/sdk", "acp_fast/floor"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for label, scenario, key, _lower, fmt in ROWS:
        cells = [label]
        for n in names:
            v = _get(results, scenario, n, key)
            ok = results.get(scenario, {}).get(n, {}).get("correct", True)
            cells.append("-" if v is None else fmt.format(v) + ("" if ok else " (WRONG)"))
        mine = _get(results, scenario, "acp_fast", key)
        cells.append(_ratio(mine, _get(results, scenario, "sdk", key)))
        cells.append(_ratio(mine, _get(results, scenario, "floor", key)))
        lines.append("| " + " | ".join(cells) + " |")
    bare = _get(results, "handshake", "bare", "p50_ms")
    if bare is not None:
        lines.append(f'| bare `python -c "{BARE_IMPORTS}"` p50 (ms) | {bare:,.1f} |' + " |" * (len(head) - 2))
    return "\n".join(lines)


@dataclass
class Goal:
    text: str
    met: bool | None
    detail: str


def goals(results: dict[str, dict[str, Any]]) -> list[Goal]:
    out: list[Goal] = []

    def bound(text: str, scenario: str, key: str, peer: str, peer_key: str, limit: float, at_most: bool) -> None:
        mine, other = _get(results, scenario, "acp_fast", key), _get(results, scenario, peer, peer_key)
        if mine is None or other is None or other == 0:
            out.append(Goal(text, None, "not measured"))
            return
        r = mine / other
        out.append(Goal(text, r <= limit if at_most else r >= limit, f"{r:.2f}x ({mine:,.1f} vs {other:,.1f})"))

    for kind, label in (("cancel", "cancel"), ("control", "set_mode")):
        bound(f"{label} p99 idle <= 2x floor p99 idle", f"{kind}_idle", "p99_us", "floor", "p99_us", 2.0, True)
        bound(f"{label} p99 31-busy <= 5x floor p99 31-busy", f"{kind}_busy", "p99_us", "floor", "p99_us", 5.0, True)
    bound("pipelined requests/s >= 0.7x floor", "requests_per_s", "per_s", "floor", "per_s", 0.7, False)
    bound("pipelined requests/s >= 5x sdk", "requests_per_s", "per_s", "sdk", "per_s", 5.0, False)
    bound("updates/s (1 prompt) >= 0.7x floor", "updates_per_s_1", "per_s", "floor", "per_s", 0.7, False)
    n = PROMPTS_AT_ONCE
    bound(f"updates/s ({n} prompts) >= 0.7x floor", f"updates_per_s_{n}", "per_s", "floor", "per_s", 0.7, False)
    mine, bare = _get(results, "handshake", "acp_fast", "p50_ms"), _get(results, "handshake", "bare", "p50_ms")
    if mine is not None and bare:
        out.append(Goal("handshake <= 1.5x bare python start", mine / bare <= 1.5, f"{mine / bare:.2f}x"))
    behind = []
    for label, scenario, key, lower, _fmt in ROWS:
        m, o = _get(results, scenario, "acp_fast", key), _get(results, scenario, "sdk", key)
        if m is not None and o is not None and (m > o if lower else m < o):
            behind.append(label)
    out.append(Goal("no row where acp_fast is behind the sdk", not behind, ", ".join(behind) or "none behind"))
    wrong = [f"{sc}/{t}" for sc, per in results.items() for t, v in per.items() if not v.get("correct", True)]
    out.append(Goal("every answer was correct", not wrong, ", ".join(wrong) or "all correct"))
    return out


def plot(results: dict[str, dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not importable; no plot (pip install matplotlib)")
        return False
    panels = [
        ("cancel_idle", "cancel, idle"),
        ("cancel_busy", "cancel, 31 busy"),
        ("control_idle", "set_mode, idle"),
        ("control_busy", "set_mode, 31 busy"),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (scenario, title) in zip(axes.flat, panels, strict=True):
        for target, value in results.get(scenario, {}).items():
            xs = value.get("samples_us") or []
            if xs:
                ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=target, drawstyle="steps-post")
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("latency (us, log)")
        ax.set_ylabel("fraction of requests")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("acp-fast bench: latency CDF (cancel written -> answer read)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _meta(opts: Options, argv: Sequence[str], seconds: float) -> dict[str, Any]:
    try:
        uv: str | None = version("uvloop")
    except PackageNotFoundError:  # pragma: no cover
        uv = None
    return {
        "argv": list(argv),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg(),
        "uvloop": uv,
        "orjson": orjson.__version__,
        "sizes": opts.sizes.__dict__,
        "targets": {t.name: {"argv": list(t.argv), "description": t.description} for t in opts.targets},
        "pinned": opts.pin,
        "seconds": seconds,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="acp-fast bench", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small counts (well under a minute)")
    p.add_argument("--json", type=Path, default=Path("bench-results/latest.json"), help="results file")
    p.add_argument("--plot", type=Path, default=None, help="latency CDF PNG (default: next to --json)")
    p.add_argument("--no-plot", action="store_true", help="skip the plot")
    p.add_argument("--targets", default="acp_fast,sdk,floor", help="comma-separated subset of acp_fast,sdk,floor")
    p.add_argument("--sdk-uvloop", action="store_true", help="run the SDK agent on uvloop instead of asyncio")
    p.add_argument("--pin", action="store_true", help="pin the driver to CPU 0 and agents to CPU 1")
    p.add_argument("--seed", type=int, default=1, help="seed of the cancel-timing jitter")
    for f in Sizes.__dataclass_fields__:
        p.add_argument("--" + f.replace("_", "-"), type=int, default=None, help=f"override the {f} count")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = Sizes(**{f: getattr(args, f) or getattr(base, f) for f in Sizes.__dataclass_fields__})
    wanted = [n.strip() for n in args.targets.split(",") if n.strip()]
    known = {t.name: t for t in default_targets(sys.executable, args.sdk_uvloop)}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        print(f"acp-fast bench: unknown target(s) {unknown}; choose from {sorted(known)}", file=sys.stderr)
        return 2
    missing = [n for n in wanted if n != "acp_fast" and not Path(known[n].argv[1]).exists()]
    if missing:
        print(f"acp-fast bench: {BENCH_DIR} is missing (run from a source checkout)", file=sys.stderr)
        return 2
    opts = Options(sizes, [known[n] for n in wanted], args.pin, args.seed)
    runner = Runner(opts)
    started = time.monotonic()
    try:
        _run_loop(runner.run)
    except BenchError as exc:
        print(f"acp-fast bench: {exc}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    names = [t.name for t in opts.targets]
    report: dict[str, Any] = {"meta": _meta(opts, argv, seconds), "results": runner.results}
    print(
        f"acp-fast bench{' --quick' if args.quick else ''}: python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {seconds:.0f} s, load {os.getloadavg()[0]:.2f}"
    )
    print()
    print(table(runner.results, names))
    print()
    checked = goals(runner.results)
    for g in checked:
        mark = "n/a " if g.met is None else ("MET " if g.met else "MISS")
        print(f"  [{mark}] {g.text}: {g.detail}")
    report["goals"] = [g.__dict__ for g in checked]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1))
    print(f"\nresults: {args.json}")
    if not args.no_plot:
        png = args.plot or args.json.with_suffix(".png")
        if plot(runner.results, png):
            print(f"plot: {png}")
    return 0


def _run_loop(fn: Callable[[], Any]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(fn())
        return
    uvloop.run(fn())


__all__ = ["AgentProcess", "BenchError", "Sizes", "Target", "main"]
