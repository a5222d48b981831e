"""WebSocket server libraries side by side: echo round trip and RSS per idle connection.

    python benchmarks/ws_libraries.py [--rounds 5000] [--idle 2000]

Each candidate (picows, aiohttp, websockets) runs the same text echo server in
its own process on uvloop, on 127.0.0.1. One client, always picows (so the
client's cost is the same for every server), then:

- sends ``--rounds`` ~120-byte text frames one at a time and times each round
  trip (median and p99, microseconds);
- opens ``--idle`` connections and leaves them idle; the server's RSS growth
  divided by the count is its cost per idle connection (KiB).

``picows-2k`` is picows with a 2 KiB initial read buffer (its default is 16
KiB; the buffer grows when a larger frame arrives). permessage-deflate is off
everywhere (``websockets`` negotiates it by default otherwise). The machine
is shared: compare the ratios of one run, not the absolute numbers of
different runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

MESSAGE = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"text":"hello"}}}'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- servers (run in a child process) -------------------------------------------------------
async def _serve_picows(port: int, read_buffer: int = 16384) -> None:
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_create_server

    class Echo(WSListener):
        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT:
                payload = frame.get_payload_as_bytes()
                transport.send(WSMsgType.TEXT, payload)
            elif frame.msg_type == WSMsgType.CLOSE:
                transport.send_close(frame.get_close_code())
                transport.disconnect()

    server = await ws_create_server(
        lambda _r: Echo(), "127.0.0.1", port, backlog=4096, read_buffer_init_size=read_buffer
    )
    await server.serve_forever()


async def _serve_aiohttp(port: int) -> None:
    from aiohttp import WSMsgType, web

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False, autoping=True)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
        return ws

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    await asyncio.Event().wait()


async def _serve_websockets(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def handler(ws: ServerConnection) -> None:
        async for msg in ws:
            await ws.send(msg)

    async with serve(handler, "127.0.0.1", port, compression=None, backlog=4096) as server:
        await server.serve_forever()


async def _serve_picows_small(port: int) -> None:
    await _serve_picows(port, read_buffer=2048)


SERVERS = {
    "picows": _serve_picows,
    "picows-2k": _serve_picows_small,
    "aiohttp": _serve_aiohttp,
    "websockets": _serve_websockets,
}


def _child(name: str, port: int) -> None:
    import logging

    import uvloop

    logging.disable(logging.ERROR)  # websockets logs every client that leaves without a close frame

    uvloop.run(SERVERS[name](port))


# -- client -----------------------------------------------------------------------------------
async def _measure(port: int, pid: int, rounds: int, idle: int) -> dict[str, float]:
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    from acp_fast.tools.bench.hosting import rss_kib  # here: the measured servers are children of this file

    class Client(WSListener):
        def __init__(self) -> None:
            self.waiter: asyncio.Future[None] | None = None

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT and self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)

    url = f"ws://127.0.0.1:{port}/"
    transport, client = await ws_connect(Client, url)
    loop = asyncio.get_running_loop()
    samples: list[float] = []
    for i in range(rounds + 200):
        client.waiter = loop.create_future()
        t0 = time.perf_counter()
        transport.send(WSMsgType.TEXT, MESSAGE)
        await client.waiter
        if i >= 200:  # warm-up excluded
            samples.append((time.perf_counter() - t0) * 1e6)
    transport.disconnect()
    samples.sort()
    await asyncio.sleep(0.5)
    before = rss_kib(pid)
    held = []
    for start in range(0, idle, 100):
        batch = await asyncio.gather(*(ws_connect(WSListener, url) for _ in range(min(100, idle - start))))
        held.extend(t for t, _ in batch)
    await asyncio.sleep(1.0)
    after = rss_kib(pid)
    for t in held:
        t.disconnect()
    return {
        "rtt_p50_us": statistics.median(samples),
        "rtt_p99_us": samples[int(len(samples) * 0.99)],
        "kib_per_idle_conn": (after - before) / idle,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5000)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--only", nargs="*", default=list(SERVERS))
    parser.add_argument("--child", nargs=2, metavar=("NAME", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    import uvloop

    results = {}
    for name in args.only:
        port = _free_port()
        proc = subprocess.Popen([sys.executable, __file__, "--child", name, str(port)])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            results[name] = uvloop.run(_measure(port, proc.pid, args.rounds, args.idle))
        finally:
            proc.terminate()
            proc.wait()
        print(f"{name:11s} " + "  ".join(f"{k}={v:.1f}" for k, v in results[name].items()), flush=True)
    floor = results.get("picows", {}).get("rtt_p50_us")
    if floor:
        for name, r in results.items():
            print(f"{name:11s} rtt p50 ratio to picows: {r['rtt_p50_us'] / floor:.2f}x")
    print(f"(cpu count {os.cpu_count()}; shared machine, numbers are noisy)")


if __name__ == "__main__":
    main()
