"""Hosting: idle initialized connections held by one process, RSS per connection, set-up rate, cancel latency.

    python benchmarks/hosting_idle.py [--connections 2000] [--cancels 200] [--sdk] [--ts]

Starts ``acp-fast demo --listen 127.0.0.1:PORT`` (uvloop) and, with
``--sdk``, the official Python SDK's ASGI app (``acp.http.asgi``, its
WebSocket profile) serving acp_fast/bench/sdk_demo_agent.py under uvicorn
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
- the floor: the same client's round trip to a bare picows echo server
  (2 KiB initial read buffer, ``python -m acp_fast.bench.hosting --echo``), for a same-run ratio;
- with ``--updates N``: ``session/update`` frames received per second while
  1 connection streams N updates, and while 100 connections stream N/100
  each at once (``stream K 0``), against the same bare picows server pushing
  N update-sized frames (the floor) and, with ``--sdk`` / ``--ts``, the SDKs' servers.

The connection, cancel and floor measurements are acp_fast/bench/hosting.py's,
shared with ``acp-fast bench --hosting``. The machine is shared and has 2
cores: quote ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from acp_fast.bench import hosting_ts
from acp_fast.bench.hosting import (
    demo_server_argv,
    echo_rtt,
    echo_server_argv,
    free_port,
    measure_host,
    raise_fd_limit,
)

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


async def _updates_per_s(url: str, conns: int, n: int, floor: bool) -> float:
    """``conns`` connections each stream ``n`` updates at once; updates received per second, all counted.

    Against an ACP server each connection initializes, opens a session and
    prompts ``stream N 0``; against the floor it sends ``push N``. Either way
    the client only counts frames until the one that is not a notification.
    """
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    class Counter(WSListener):
        def __init__(self) -> None:
            self.updates = 0
            self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.reply: asyncio.Future[dict[str, Any]] | None = None

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type != WSMsgType.TEXT:
                return
            payload = frame.get_payload_as_bytes()
            if b'"method"' in payload:
                self.updates += 1
            elif self.reply is not None and not self.reply.done():
                self.reply.set_result(json.loads(payload))
            elif not self.done.done():
                self.done.set_result(None)

    async def prepare() -> tuple[WSTransport, Counter, str]:
        transport, c = await ws_connect(Counter, url)
        if floor:
            return transport, c, ""
        sid = ""
        for rid, (method, params) in enumerate(
            [("initialize", {"protocolVersion": 1}), ("session/new", {"cwd": "/tmp", "mcpServers": []})], 1
        ):
            c.reply = asyncio.get_running_loop().create_future()
            request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            transport.send(WSMsgType.TEXT, json.dumps(request).encode())
            answer = await c.reply
            sid = answer.get("result", {}).get("sessionId", sid)
        c.reply = None
        await asyncio.sleep(0.2)  # let session-start notifications (available commands) arrive first
        c.updates = 0
        return transport, c, sid

    prepared = [await prepare() for _ in range(conns)]
    t0 = time.perf_counter()
    for transport, _c, sid in prepared:
        if floor:
            transport.send(WSMsgType.TEXT, f"push {n}".encode())
        else:
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"stream {n} 0"}]}
            transport.send(
                WSMsgType.TEXT,
                json.dumps({"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": prompt}).encode(),
            )
    await asyncio.gather(*(c.done for _t, c, _s in prepared))
    elapsed = time.perf_counter() - t0
    total = sum(c.updates for _t, c, _s in prepared)
    assert total >= conns * n, (total, conns * n)
    for transport, _c, _s in prepared:
        transport.disconnect()
    return total / elapsed


def _run_server(cmd: list[str], port: int, url: str, n: int, cancels: int) -> dict[str, float]:
    import uvloop

    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port)
        return uvloop.run(measure_host(url, proc.pid, n, cancels))
    finally:
        proc.terminate()
        proc.wait()


def _sdk_server(port: int) -> None:
    """The official SDK's ASGI app (its WebSocket profile) under uvicorn, serving its demo agent."""
    import uvicorn
    from acp.http.asgi import create_asgi_app

    from acp_fast.bench.sdk_demo_agent import SdkDemoAgent

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
    parser.add_argument("--sdk-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ts_why = hosting_ts.missing() if args.ts else None
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

        def throughput(cmd: list[str], port: int, path: str, floor: bool) -> list[float]:
            proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
            try:
                _wait_listening(port)
                url = f"ws://127.0.0.1:{port}{path}"
                return [
                    uvloop.run(asyncio.wait_for(_updates_per_s(url, c, args.updates // c, floor), UPDATES_TIMEOUT_S))
                    for c in (1, 100)
                ]
            finally:
                proc.terminate()
                proc.wait()

        port = free_port()
        ours = throughput(
            [sys.executable, "-m", "acp_fast", "demo", "--listen", f"127.0.0.1:{port}"], port, "/acp", False
        )
        port = free_port()
        bare = throughput(echo_server_argv(port), port, "/", True)
        rows = {"acp_fast": ours, "floor": bare}
        if args.sdk:
            port = free_port()
            rows["sdk-asgi"] = throughput([sys.executable, __file__, "--sdk-child", str(port)], port, "/acp", False)
        if args.ts and ts_why is None:
            port = free_port()
            rows["ts-sdk"] = throughput(hosting_ts.server_argv(port), port, "/acp", False)
        for name, (one, hundred) in rows.items():
            print(f"updates/s {name:9s} 1 connection: {one:,.0f}   100 connections: {hundred:,.0f}")
        print(f"acp_fast / floor: {ours[0] / bare[0]:.2f} (1), {ours[1] / bare[1]:.2f} (100)")
        if "sdk-asgi" in rows:
            sdk = rows["sdk-asgi"]
            print(f"acp_fast / sdk: {ours[0] / sdk[0]:.2f} (1), {ours[1] / sdk[1]:.2f} (100)")
        if "ts-sdk" in rows:
            ts = rows["ts-sdk"]
            print(f"acp_fast / ts-sdk: {ours[0] / ts[0]:.2f} (1), {ours[1] / ts[1]:.2f} (100)")
    if args.cancels:
        import uvloop

        port = free_port()
        proc = subprocess.Popen(echo_server_argv(port), cwd=ROOT)
        try:
            _wait_listening(port)
            floor = uvloop.run(echo_rtt(f"ws://127.0.0.1:{port}/", args.cancels))
        finally:
            proc.terminate()
            proc.wait()
        print("floor     " + "  ".join(f"{k}={v:.1f}" for k, v in floor.items()), flush=True)
        print(f"cancel p50 / echo floor p50 = {result['cancel_p50_us'] / floor['echo_p50_us']:.2f}")
        print(f"cancel p99 / echo floor p99 = {result['cancel_p99_us'] / floor['echo_p99_us']:.2f}")
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
