"""Streamable HTTP output: lines sorted by the route their sender gave vs parsed back, side by side.

    python benchmarks/sse_routing.py [--updates 20000] [--rounds 7]

Two measurements, each alternating the two ways in one process, and the
medians printed with their ratio:

1. ``StreamRouter.write`` alone (sans-IO): ns per ``session/update`` line of
   the size the demo streams, with its route vs parsed with ``orjson.loads``.
2. End to end on uvloop: ``acp-fast demo``'s agent hosted in this process on
   127.0.0.1, one Streamable HTTP connection, a ``stream N 0`` prompt whose
   session stream a raw socket reads (counting events, parsing nothing);
   updates/s from the POST to the answer. The "parsed" rounds switch
   ``RoutedWriter.routed`` off, so every line goes through the parse path.

The machine is shared: quote medians of one run, with this command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import deque

import uvloop

from acp_fast.demo import DemoAgent
from acp_fast.hosting import serve_ws
from acp_fast.peer.writer import RoutedWriter
from acp_fast.transports.routing import StreamRouter
from acp_fast.wire.routes import NOTIFICATION, Route


class _Sink:
    buffered = 0

    def send(self, data: bytes) -> None:
        pass


def router_ns_per_line(n: int, routed: bool) -> float:
    r = StreamRouter(max_streams=8, max_buffered=1 << 40, max_routes=64)
    r.attach("sess-1", _Sink())
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "sess-1",
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "chunk 17 "}},
            },
        },
        separators=(",", ":"),
    ).encode()
    batch = 32
    data = (line + b"\n") * batch
    route: Route = (NOTIFICATION, None, "sess-1")
    routes: deque[Route | None] = deque()
    start = time.perf_counter_ns()
    for _ in range(n // batch):
        if routed:
            routes.extend([route] * batch)
            r.write(data, routes)
        else:
            r.write(data)
    return (time.perf_counter_ns() - start) / (n // batch * batch)


async def _post(port: int, headers: dict[str, str], body: dict[str, object]) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(
        f"POST /acp HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n{head}\r\n".encode()
        + raw
    )
    answer = await reader.read()
    writer.close()
    return answer


async def end_to_end(n: int, rounds: int) -> dict[str, list[float]]:
    host = await serve_ws(lambda: DemoAgent(pace_ms=0), "127.0.0.1", 0)
    port = host.port
    init = await _post(port, {}, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    cid = next(
        line.split(b":", 1)[1].strip().decode()
        for line in init.split(b"\r\n")
        if line.lower().startswith(b"acp-connection-id")
    )
    base = {"Acp-Connection-Id": cid}
    results: dict[str, list[float]] = {"routed": [], "parsed": []}
    try:
        for i in range(2 * rounds):
            mode = "routed" if i % 2 == 0 else "parsed"
            RoutedWriter.routed = mode == "routed"
            new = await _post(
                port,
                base,
                {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}},
            )
            assert new.startswith(b"HTTP/1.1 202"), new[:60]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                f"Acp-Connection-Id: {cid}\r\n\r\n".encode()
            )
            buf = b""
            while b'"sessionId":"' not in buf:  # the session/new answer, on the connection stream
                buf += await reader.read(65536)
            sid = buf.split(b'"sessionId":"', 1)[1].split(b'"', 1)[0].decode()
            writer.close()
            sreader, swriter = await asyncio.open_connection("127.0.0.1", port)
            swriter.write(
                f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n"
                f"Acp-Session-Id: {sid}\r\n\r\n".encode()
            )
            await sreader.readuntil(b"\r\n\r\n")
            prompt = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"stream {n} 0"}]},
            }
            start = time.perf_counter()
            await _post(port, {**base, "Acp-Session-Id": sid}, prompt)
            events = 0
            tail = b""
            while b'"stopReason"' not in tail:
                chunk = await sreader.read(1 << 20)
                events += chunk.count(b"\n\n")
                tail = chunk[-200:]
            results[mode].append(n / (time.perf_counter() - start))
            swriter.close()
    finally:
        RoutedWriter.routed = True
        await host.drain()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    ns: dict[str, list[float]] = {"routed": [], "parsed": []}
    for _ in range(args.rounds):
        for mode in ("routed", "parsed"):
            ns[mode].append(router_ns_per_line(200_000, mode == "routed"))
    r, p = statistics.median(ns["routed"]), statistics.median(ns["parsed"])
    print(
        f"StreamRouter.write, ns per update line (median of {args.rounds}): routed {r:.0f}, parsed {p:.0f}, "
        f"routed/parsed {r / p:.2f}x"
    )
    rates = uvloop.run(end_to_end(args.updates, args.rounds))
    r, p = statistics.median(rates["routed"]), statistics.median(rates["parsed"])
    print(
        f"Streamable HTTP updates/s, one stream (median of {args.rounds}): routed {r:,.0f}, parsed {p:,.0f}, "
        f"routed/parsed {r / p:.2f}x"
    )


if __name__ == "__main__":
    main()
