"""Load: 32 prompts streaming at full speed plus control traffic, for a bounded time.

    python benchmarks/load_32_streams.py [--seconds 20] [--chunks 200000] [--no-uvloop]

Starts ``python -m acp_fast demo``, opens 32 sessions and sends each the
prompt ``stream N 0`` (chunk text ``chunk <i>``), while a control task sends
``session/set_mode`` / ``session/list`` back to back and times each answer.
When the time is up every session is cancelled. Checks: each session's
chunk indices are exactly 0..k-1 (none lost, duplicated or reordered), all
updates before the prompt's response, one response per request. Prints one
JSON summary. Not part of the test suite: it measures, and it exits 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from acp_fast.tools.bench.stats import PERCENTILE_DEFINITION, percentile

ROOT = Path(__file__).resolve().parent.parent


class AgentPipe:
    """An agent subprocess and the client side of its stdio, on asyncio."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiters: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.answered: dict[Any, int] = {}
        self.sent: set[Any] = set()
        self.updates = 0
        self.on_update: Any = None
        self.messages_in = 0
        self.messages_out = 0
        self.problems: list[str] = []
        self._next = 0
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, *args: str) -> AgentPipe:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_fast", *args, cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 26,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.messages_in += 1
            msg = orjson.loads(line)
            if msg.get("method") == "session/update":
                self.updates += 1
                if self.on_update is not None:
                    self.on_update(msg["params"])
                continue
            if "method" in msg:
                continue
            rid = msg.get("id")
            if rid not in self.sent:
                self.problems.append(f"response to an id never sent: {rid!r}")
            self.answered[rid] = self.answered.get(rid, 0) + 1
            if self.answered[rid] > 1:
                self.problems.append(f"second response to {rid!r}")
            fut = self.waiters.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)

    def send(self, method: str, params: Any = None, wait: bool = True) -> asyncio.Future[dict[str, Any]] | None:
        self._next += 1
        rid = self._next
        self.sent.add(rid)
        fut: asyncio.Future[dict[str, Any]] | None = None
        if wait:
            fut = asyncio.get_running_loop().create_future()
            self.waiters[rid] = fut
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return fut

    def notify(self, method: str, params: Any) -> None:
        self.write({"jsonrpc": "2.0", "method": method, "params": params})

    def write(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.messages_out += 1
        self.proc.stdin.write(orjson.dumps(obj) + b"\n")

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        fut = self.send(method, params)
        assert fut is not None
        assert self.proc.stdin is not None
        await self.proc.stdin.drain()
        return await fut

    async def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.reader
        return await self.proc.wait()

    def unanswered(self) -> set[Any]:
        return self.sent - set(self.answered)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


async def main(seconds: float, chunks: int, streams: int, flags: list[str]) -> int:
    agent = await AgentPipe.start("demo", *flags)
    await agent.call("initialize", {"protocolVersion": 1})
    sids = []
    for _ in range(streams):
        resp = await agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        sids.append(resp["result"]["sessionId"])
    seen: dict[str, list[int]] = {sid: [] for sid in sids}
    done: set[str] = set()

    def on_update(params: dict[str, Any]) -> None:
        update = params["update"]
        if update.get("sessionUpdate") != "agent_message_chunk":
            return
        sid = params["sessionId"]
        if sid in done:
            agent.problems.append(f"update for {sid} after its prompt's response")
        seen[sid].append(int(update["content"]["text"].split()[1]))

    agent.on_update = on_update
    base_rss = rss_kib(agent.proc.pid)
    t0 = time.perf_counter()
    text = [{"type": "text", "text": f"stream {chunks} 0"}]
    prompts = {sid: agent.send("session/prompt", {"sessionId": sid, "prompt": text}) for sid in sids}
    latencies: list[float] = []
    peak_rss = base_rss
    deadline = t0 + seconds
    i = 0
    while time.perf_counter() < deadline and not all(f.done() for f in prompts.values() if f):
        sid = sids[i % streams]
        start = time.perf_counter()
        if i % 2:
            resp = await agent.call("session/set_mode", {"sessionId": sid, "modeId": "code" if i % 4 == 1 else "ask"})
        else:
            resp = await agent.call("session/list", {})
        latencies.append(time.perf_counter() - start)
        if "result" not in resp:
            agent.problems.append(f"control request failed: {resp}")
        if i % 256 == 0:
            peak_rss = max(peak_rss, rss_kib(agent.proc.pid))
        i += 1
    for sid in sids:
        agent.notify("session/cancel", {"sessionId": sid})
    stops: dict[str, int] = {}
    for sid, fut in prompts.items():
        assert fut is not None
        resp = await fut
        done.add(sid)
        reason = resp.get("result", {}).get("stopReason", "error")
        stops[reason] = stops.get(reason, 0) + 1
    elapsed = time.perf_counter() - t0
    for sid, idx in seen.items():
        if idx != list(range(len(idx))):
            agent.problems.append(f"{sid}: chunk indices are not 0..{len(idx) - 1} in order")
    rc = await agent.close()
    if rc != 0:
        agent.problems.append(f"agent exit status {rc}")
    if agent.unanswered():
        agent.problems.append(f"unanswered requests: {sorted(agent.unanswered())[:10]}")
    total = sum(len(v) for v in seen.values())
    summary = {
        "streams": streams,
        "seconds": round(elapsed, 2),
        "chunk_updates": total,
        "chunk_updates_per_s": round(total / elapsed),
        "per_stream_min_max": [min(len(v) for v in seen.values()), max(len(v) for v in seen.values())],
        "stop_reasons": stops,
        "control_requests": len(latencies),
        "control_latency_ms": {
            "p50": round(percentile(latencies, 50) * 1e3, 3),
            "p99": round(percentile(latencies, 99) * 1e3, 3),
            "max": round(max(latencies) * 1e3, 3),
        },
        "percentiles": PERCENTILE_DEFINITION,
        "agent_rss_kib": {"before_prompts": base_rss, "peak_sampled": peak_rss},
        "messages_in": agent.messages_in,
        "messages_out": agent.messages_out,
        "problems": agent.problems[:20],
        "ok": not agent.problems,
    }
    print(json.dumps(summary, indent=2))
    return 0 if not agent.problems else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0, help="stream for at most this long, then cancel")
    p.add_argument("--chunks", type=int, default=200_000, help="N in each prompt's 'stream N 0'")
    p.add_argument("--streams", type=int, default=32)
    p.add_argument("--no-uvloop", action="store_true", help="run the agent on the stdlib loop")
    a = p.parse_args()
    sys.exit(asyncio.run(main(a.seconds, a.chunks, a.streams, ["--no-uvloop"] if a.no_uvloop else [])))
