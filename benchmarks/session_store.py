"""Session store: park + re-attach latency, p50/p99, for the memory, SQLite and Redis backends.

    python benchmarks/session_store.py [--rounds 2000] [--state-kib 10] [--redis URL]

Times what a dropped socket and a ``session/load`` cost the host, through the
same ``DetachedSessions`` the host uses: ``park`` (encode the framework's
session and the agent's state as JSON, store it with its time to live) and
``take`` (atomic remove, decode), on one event loop (uvloop when installed).
The agent state is a demo-like history of ``--state-kib`` KiB. SQLite writes a
WAL file in a temporary directory on disk, and on /dev/shm (tmpfs, where
``--workers N`` keeps its default store) when there is one; Redis is ``--redis`` or, when absent, a
``redis-server`` this script starts on a free loopback port without
persistence and kills at the end (the backend is reported unsupported when
neither is available). The machine is shared: quote one run's numbers
together.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acp_fast.agent.sessions import Session
from acp_fast.hosting.budget import ProcessBudget
from acp_fast.hosting.detached import DetachedSessions
from acp_fast.hosting.store import open_store
from acp_fast.wire.limits import Limits


def _state(kib: int) -> list[object]:
    """A demo-shaped state (cwd, history of updates, title, system prompt) of about ``kib`` KiB as JSON."""
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "w" * 90}}
    n = max(1, kib * 1024 // 150)
    return ["/work/project", [update] * n, "a title", None]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(spec: str | None, rounds: int, kib: int) -> tuple[list[float], list[float]]:
    limits = Limits()
    detached = DetachedSessions(ProcessBudget(limits), limits, open_store(spec, limits.session_store_timeout_s))
    state = _state(kib)
    parks: list[float] = []
    takes: list[float] = []
    clock = time.perf_counter
    try:
        for i in range(rounds + rounds // 10):  # the first tenth warms up and is not counted
            session = Session(f"bench-{i}", "/work/project")
            session.data["turns"] = i
            t0 = clock()
            ok = await detached.park(session, state, "hook:bench")
            t1 = clock()
            entry = await detached.take(session.id, "hook:bench")
            t2 = clock()
            assert ok and entry is not None and entry.session.data["turns"] == i
            if i >= rounds // 10:
                parks.append((t1 - t0) * 1e6)
                takes.append((t2 - t1) * 1e6)
    finally:
        detached.clear()
        await detached.close()
    return parks, takes


@contextlib.contextmanager
def _redis(url: str | None) -> Iterator[str | None]:
    if url is not None:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--state-kib", type=int, default=10)
    parser.add_argument("--redis", metavar="URL", help="an existing Redis (default: start redis-server on loopback)")
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    print(f"park + re-attach, {args.rounds} rounds, state ~{args.state_kib} KiB (microseconds)")
    print("| store | park p50 | park p99 | re-attach p50 | re-attach p99 | both p50 | both p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp, _redis(args.redis) as redis_url:
        backends: list[tuple[str, str | None]] = [("memory", None), ("sqlite (disk)", f"sqlite:{tmp}/s.sqlite3")]
        if os.path.isdir("/dev/shm"):  # where --workers N puts its default store
            shm = tempfile.mkdtemp(dir="/dev/shm")
            stack.callback(shutil.rmtree, shm, True)
            backends.append(("sqlite (tmpfs)", f"sqlite:{shm}/s.sqlite3"))
        backends.append(("redis", redis_url))
        for name, spec in backends:
            if name == "redis" and spec is None:
                print("| redis | unsupported: no redis-server and no --redis |||||||")
                continue
            try:
                parks, takes = run(_measure(spec, args.rounds, args.state_kib))
            except ImportError as exc:
                print(f"| {name} | unsupported: {exc} |||||||")
                continue
            both = [p + t for p, t in zip(parks, takes, strict=True)]
            cells = [_pct(v, q) for v in (parks, takes, both) for q in (0.5, 0.99)]
            print(f"| {name} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
