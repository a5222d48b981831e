"""Soak: N WebSocket connections, each mid-prompt, all dropped by TCP reset; every reservation must come back.

    python benchmarks/hosting_reset_soak.py [--connections 10000] [--detached-timeout 3]

The host runs in this process (uvloop) so its counters can be read directly;
a client process (picows) opens the connections in batches of 200, each
``initialize`` + ``session/new`` + a long streaming prompt (one update every
5 s, so 10 000 prompts stay cheap), waits for every prompt's first update,
then resets every socket (SO_LINGER 0) and exits. The host's counters
(connections, sessions, running prompts) must all return to zero, with every
session parked for a reconnect (``detached_sessions`` = N); then, after
``--detached-timeout`` seconds, every parked session must have expired
(``detached_sessions`` = 0). The script prints how long each took and fails
otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import time
from asyncio.subprocess import PIPE
from typing import Any

PROMPT = "stream 100000 5000"


async def _client(port: int, n: int) -> None:
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    class Client(WSListener):
        def __init__(self) -> None:
            self.transport: WSTransport | None = None
            self.responses: dict[int, asyncio.Future[dict[str, Any]]] = {}
            self.updated: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_ws_connected(self, transport: WSTransport) -> None:
            self.transport = transport

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type != WSMsgType.TEXT:
                return
            msg = json.loads(frame.get_payload_as_bytes())
            if msg.get("method") == "session/update":
                if not self.updated.done():
                    self.updated.set_result(None)
            elif "id" in msg and msg["id"] in self.responses:
                self.responses.pop(msg["id"]).set_result(msg)

        async def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            assert self.transport is not None
            fut = asyncio.get_running_loop().create_future()
            self.responses[rid] = fut
            self.transport.send(
                WSMsgType.TEXT, json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
            )
            return await fut

    async def one() -> WSTransport:
        transport, client = await ws_connect(Client, f"ws://127.0.0.1:{port}/acp")
        await client.request(1, "initialize", {"protocolVersion": 1})
        sid = (await client.request(2, "session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
        assert client.transport is not None
        client.transport.send(
            WSMsgType.TEXT,
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]},
                }
            ).encode(),
        )
        await client.updated
        return transport

    held: list[WSTransport] = []
    for start in range(0, n, 200):
        held.extend(await asyncio.gather(*(one() for _ in range(min(200, n - start)))))
    print(f"client: {len(held)} prompts running", flush=True)
    sys.stdin.readline()  # the host has read its counters
    for t in held:
        sock = t.underlying_transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        t.disconnect(graceful=False)


async def _host(n: int, detached_timeout: float) -> int:
    from acp_fast.demo import DemoAgent
    from acp_fast.hosting import serve_ws
    from acp_fast.wire.limits import Limits

    limits = Limits(
        max_connections=n + 100,
        max_connections_per_principal=n + 100,
        max_unbound_per_address=n + 100,  # every client socket comes from 127.0.0.1, 200 at once
        detached_session_timeout_s=detached_timeout,
    )
    host = await serve_ws(lambda: DemoAgent(pace_ms=1, unique_ids=True), "127.0.0.1", 0, limits=limits)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", str(host.port), str(n), stdin=PIPE, stdout=PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    print((await proc.stdout.readline()).decode().strip())
    peak = dict(host.counts)  # every prompt is running now
    proc.stdin.write(b"reset\n")
    await proc.stdin.drain()
    await proc.wait()
    t0 = time.perf_counter()
    for _ in range(6000):  # 60 s at most
        c = host.counts
        if c["connections"] == c["sessions"] == c["running_prompts"] == 0 and c["detached_sessions"] == n:
            break
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - t0
    print(f"with every prompt running: {peak}")
    print(f"after the resets: {host.counts} ({elapsed:.2f} s after the client exited)")
    after_resets = dict(host.counts)
    for _ in range(int(detached_timeout * 100) + 6000):
        if host.counts["detached_sessions"] == 0:
            break
        await asyncio.sleep(0.01)
    print(f"after the detached timeout: {host.counts} ({time.perf_counter() - t0:.2f} s after the client exited)")
    await host.drain()
    freed = after_resets["connections"] == after_resets["sessions"] == after_resets["running_prompts"] == 0
    parked = after_resets["detached_sessions"] == n
    expired = host.counts["detached_sessions"] == 0 and host.counts["detached_expired"] == n
    return 0 if freed and parked and expired and peak["running_prompts"] == n else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--detached-timeout", type=float, default=3.0, help="detached_session_timeout_s of the host")
    parser.add_argument("--client", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    import resource

    import uvloop

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.client:
        uvloop.run(_client(*args.client))
        return
    raise SystemExit(uvloop.run(_host(args.connections, args.detached_timeout)))


if __name__ == "__main__":
    main()
