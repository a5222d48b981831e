"""In-process cost of one cancel: ``session/cancel`` in, the prompt's ``cancelled`` answer out.

    python benchmarks/cancel_path.py [--rounds 2000] [--loop uvloop|asyncio] [--profile] [--gc-default]

The server is acp_fast's real chain (ReadProtocol -> Connection -> AgentServer
-> Writer) serving the demo agent over the product's in-memory transport
(acp_fast.peer.memory.MemoryTransport, delivering inside ``write``), with no
socket in between: what is left is the runtime's own work. Each round starts
``stream 100000 1`` (an update every millisecond, the hosting bench's cancel
workload), waits for its first update, then feeds one ``session/cancel`` line
and stops the clock when the ``cancelled`` answer reaches the transport.

Printed: the wall time and the thread CPU time from the cancel line to the
answer (median, p99, in µs) and, with ``--profile``, the Python calls made in
that span per cancel (cProfile, enabled for the span only) and the ten
functions that count most. The span includes one loop iteration: the prompt
task wakes with its cancellation on the loop's next turn, as it would over a
socket. "read side" is the part spent inside the write of the cancel line
(framing, decoding, the cancel handler: token set, task cancelled); the
rest is the loop turn, the prompt's unwind and the answer. The thread CPU
clock costs about half a microsecond a read, inside the span. The collector
is set up as ``acp-fast demo`` sets it unless ``--gc-default``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import time
from typing import Any

import orjson
import uvloop

from acp_fast.agent.serve import YOUNG_GC_THRESHOLD
from acp_fast.agent.server import AgentServer
from acp_fast.demo import DemoAgent
from acp_fast.peer.connection import Connection
from acp_fast.peer.memory import MemoryTransport, Unwatched
from acp_fast.peer.reader import ReadProtocol
from acp_fast.peer.writer import Writer
from acp_fast.wire.framing import LineFramer
from acp_fast.wire.limits import Limits


class _Sink:
    """The client's read end: marks the first update and the answer with the time they arrived."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tail = b""
        self.first_update: asyncio.Future[None] | None = None
        self.answer: asyncio.Future[tuple[float, float, bytes]] | None = None
        self.profiler: cProfile.Profile | None = None
        self.opened: asyncio.Future[str] = loop.create_future()

    def __call__(self, data: bytes) -> None:
        parts = (self.tail + data).split(b"\n")
        self.tail = parts.pop()
        for line in parts:
            if not self.opened.done():
                if b'"sessionId"' in line:
                    self.opened.set_result(orjson.loads(line)["result"]["sessionId"])
            elif b'"stopReason"' in line:
                if self.profiler is not None:
                    self.profiler.disable()
                wall, cpu = time.perf_counter(), time.thread_time()
                if self.answer is not None and not self.answer.done():
                    self.answer.set_result((wall, cpu, line))
            elif b'"session/update"' in line and self.first_update is not None and not self.first_update.done():
                self.first_update.set_result(None)


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


async def run(rounds: int, profile: bool) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    limits = Limits()
    writer = Writer(loop, limits)
    conn = Connection(loop, writer, limits)
    AgentServer(DemoAgent(), conn)
    reader = ReadProtocol(conn, LineFramer(limits.max_line_bytes, limits.overlimit_head_bytes), 256 * 1024)
    into = MemoryTransport(loop, Unwatched(), immediate=True)
    into.connect(reader)
    sink = _Sink(loop)
    writer.attach(MemoryTransport(loop, writer, sink, immediate=True))
    served = loop.create_task(conn.run())

    into.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
    into.write(_line({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}))
    sid = await sink.opened
    await asyncio.sleep(0.01)  # the demo's start callback (available commands) goes out first

    cancel = _line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    profiler = cProfile.Profile() if profile else None
    walls: list[float] = []
    cpus: list[float] = []
    reads: list[float] = []
    wrong = 0
    gc.collect()
    for i in range(rounds):
        sink.first_update = loop.create_future()
        sink.answer = loop.create_future()
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 1"}]}
        into.write(_line({"jsonrpc": "2.0", "id": 100 + i, "method": "session/prompt", "params": prompt}))
        await sink.first_update
        sink.profiler = profiler
        if profiler is not None:
            profiler.enable()
        t0, c0 = time.perf_counter(), time.thread_time()
        into.write(cancel)
        tm = time.perf_counter()
        t1, c1, answer = await sink.answer
        sink.profiler = None
        walls.append((t1 - t0) * 1e6)
        cpus.append((c1 - c0) * 1e6)
        reads.append((tm - t0) * 1e6)
        wrong += orjson.loads(answer).get("result", {}).get("stopReason") != "cancelled"
    into.close()
    await asyncio.wait_for(served, 30)
    walls.sort()
    cpus.sort()
    reads.sort()
    result: dict[str, Any] = {
        "wall_p50_us": statistics.median(walls),
        "wall_p99_us": walls[int(len(walls) * 0.99)],
        "cpu_p50_us": statistics.median(cpus),
        "cpu_p99_us": cpus[int(len(cpus) * 0.99)],
        "read_p50_us": statistics.median(reads),
        "wrong_answers": wrong,
    }
    if profiler is not None:
        stats = pstats.Stats(profiler)
        result["calls_per_cancel"] = stats.total_calls / rounds  # type: ignore[attr-defined]
        result["stats"] = stats
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument("--profile", action="store_true", help="count Python calls per cancel (slows the span)")
    parser.add_argument("--gc-default", action="store_true", help="keep the default collector settings")
    args = parser.parse_args()
    if not args.gc_default:  # as the served agent runs (gc.freeze, the young-generation threshold)
        gc.freeze()
        gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    runner = uvloop.run if args.loop == "uvloop" else asyncio.run
    result = runner(run(args.rounds, args.profile))
    print(
        f"cancel -> answer ({args.loop}, {args.rounds} rounds): "
        f"wall p50 {result['wall_p50_us']:.1f} us, p99 {result['wall_p99_us']:.1f} us; "
        f"cpu p50 {result['cpu_p50_us']:.1f} us, p99 {result['cpu_p99_us']:.1f} us; "
        f"read side (line in, token set, task woken) p50 {result['read_p50_us']:.1f} us; "
        f"wrong answers {result['wrong_answers']}"
    )
    if "stats" in result:
        print(f"python calls per cancel: {result['calls_per_cancel']:.1f}")
        result["stats"].sort_stats("ncalls").print_stats(60)


if __name__ == "__main__":
    main()
