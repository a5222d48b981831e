"""How long one ``GET /metrics`` holds the event loop with many idle connections (issue 24).

    python benchmarks/metrics_scrape.py [--connections 10000] [--runs 20]

Builds an ``AcpHost(metrics=True)`` whose connection table holds
``connections`` idle stand-ins (the collector reads of each what it reads of
a real one: its output buffer, whether its reader is paused, its pool's slots
and its spawned tasks), fills the request histograms with every method and a
few outcomes, and times ``Metrics.exposition()``: the whole scrape, which runs
on the loop. Prints the median and the maximum in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from types import SimpleNamespace
from typing import Any

from acp_fast.agent.methods import AGENT_METHODS
from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from acp_fast.observability.timing import now


class _IdlePeer:
    buffered_output = 0
    reading_paused = False
    binary_frames = 0
    out = None


def _idle_peer() -> Any:
    return _IdlePeer()


def _idle_server() -> Any:
    return SimpleNamespace(pool=SimpleNamespace(in_flight=0), conn=SimpleNamespace(_spawned={}), sessions=[])


async def main(connections: int, runs: int) -> None:
    host = AcpHost(DemoAgent, metrics=True)
    metrics = host.metrics
    assert metrics is not None
    for _ in range(connections):
        peer = _idle_peer()
        host.registry.peers[peer] = None  # type: ignore[index]
        metrics.servers[peer] = _idle_server()
    timings = metrics.recorder.timings
    for method in AGENT_METHODS:  # every method's histogram holds something, as on a busy host
        for i in range(100):
            timings.since(method, now() - 0.0001 * i)
    times = []
    size = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        body, _kind = metrics.exposition()
        times.append(time.perf_counter() - t0)
        size = len(body)
    print(
        f"{connections} idle connections: scrape median {statistics.median(times) * 1e3:.2f} ms, "
        f"max {max(times) * 1e3:.2f} ms, {size} bytes"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    asyncio.run(main(a.connections, a.runs))
