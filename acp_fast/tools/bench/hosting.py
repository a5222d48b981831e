"""The hosting scenario of ``acp-fast bench --hosting``: ACP over WebSocket next to a bare picows floor.

Starts ``acp-fast demo --listen 127.0.0.1:PORT`` and one picows client in the
bench's own process, then:

- opens ``connections`` WebSockets, each ``initialize`` + ``session/new``, in
  batches of 100: the set-up rate (connections / wall time) and the server's
  RSS growth per idle initialized connection with one session;
- on one more connection, ``cancels`` times: starts a long streaming prompt,
  waits for its first update, sends ``session/cancel`` and times until the
  ``cancelled`` answer;
- the floor: the same client's round trip of a cancel-sized text frame to a
  bare picows echo server (``python -m acp_fast.tools.bench.hosting --echo PORT``),
  2 KiB initial read buffer like the host's.

``benchmarks/hosting_idle.py`` uses the same functions for its longer runs
(10 000 connections, the official SDK's ASGI app, update throughput). Needs
picows (the ``server`` extra); without it the scenario is skipped with one line.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...extras import install_hint

if TYPE_CHECKING:
    from picows import WSTransport

#: A ``session/update`` as the demo agent streams it, for the floor's ``push N``.
UPDATE = (
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"demo-1","update":'
    b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d "},"messageId":"m1"}}}'
)
#: The floor's round-trip message: the size of a ``session/cancel``.
CANCEL_SIZED = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"demo-1"}}'
#: Connections opened at once while measuring the set-up rate.
SETUP_BATCH = 100
#: The scenarios this module fills (report.py shows their rows only when present).
SCENARIOS = (
    "ws_setup_per_s",
    "ws_idle_rss",
    "ws_cancel",
    "ws_cancel_vs_agent",
    "ws_updates_1",
    "ws_updates_100",
    "ws_push_1",
    "ws_push_100",
)
#: Updates streamed per throughput round: by one connection, then by 100 connections together.
WS_UPDATES = 20000
#: Seconds a server may take to listen (the SDK's imports are slow on a loaded machine).
LISTEN_TIMEOUT_S = 30.0


def missing_extra() -> str | None:
    """Why the hosting scenario cannot run here, or None."""
    try:
        import picows  # noqa: F401
    except ImportError:
        return f"needs the server extra ({install_hint('server')}): picows is not installed"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def raise_fd_limit() -> None:
    """Thousands of sockets need more than the usual soft limit of 1024 descriptors."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def wait_listening(port: int, proc: asyncio.subprocess.Process | None = None) -> None:
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.returncode is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening on {port}")
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError(f"nothing listens on {port} after {LISTEN_TIMEOUT_S:.0f} s")


def demo_server_argv(port: int, connections: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "acp_fast",
        "demo",
        "--pace-ms",
        "1",
        "--listen",
        f"127.0.0.1:{port}",
        "--max-connections",
        str(connections + 100),
        "--max-connections-per-principal",  # every bench client comes from 127.0.0.1
        str(connections + 100),
        "--max-unbound-per-address",  # and opens its connections at once
        str(connections + 100),
    ]


def echo_server_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "acp_fast.tools.bench.hosting", "--echo", str(port)]


def ws_floor_argv(port: int) -> list[str]:
    """The WebSocket floor agent (ws_floor.py), run as a script that imports nothing of acp_fast."""
    return [sys.executable, "-P", str(Path(__file__).with_name("ws_floor.py")), str(port)]


async def measure_host(url: str, pid: int, n: int, cancels: int) -> dict[str, float]:
    """Set-up rate and RSS per idle connection over ``n`` connections, then ``cancels`` timed cancels."""
    from picows import ws_connect

    ids = itertools.count(1)
    Client = _ws_client(ids)

    async def open_one() -> tuple[WSTransport, Any, str]:
        transport, client = await ws_connect(Client, url)
        assert isinstance(client, Client)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        resp = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        return transport, client, str(resp["result"]["sessionId"])

    warm = [await open_one() for _ in range(20)]  # the server's first connections pay for imports and caches
    for t, _, _ in warm:
        t.disconnect()
    await asyncio.sleep(1.0)
    before = rss_kib(pid)
    held: list[tuple[WSTransport, Any, str]] = []
    t0 = time.perf_counter()
    for start in range(0, n, SETUP_BATCH):
        held.extend(await asyncio.gather(*(open_one() for _ in range(min(SETUP_BATCH, n - start)))))
    setup_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    after = rss_kib(pid)

    samples, wrong = await _timed_cancels(await open_one(), cancels, ids) if cancels else ([], 0)
    for t, _, _ in held:
        t.disconnect()
    samples.sort()
    out = {
        "connections": float(len(held)),
        "kib_per_conn": (after - before) / max(1, len(held)),
        "setup_per_s": len(held) / setup_s,
        "server_rss_mib": after / 1024,
        "wrong_answers": float(wrong),
    }
    if samples:
        out["cancel_p50_us"] = statistics.median(samples)
        out["cancel_p99_us"] = samples[int(len(samples) * 0.99)]
    return out


def _ws_client(ids: Iterator[int]) -> type[Any]:
    """measure_host's picows listener: answers matched by id, and the first update of a prompt.

    Built when called, inside the running loop: picows is the server extra, and this module imports without it.
    """
    from picows import WSFrame, WSListener, WSMsgType

    loop = asyncio.get_running_loop()

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
            fut: asyncio.Future[dict[str, Any]] = loop.create_future()
            self.waiting[rid] = fut
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await fut

    return Client


async def _timed_cancels(
    opened: tuple[WSTransport, Any, str], cancels: int, ids: Iterator[int]
) -> tuple[list[float], int]:
    """Microseconds from each cancel to its prompt's answer (the prompt streams an update every ms); wrong answers."""
    loop = asyncio.get_running_loop()
    _, client, sid = opened
    samples: list[float] = []
    wrong = 0
    for _ in range(cancels):
        client.first_update = loop.create_future()
        rid = next(ids)
        done: asyncio.Future[dict[str, Any]] = loop.create_future()
        client.waiting[rid] = done
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 1"}]}
        client.send({"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": prompt})
        await client.first_update
        t1 = time.perf_counter()
        client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        answer = await done
        samples.append((time.perf_counter() - t1) * 1e6)
        if answer.get("result", {}).get("stopReason") != "cancelled":
            wrong += 1
    return samples, wrong


async def echo_rtt(url: str, rounds: int) -> dict[str, float]:
    """The floor: round trips of a cancel-sized text frame to a bare picows echo server, same client library."""
    from picows import WSFrame, WSListener, WSMsgType, ws_connect

    class Echo(WSListener):
        waiter: asyncio.Future[None] | None = None

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT and self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)

    transport, client = await ws_connect(Echo, url)
    assert isinstance(client, Echo)
    loop = asyncio.get_running_loop()
    samples = []
    for i in range(rounds + 100):
        client.waiter = loop.create_future()
        t0 = time.perf_counter()
        transport.send(WSMsgType.TEXT, CANCEL_SIZED)
        await client.waiter
        if i >= 100:
            samples.append((time.perf_counter() - t0) * 1e6)
    transport.disconnect()
    samples.sort()
    return {"echo_p50_us": statistics.median(samples), "echo_p99_us": samples[int(len(samples) * 0.99)]}


async def serve_echo(port: int, read_buffer: int = 2048) -> None:
    """The floor server: echoes text frames; ``push N`` answers N update-sized frames, then a response."""
    from picows import WSFrame, WSListener, WSMsgType, ws_create_server

    class Echo(WSListener):
        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT:
                payload = frame.get_payload_as_bytes()
                if payload.startswith(b"push "):
                    for i in range(int(payload[5:])):
                        transport.send(WSMsgType.TEXT, UPDATE % i)
                    transport.send(WSMsgType.TEXT, b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}')
                    return
                transport.send(WSMsgType.TEXT, payload)
            elif frame.msg_type == WSMsgType.CLOSE:
                transport.send_close(frame.get_close_code())
                transport.disconnect()

    server = await ws_create_server(
        lambda _r: Echo(), "127.0.0.1", port, backlog=4096, read_buffer_init_size=read_buffer
    )
    await server.serve_forever()


async def _with_server(argv: list[str], port: int, measure: Any) -> Any:
    proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.DEVNULL)
    try:
        await wait_listening(port, proc)
        return await measure(proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def run_hosting(connections: int, cancels: int, updates: int = WS_UPDATES) -> dict[str, dict[str, Any]]:
    """The scenario's results by scenario name, then target (``acp_fast``, ``floor``), as the bench records them."""
    from .ws_load import cancel_latency, throughput

    raise_fd_limit()
    port = free_port()

    ours: dict[str, float] = await _with_server(
        demo_server_argv(port, connections),
        port,
        lambda proc: measure_host(f"ws://127.0.0.1:{port}/acp", proc.pid, connections, cancels),
    )
    port = free_port()  # a fresh server: the last one is still ending the connections it held
    updates_url = f"ws://127.0.0.1:{port}/acp"
    ours.update(await _with_server(demo_server_argv(port, 100), port, lambda _proc: throughput(updates_url, updates)))
    port = free_port()

    async def echo_and_push(_proc: asyncio.subprocess.Process) -> dict[str, float]:
        url = f"ws://127.0.0.1:{port}/"
        return {**await echo_rtt(url, max(cancels, 100)), **await throughput(url, updates, push=True)}

    floor: dict[str, float] = await _with_server(echo_server_argv(port), port, echo_and_push)
    port = free_port()

    async def floor_agent(_proc: asyncio.subprocess.Process) -> dict[str, float]:
        url = f"ws://127.0.0.1:{port}/"
        cancel = await cancel_latency(url, max(cancels, 100))
        return {**{f"cancel_{k}": v for k, v in cancel.items()}, **await throughput(url, updates)}

    agent: dict[str, float] = await _with_server(ws_floor_argv(port), port, floor_agent)
    correct = ours["wrong_answers"] == 0
    results: dict[str, dict[str, Any]] = {
        "ws_setup_per_s": {"acp_fast": {"per_s": ours["setup_per_s"], "n": connections, "correct": True}},
        "ws_idle_rss": {"acp_fast": {"kib_per_conn": ours["kib_per_conn"], "n": connections, "correct": True}},
        "ws_cancel": {
            "acp_fast": {"p50_us": ours["cancel_p50_us"], "p99_us": ours["cancel_p99_us"], "correct": correct},
            "floor": {"p50_us": floor["echo_p50_us"], "p99_us": floor["echo_p99_us"], "correct": True},
        },
        "ws_cancel_vs_agent": {
            "acp_fast": {"p50_us": ours["cancel_p50_us"], "p99_us": ours["cancel_p99_us"], "correct": correct},
            "floor": {
                "p50_us": agent["cancel_p50_us"],
                "p99_us": agent["cancel_p99_us"],
                "correct": agent["cancel_wrong_answers"] == 0,
            },
        },
    }
    # ws_updates_*: the floor is the picows+orjson agent (the goal's yardstick); ws_push_*: the pre-encoded push.
    for conns in (1, 100):
        key = f"updates_{conns}_per_s"
        results[f"ws_updates_{conns}"] = {
            "acp_fast": {"per_s": ours[key], "n": updates, "correct": True},
            "floor": {"per_s": agent[key], "n": updates, "correct": True},
        }
        results[f"ws_push_{conns}"] = {
            "acp_fast": {"per_s": ours[key], "n": updates, "correct": True},
            "floor": {"per_s": floor[key], "n": updates, "correct": True},
        }
    return results


def _main() -> None:
    import argparse

    import uvloop

    parser = argparse.ArgumentParser(description="the hosting floor server (started by acp-fast bench --hosting)")
    parser.add_argument("--echo", type=int, required=True, metavar="PORT")
    uvloop.run(serve_echo(parser.parse_args().echo))


if __name__ == "__main__":
    _main()
