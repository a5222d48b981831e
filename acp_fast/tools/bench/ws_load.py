"""The client side of the WebSocket throughput and cancel measurements (hosting.py, benchmarks/hosting_idle.py).

One picows client in the bench's process, the same for every server, so the
client's cost is equal: ``updates_per_s`` counts ``session/update`` frames
while connections stream at once, ``cancel_latency`` times ``session/cancel``
during a streaming prompt until the ``cancelled`` answer. Both speak the bench
protocol (``initialize``, ``session/new``, ``stream N DELAY_MS`` prompts), so
they run unchanged against ``acp-fast demo --listen``, the WebSocket floor
agent (ws_floor.py) and the SDK's app; ``push=True`` drives the pre-encoded
push of hosting.py's echo server instead (``push N``, no handshake).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from picows import WSTransport

#: Seconds after session/new before streaming starts: session-start notifications arrive first.
SETTLE_S = 0.2


async def _open(url: str, push: bool) -> tuple[WSTransport, Any, str]:
    """One connection, initialized with one session (``push``: none of that); its listener counts updates."""
    from picows import WSFrame, WSListener, WSMsgType, ws_connect

    class Counter(WSListener):
        def __init__(self) -> None:
            self.updates = 0
            self.first_update: asyncio.Future[None] | None = None
            self.done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self.reply: asyncio.Future[dict[str, Any]] | None = None

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type != WSMsgType.TEXT:
                return
            payload = frame.get_payload_as_bytes()
            if b'"method"' in payload:
                self.updates += 1
                f = self.first_update
                if f is not None and not f.done():
                    f.set_result(None)
            elif self.reply is not None and not self.reply.done():
                self.reply.set_result(json.loads(payload))
            elif not self.done.done():
                self.done.set_result(json.loads(payload))

    transport, c = await ws_connect(Counter, url)
    assert isinstance(c, Counter)
    if push:
        return transport, c, ""
    sid = ""
    for rid, (method, params) in enumerate(
        [("initialize", {"protocolVersion": 1}), ("session/new", {"cwd": "/tmp", "mcpServers": []})], 1
    ):
        c.reply = asyncio.get_running_loop().create_future()
        request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        transport.send(WSMsgType.TEXT, json.dumps(request).encode())
        sid = (await c.reply).get("result", {}).get("sessionId", sid)
    c.reply = None
    await asyncio.sleep(SETTLE_S)
    c.updates = 0
    return transport, c, sid


def _prompt(rid: int, sid: str, text: str) -> bytes:
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": params}).encode()


def _cancel(sid: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}).encode()


async def updates_per_s(url: str, conns: int, n: int, *, push: bool = False) -> float:
    """``conns`` connections each stream ``n`` updates at once (``stream N 0``); updates received per second."""
    from picows import WSMsgType

    opened = await asyncio.gather(*(_open(url, push) for _ in range(conns)))
    t0 = time.perf_counter()
    for transport, _c, sid in opened:
        transport.send(WSMsgType.TEXT, f"push {n}".encode() if push else _prompt(9, sid, f"stream {n} 0"))
    await asyncio.gather(*(c.done for _t, c, _s in opened))
    elapsed = time.perf_counter() - t0
    total: int = sum(c.updates for _t, c, _s in opened)
    for transport, _c, _s in opened:
        transport.disconnect()
    if total < conns * n:
        raise RuntimeError(f"received {total} updates of {conns * n}")
    return float(total / elapsed)


async def cancel_latency(url: str, cancels: int) -> dict[str, float]:
    """``cancels`` times: a long streaming prompt, its first update, ``session/cancel``; µs until ``cancelled``."""
    from picows import WSMsgType

    transport, c, sid = await _open(url, False)
    loop = asyncio.get_running_loop()
    samples: list[float] = []
    wrong = 0
    for i in range(cancels):
        c.first_update = loop.create_future()
        c.done = loop.create_future()
        transport.send(WSMsgType.TEXT, _prompt(100 + i, sid, "stream 100000 1"))
        await c.first_update
        t0 = time.perf_counter()
        transport.send(WSMsgType.TEXT, _cancel(sid))
        answer = await c.done
        samples.append((time.perf_counter() - t0) * 1e6)
        wrong += answer.get("result", {}).get("stopReason") != "cancelled"
    transport.disconnect()
    samples.sort()
    return {
        "p50_us": statistics.median(samples),
        "p99_us": samples[int(len(samples) * 0.99)],
        "wrong_answers": float(wrong),
    }


async def throughput(url: str, total: int, *, push: bool = False) -> dict[str, float]:
    """Updates per second from one connection streaming ``total``, then 100 streaming ``total // 100`` each."""
    return {
        "updates_1_per_s": await updates_per_s(url, 1, total, push=push),
        "updates_100_per_s": await updates_per_s(url, 100, total // 100, push=push),
    }
