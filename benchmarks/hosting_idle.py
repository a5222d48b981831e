"""Hosting: idle initialized connections held by one process, RSS per connection, set-up rate, cancel latency.

    python benchmarks/hosting_idle.py [--connections 2000] [--cancels 200] [--sdk]

Starts ``acp-fast demo --listen 127.0.0.1:PORT`` (uvloop) and, with
``--sdk``, the official Python SDK's ASGI app (``acp.http.asgi``, its
WebSocket profile) serving acp_fast/bench/sdk_demo_agent.py under uvicorn
(uvloop, ``websockets``, no compression) for comparison. One client process (picows) then:

- opens ``--connections`` WebSockets, each ``initialize`` + ``session/new``,
  in batches of 100 (set-up rate = connections / wall time);
- reads the server's RSS growth over those connections: KiB per idle
  initialized connection with one session;
- on one more connection, ``--cancels`` times: starts a long streaming prompt,
  waits for its first update, sends ``session/cancel`` and times until the
  ``cancelled`` answer (p50/p99, microseconds);
- the floor: the same client's round trip to a bare picows echo server
  (``ws_libraries.py``'s ``picows-2k``), for a same-run ratio;
- with ``--updates N``: ``session/update`` frames received per second while
  1 connection streams N updates, and while 100 connections stream N/100
  each at once (``stream K 0``), against the same bare picows server pushing
  N update-sized frames (the floor) and, with ``--sdk``, the SDK's app.

The machine is shared and has 2 cores: quote ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _wait_listening(port: int) -> None:
    for _ in range(600):  # 30 s: the SDK's imports are slow on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


async def _measure(url: str, pid: int, n: int, cancels: int) -> dict[str, float]:
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    ids = itertools.count(1)

    class Client(WSListener):
        def __init__(self) -> None:
            self.waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
            self.first_update: asyncio.Future[None] | None = None
            self.transport: WSTransport | None = None

        def on_ws_connected(self, transport: WSTransport) -> None:
            self.transport = transport

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type != WSMsgType.TEXT:
                return
            msg = json.loads(frame.get_payload_as_bytes())
            if "method" in msg:
                f = self.first_update
                if msg["method"] == "session/update" and f is not None and not f.done():
                    f.set_result(None)
                return
            fut = self.waiting.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)

        def send(self, obj: dict[str, Any]) -> None:
            assert self.transport is not None
            self.transport.send(WSMsgType.TEXT, json.dumps(obj).encode())

        async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            rid = next(ids)
            fut = asyncio.get_running_loop().create_future()
            self.waiting[rid] = fut
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await fut

    async def open_one() -> tuple[WSTransport, Client, str]:
        transport, client = await ws_connect(Client, url)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        resp = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        return transport, client, resp["result"]["sessionId"]

    # warm the server up, then take the baseline
    warm = [await open_one() for _ in range(20)]
    for t, _, _ in warm:
        t.disconnect()
    await asyncio.sleep(1.0)
    before = _rss_kib(pid)
    held = []
    t0 = time.perf_counter()
    for start in range(0, n, 100):
        held.extend(await asyncio.gather(*(open_one() for _ in range(min(100, n - start)))))
    setup_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    after = _rss_kib(pid)

    samples: list[float] = []
    if cancels:
        _, client, sid = await open_one()
        for _ in range(cancels):
            client.first_update = asyncio.get_running_loop().create_future()
            rid = next(ids)
            done = asyncio.get_running_loop().create_future()
            client.waiting[rid] = done
            client.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 1"}]},
                }
            )
            await client.first_update
            t1 = time.perf_counter()
            client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
            answer = await done
            samples.append((time.perf_counter() - t1) * 1e6)
            assert answer["result"]["stopReason"] == "cancelled", answer
    for t, _, _ in held:
        t.disconnect()
    samples.sort()
    out = {
        "connections": float(len(held)),
        "kib_per_conn": (after - before) / len(held),
        "setup_per_s": len(held) / setup_s,
        "server_rss_mib": after / 1024,
    }
    if samples:
        out["cancel_p50_us"] = statistics.median(samples)
        out["cancel_p99_us"] = samples[int(len(samples) * 0.99)]
    return out


async def _echo_rtt(url: str, rounds: int) -> dict[str, float]:
    """The floor: round trips of a small text frame to a bare picows echo server, same client library."""
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    class Echo(WSListener):
        waiter: asyncio.Future[None] | None = None

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT and self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)

    transport, client = await ws_connect(Echo, url)
    loop = asyncio.get_running_loop()
    message = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"demo-1"}}'
    samples = []
    for i in range(rounds + 100):
        client.waiter = loop.create_future()
        t0 = time.perf_counter()
        transport.send(WSMsgType.TEXT, message)
        await client.waiter
        if i >= 100:
            samples.append((time.perf_counter() - t0) * 1e6)
    transport.disconnect()
    samples.sort()
    return {"echo_p50_us": statistics.median(samples), "echo_p99_us": samples[int(len(samples) * 0.99)]}


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
        return uvloop.run(_measure(url, proc.pid, n, cancels))
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
    parser.add_argument("--sdk-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sdk_child:
        _sdk_server(args.sdk_child)
        return
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = _free_port()
    cmd = [sys.executable, "-m", "acp_fast", "demo", "--pace-ms", "1", "--listen", f"127.0.0.1:{port}"]
    cmd += ["--max-connections", str(args.connections + 100)]
    result = _run_server(cmd, port, f"ws://127.0.0.1:{port}/acp", args.connections, args.cancels)
    print("acp_fast  " + "  ".join(f"{k}={v:.1f}" for k, v in result.items()), flush=True)
    if args.updates:
        import uvloop

        def throughput(cmd: list[str], port: int, path: str, floor: bool) -> list[float]:
            proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
            try:
                _wait_listening(port)
                url = f"ws://127.0.0.1:{port}{path}"
                return [uvloop.run(_updates_per_s(url, c, args.updates // c, floor)) for c in (1, 100)]
            finally:
                proc.terminate()
                proc.wait()

        port = _free_port()
        ours = throughput(
            [sys.executable, "-m", "acp_fast", "demo", "--listen", f"127.0.0.1:{port}"], port, "/acp", False
        )
        port = _free_port()
        floor_cmd = [sys.executable, str(Path(__file__).parent / "ws_libraries.py"), "--child", "picows-2k", str(port)]
        bare = throughput(floor_cmd, port, "/", True)
        rows = {"acp_fast": ours, "floor": bare}
        if args.sdk:
            port = _free_port()
            rows["sdk-asgi"] = throughput([sys.executable, __file__, "--sdk-child", str(port)], port, "/acp", False)
        for name, (one, hundred) in rows.items():
            print(f"updates/s {name:9s} 1 connection: {one:,.0f}   100 connections: {hundred:,.0f}")
        print(f"acp_fast / floor: {ours[0] / bare[0]:.2f} (1), {ours[1] / bare[1]:.2f} (100)")
        if "sdk-asgi" in rows:
            sdk = rows["sdk-asgi"]
            print(f"acp_fast / sdk: {ours[0] / sdk[0]:.2f} (1), {ours[1] / sdk[1]:.2f} (100)")
    if args.cancels:
        import uvloop

        port = _free_port()
        floor_cmd = [sys.executable, str(Path(__file__).parent / "ws_libraries.py"), "--child", "picows-2k", str(port)]
        proc = subprocess.Popen(floor_cmd, cwd=ROOT)
        try:
            _wait_listening(port)
            floor = uvloop.run(_echo_rtt(f"ws://127.0.0.1:{port}/", args.cancels))
        finally:
            proc.terminate()
            proc.wait()
        print("floor     " + "  ".join(f"{k}={v:.1f}" for k, v in floor.items()), flush=True)
        print(f"cancel p50 / echo floor p50 = {result['cancel_p50_us'] / floor['echo_p50_us']:.2f}")
        print(f"cancel p99 / echo floor p99 = {result['cancel_p99_us'] / floor['echo_p99_us']:.2f}")
    if args.sdk:
        port = _free_port()
        cmd = [sys.executable, __file__, "--sdk-child", str(port)]
        sdk = _run_server(cmd, port, f"ws://127.0.0.1:{port}/acp", args.connections, args.cancels)
        print("sdk-asgi  " + "  ".join(f"{k}={v:.1f}" for k, v in sdk.items()))
        for key in ("kib_per_conn", "setup_per_s", "cancel_p50_us", "cancel_p99_us"):
            if key in sdk and key in result:
                print(f"{key}: acp_fast / sdk = {result[key] / sdk[key]:.2f}")
    print(f"(cpu count {os.cpu_count()}; shared machine, numbers are noisy)")


if __name__ == "__main__":
    main()
