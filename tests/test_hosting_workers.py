"""``acp-fast demo --listen HOST:PORT --workers 2``: SO_REUSEPORT workers, restart of a dead one, SIGTERM drains all.

Real processes on 127.0.0.1. Waiting is on process state and socket answers,
in bounded loops; the timeouts are hang guards only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.interop.test_ws_python_sdk_interop import start_server, stop_server
from tests.ws_helpers import WsClient

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _wait_children(pid: int, predicate: object, bound: int = 600) -> set[int]:
    """Poll the supervisor's children (every 50 ms, bounded) until ``predicate(children)`` holds."""
    for _ in range(bound):
        kids = _children(pid)
        if predicate(kids):  # type: ignore[operator]
            return kids
        time.sleep(0.05)
    raise AssertionError(f"children of {pid} never matched: {_children(pid)}")


async def _walk(url: str) -> str:
    c = await WsClient.open(url)
    await c.initialize()
    sid = await c.new_session()
    done = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 3 0"}]})
    assert done["result"] == {"stopReason": "end_turn"}
    await c.close()
    assert c.connection_id is not None
    return c.connection_id


def test_workers_share_the_port_restart_the_dead_and_drain_on_sigterm() -> None:
    port = _free_port()
    url = f"ws://127.0.0.1:{port}/acp"
    proc, _stderr = start_server(["demo", "--pace-ms", "1", "--listen", f"127.0.0.1:{port}", "--workers", "2"])
    try:
        first = _wait_children(proc.pid, lambda kids: len(kids) == 2)
        async def walks() -> list[str]:
            return list(await asyncio.gather(*(_walk(url) for _ in range(8))))

        ids = asyncio.run(asyncio.wait_for(walks(), 60))
        assert len(set(ids)) == 8

        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        replaced = _wait_children(proc.pid, lambda kids: len(kids) == 2 and victim not in kids)
        assert len(replaced - first) == 1
        # the port keeps serving throughout; the new worker serves as soon as it listens
        asyncio.run(asyncio.wait_for(_walk(url), 60))

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        for pid in replaced:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    finally:
        stop_server(proc)
