"""Cancel latency during a streaming prompt: the Streamable HTTP profile next to the WebSocket one.

    python benchmarks/hosting_http_cancel.py [--cancels 300]

Starts ``acp-fast demo --listen 127.0.0.1:PORT`` (uvloop) and, in one client
process on uvloop, ``--cancels`` times per profile: starts a long streaming
prompt, waits for its first update, sends ``session/cancel`` and times until
the ``cancelled`` answer arrives (p50/p99, microseconds).

- WebSocket: the picows client of acp_fast/tools/bench/hosting.py (as
  ``benchmarks/hosting_idle.py`` measures it).
- Streamable HTTP: a raw HTTP/1.1 client on keep-alive sockets: the POSTs on
  one socket, the session's event stream on another; the time runs from
  writing the cancel's POST to reading the answer on the session stream (the
  POST's own ``202`` is read afterwards).

The two clients are different code, so the ratio says roughly what the HTTP
profile costs, not an exact figure. The machine is shared: quote one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from acp_fast.tools.bench.hosting import demo_server_argv, free_port, measure_host, wait_listening


class _Http:
    """Keep-alive sockets: one for POSTs, one per event stream."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection_id = ""
        self.writers: list[asyncio.StreamWriter] = []  # a collected StreamWriter closes its socket

    async def _socket(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    @staticmethod
    def _post_bytes(body: bytes, headers: dict[str, str]) -> bytes:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (
            f"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{head}\r\n"
        ).encode() + body

    @staticmethod
    async def _read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return head, await reader.readexactly(length)

    async def open_stream(self, session: str | None) -> asyncio.StreamReader:
        reader, writer = await self._socket()
        self.writers.append(writer)
        extra = f"Acp-Session-Id: {session}\r\n" if session else ""
        writer.write(
            f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {self.connection_id}\r\n"
            f"{extra}\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        return reader


async def _read_until(reader: asyncio.StreamReader, marker: bytes, buf: bytearray) -> None:
    """Read the event stream until ``marker`` appears; what came before it is dropped."""
    while True:
        i = buf.find(marker)
        if i >= 0:
            del buf[: i + len(marker)]
            return
        buf += await reader.read(65536)


async def http_cancels(port: int, cancels: int) -> list[float]:
    client = _Http(port)
    post_r, post_w = await client._socket()
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    post_w.write(client._post_bytes(json.dumps(init).encode(), {}))
    head, _ = await client._read_answer(post_r)
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"acp-connection-id:"):
            client.connection_id = line.split(b":", 1)[1].strip().decode()
    conn_stream = await client.open_stream(None)
    hdr = {"Acp-Connection-Id": client.connection_id}
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
    post_w.write(client._post_bytes(json.dumps(new).encode(), hdr))
    await client._read_answer(post_r)
    buf = bytearray()
    await _read_until(conn_stream, b'"sessionId":"', buf)
    while b'"' not in buf:
        buf += await conn_stream.read(65536)
    sid = buf[: buf.index(b'"')].decode()
    session_stream = await client.open_stream(sid)
    shdr = {**hdr, "Acp-Session-Id": sid}
    cancel = client._post_bytes(
        json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}).encode(), shdr
    )
    samples: list[float] = []
    sbuf = bytearray()
    for i in range(cancels):
        prompt = {
            "jsonrpc": "2.0",
            "id": 100 + i,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]},
        }
        post_w.write(client._post_bytes(json.dumps(prompt).encode(), shdr))
        await client._read_answer(post_r)
        await _read_until(session_stream, b"agent_message_chunk", sbuf)
        t0 = time.perf_counter()
        post_w.write(cancel)
        await _read_until(session_stream, b'"stopReason":"cancelled"', sbuf)
        samples.append((time.perf_counter() - t0) * 1e6)
        await client._read_answer(post_r)
    post_w.close()
    return samples


async def main(cancels: int) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(*demo_server_argv(port, 10), stderr=asyncio.subprocess.DEVNULL)
    try:
        await wait_listening(port, proc)
        ws = await measure_host(f"ws://127.0.0.1:{port}/acp", proc.pid, 1, cancels)
        http = sorted(await http_cancels(port, cancels))
    finally:
        proc.terminate()
        await proc.wait()
    h50, h99 = statistics.median(http), http[int(len(http) * 0.99)]
    print(f"websocket        cancel_p50_us={ws['cancel_p50_us']:.1f}  cancel_p99_us={ws['cancel_p99_us']:.1f}")
    print(f"streamable-http  cancel_p50_us={h50:.1f}  cancel_p99_us={h99:.1f}")
    print(f"http / ws: p50 {h50 / ws['cancel_p50_us']:.2f}x  p99 {h99 / ws['cancel_p99_us']:.2f}x")
    print("(cpu count 2; shared machine, numbers are noisy)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=300)
    args = parser.parse_args()
    import uvloop

    uvloop.run(main(args.cancels))
