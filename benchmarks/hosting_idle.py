"""Hosting: idle initialized connections held by one process, RSS per connection, set-up rate, cancel latency.

    python benchmarks/hosting_idle.py [--connections 2000] [--cancels 200] [--sdk] [--ts] [--updates N] [--deflate-rss]

Starts ``acp-fast demo --listen 127.0.0.1:PORT`` (uvloop) and, with
``--sdk``, the official Python SDK's ASGI app (``acp.http.asgi``, its
WebSocket profile) serving acp_fast/tools/bench/sdk_demo_agent.py under uvicorn
(uvloop, ``websockets``, no compression) for comparison, and with ``--ts``
the official TypeScript SDK's ``AcpServer`` on Node with ``ws``
(tests/interop/ts_bench_agent.mjs, same agent behaviour; needs ``node`` and
``npm ci`` in tests/interop, else one "unsupported" line). One client process (picows) then:

- opens ``--connections`` WebSockets, each ``initialize`` + ``session/new``,
  in batches of 100 (set-up rate = connections / wall time);
- reads the server's RSS growth over those connections: KiB per idle
  initialized connection with one session;
- on one more connection, ``--cancels`` times: starts a long streaming prompt,
  waits for its first update, sends ``session/cancel`` and times until the
  ``cancelled`` answer (p50/p99, microseconds);
- the floors: the same client's round trip to a bare picows echo server
  (2 KiB initial read buffer, ``python -m acp_fast.tools.bench.hosting --echo``), the
  yardstick of the cancel goal; and the same cancel timed against the WebSocket
  floor agent (acp_fast/tools/bench/ws_floor.py: picows + orjson answering the same
  prompts with nothing else), for same-run ratios;
- with ``--updates N``: ``session/update`` frames received per second while
  1 connection streams N updates, and while 100 connections stream N/100
  each at once (``stream K 0``), from acp_fast, from the floor agent (the
  goal's yardstick: it builds and encodes every update, as the stdio floor
  does), from the echo server pushing N pre-encoded update-sized frames in a
  loop (``push``: no per-update work at all) and, with ``--sdk`` / ``--ts``,
  the SDKs' servers.

With ``--deflate-rss``: the RSS per idle initialized connection again, opened
by a ``websockets`` client that offers permessage-deflate, against the server
without ``--ws-deflate`` (the offer declined) and with it (agreed, requests
and answers compressed).

The connection, cancel and floor measurements are acp_fast/tools/bench/hosting.py's
and ws_load.py's, shared with ``acp-fast bench --hosting``. The machine is
shared and has 2 cores: quote ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acp_fast.tools.bench import hosting_ts
from acp_fast.tools.bench.hosting import (
    demo_server_argv,
    echo_rtt,
    echo_server_argv,
    free_port,
    measure_host,
    raise_fd_limit,
    rss_kib,
    ws_floor_argv,
)
from acp_fast.tools.bench.ws_load import cancel_latency, updates_per_s

ROOT = Path(__file__).resolve().parents[1]
#: A hang guard over one throughput measurement.
UPDATES_TIMEOUT_S = 600.0


def _wait_listening(port: int) -> None:
    for _ in range(600):  # 30 s: the SDK's imports are slow on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


async def _deflate_idle_rss(url: str, pid: int, n: int) -> tuple[float, int]:
    """KiB of server RSS per idle initialized connection opened by a ``websockets`` client offering deflate.

    Returns (KiB per connection, connections on which deflate was agreed); the
    client compresses its requests and inflates the answers when it was.
    """
    from websockets.asyncio.client import ClientConnection, connect

    async def call(ws: ClientConnection, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        while True:
            msg = json.loads(await ws.recv())
            if msg.get("id") == rid and "method" not in msg:
                return dict(msg)

    async def open_one() -> ClientConnection:
        ws = await connect(url, compression="deflate", max_size=None)
        await call(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await call(ws, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        return ws

    for ws in [await open_one() for _ in range(20)]:
        await ws.close()
    await asyncio.sleep(1.0)
    before = rss_kib(pid)
    held: list[ClientConnection] = []
    for start in range(0, n, 100):
        held.extend(await asyncio.gather(*(open_one() for _ in range(min(100, n - start)))))
    await asyncio.sleep(1.0)
    after = rss_kib(pid)
    agreed = sum(1 for ws in held if ws.protocol.extensions)
    await asyncio.gather(*(ws.close() for ws in held))
    return (after - before) / n, agreed


@contextlib.contextmanager
def _serving(cmd: list[str], port: int, quiet: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A server process listening on ``port`` for the ``with`` body, terminated after it."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL if quiet else None)
    try:
        _wait_listening(port)
        yield proc
    finally:
        proc.terminate()
        proc.wait()


def _run_server(cmd: list[str], port: int, url: str, n: int, cancels: int) -> dict[str, float]:
    import uvloop

    with _serving(cmd, port) as proc:
        return uvloop.run(measure_host(url, proc.pid, n, cancels))


def _sdk_server(port: int) -> None:
    """The official SDK's ASGI app (its WebSocket profile) under uvicorn, serving its demo agent."""
    import uvicorn
    from acp.http.asgi import create_asgi_app

    from acp_fast.tools.bench.sdk_demo_agent import SdkDemoAgent

    def factory(conn: Any) -> Any:
        agent = SdkDemoAgent()
        agent.on_connect(conn)
        return agent

    uvicorn.run(
        create_asgi_app(factory),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        ws="websockets",
        ws_per_message_deflate=False,
        log_level="warning",
        backlog=4096,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--cancels", type=int, default=200)
    parser.add_argument("--updates", type=int, default=0, help="session/update throughput: this many in total")
    parser.add_argument("--sdk", action="store_true", help="also measure the official SDK's ASGI app under uvicorn")
    parser.add_argument("--ts", action="store_true", help="also measure the TypeScript SDK's AcpServer on node")
    parser.add_argument(
        "--deflate-rss",
        action="store_true",
        help="RSS per idle connection from a websockets client offering permessage-deflate, server with and "
        "without --ws-deflate",
    )
    parser.add_argument("--sdk-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ts_why = hosting_ts.missing() if args.ts else None
    if args.sdk and not args.sdk_child:
        try:
            import uvicorn  # noqa: F401
        except ImportError:
            parser.error("--sdk needs uvicorn and the SDK's http extra: pip install -e '.[bench]'")
    if ts_why is not None:
        print(f"ts-sdk    unsupported: {ts_why}", flush=True)
    if args.sdk_child:
        _sdk_server(args.sdk_child)
        return
    raise_fd_limit()
    port = free_port()
    cmd = demo_server_argv(port, args.connections)
    result = _run_server(cmd, port, f"ws://127.0.0.1:{port}/acp", args.connections, args.cancels)
    print("acp_fast  " + "  ".join(f"{k}={v:.1f}" for k, v in result.items()), flush=True)
    if args.updates:
        import uvloop

        def throughput(cmd: list[str], port: int, path: str, push: bool = False) -> list[float]:
            url = f"ws://127.0.0.1:{port}{path}"
            with _serving(cmd, port):
                return [
                    uvloop.run(
                        asyncio.wait_for(updates_per_s(url, c, args.updates // c, push=push), UPDATES_TIMEOUT_S)
                    )
                    for c in (1, 100)
                ]

        port = free_port()
        rows = {"acp_fast": throughput(demo_server_argv(port, 100), port, "/acp")}
        port = free_port()
        rows["floor"] = throughput(ws_floor_argv(port), port, "/")
        port = free_port()
        rows["push"] = throughput(echo_server_argv(port), port, "/", push=True)
        if args.sdk:
            port = free_port()
            rows["sdk-asgi"] = throughput([sys.executable, __file__, "--sdk-child", str(port)], port, "/acp")
        if args.ts and ts_why is None:
            port = free_port()
            rows["ts-sdk"] = throughput(hosting_ts.server_argv(port), port, "/acp")
        for name, (one, hundred) in rows.items():
            print(f"updates/s {name:9s} 1 connection: {one:,.0f}   100 connections: {hundred:,.0f}")
        ours = rows["acp_fast"]
        for name in ("floor", "push", "sdk-asgi", "ts-sdk"):
            if name in rows:
                other = rows[name]
                print(f"acp_fast / {name}: {ours[0] / other[0]:.2f} (1), {ours[1] / other[1]:.2f} (100)")
    if args.cancels:
        import uvloop

        port = free_port()
        with _serving(echo_server_argv(port), port, quiet=False):
            floor = uvloop.run(echo_rtt(f"ws://127.0.0.1:{port}/", args.cancels))
        print("floor     " + "  ".join(f"{k}={v:.1f}" for k, v in floor.items()), flush=True)
        print(f"cancel p50 / echo floor p50 = {result['cancel_p50_us'] / floor['echo_p50_us']:.2f}")
        print(f"cancel p99 / echo floor p99 = {result['cancel_p99_us'] / floor['echo_p99_us']:.2f}")
        port = free_port()
        with _serving(ws_floor_argv(port), port, quiet=False):
            agent = uvloop.run(cancel_latency(f"ws://127.0.0.1:{port}/", args.cancels))
        print("floor agent cancel  " + "  ".join(f"{k}={v:.1f}" for k, v in agent.items()), flush=True)
        print(f"cancel p50 / floor agent's cancel p50 = {result['cancel_p50_us'] / agent['p50_us']:.2f}")
        print(f"cancel p99 / floor agent's cancel p99 = {result['cancel_p99_us'] / agent['p99_us']:.2f}")
    if args.deflate_rss:
        import uvloop

        for flag in ([], ["--ws-deflate"]):
            port = free_port()
            cmd = demo_server_argv(port, args.connections) + flag
            with _serving(cmd, port) as proc:
                kib, agreed = uvloop.run(_deflate_idle_rss(f"ws://127.0.0.1:{port}/acp", proc.pid, args.connections))
            label = "deflate on " if flag else "deflate off"
            print(f"{label}  kib_per_conn={kib:.1f}  deflate agreed on {agreed} of {args.connections}", flush=True)
    if args.sdk:
        port = free_port()
        cmd = [sys.executable, __file__, "--sdk-child", str(port)]
        sdk = _run_server(cmd, port, f"ws://127.0.0.1:{port}/acp", args.connections, args.cancels)
        print("sdk-asgi  " + "  ".join(f"{k}={v:.1f}" for k, v in sdk.items()))
        for key in ("kib_per_conn", "setup_per_s", "cancel_p50_us", "cancel_p99_us"):
            if key in sdk and key in result:
                print(f"{key}: acp_fast / sdk = {result[key] / sdk[key]:.2f}")
    if args.ts and ts_why is None:
        import uvloop

        ts_result = uvloop.run(hosting_ts.measure_ts(args.connections, args.cancels))
        print("ts-sdk    " + "  ".join(f"{k}={v:.1f}" for k, v in ts_result.items()), flush=True)
        for key in ("kib_per_conn", "setup_per_s", "cancel_p50_us", "cancel_p99_us"):
            if key in ts_result and key in result:
                print(f"{key}: acp_fast / ts-sdk = {result[key] / ts_result[key]:.2f}")
    print(f"(cpu count {os.cpu_count()}; shared machine, numbers are noisy)")


if __name__ == "__main__":
    main()
