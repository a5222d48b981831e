"""Running an in-process host for the hosting tests (loopback, an ephemeral port, always drained)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from acp_fast.agent.base import Agent
from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, serve_ws


async def with_host(
    body: Callable[[AcpHost], Awaitable[Any]],
    factory: Callable[[], Agent] = lambda: DemoAgent(pace_ms=1),
    **kwargs: Any,
) -> AcpHost:
    """Serve ``factory``'s agents on 127.0.0.1, run ``body``, then drain whatever it left."""
    host = await serve_ws(factory, "127.0.0.1", 0, **kwargs)
    try:
        await body(host)
    finally:
        await host.drain()
    return host


async def wait_counts_zero(host: AcpHost) -> None:
    """Counters return to zero once every connection's shutdown ran (bounded, event-free polling of loop turns)."""
    for _ in range(100_000):
        c = host.counts
        if c["connections"] == 0 and c["sessions"] == 0 and c["running_prompts"] == 0:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"counters never returned to zero: {host.counts}")
