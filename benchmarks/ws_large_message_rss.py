"""RSS of a host whose idle WebSocket connections each once sent one large message (issue 27 item 4).

A server process (DemoAgent, loopback) serves N raw-socket clients; each
initializes, sends one MESSAGE_MIB MiB text message (a notification nobody
handles), then a request whose answer shows the big one was read. The
server's RSS is read from /proc before, right after, and SETTLE_S later.

    python benchmarks/ws_large_message_rss.py [N] [MESSAGE_MIB] [SETTLE_S] [RELEASE_S]

RELEASE_S is ``Limits.ws_buffer_release_s`` (default 1; a huge value shows the
host as it was before the release existed).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time

from acp_fast.tools.bench.hosting import rss_kib

SERVER = """
import asyncio, sys
from acp_fast.demo import DemoAgent
from acp_fast.hosting import serve_ws
from acp_fast.wire.limits import Limits
async def main():
    limits = Limits(ws_buffer_release_s=float(sys.argv[1]))
    host = await serve_ws(lambda: DemoAgent(pace_ms=1), "127.0.0.1", 0, limits=limits)
    print(host.port, flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def frame(payload: bytes) -> bytes:
    """One masked text frame with a zero mask (the payload goes as is)."""
    size = len(payload)
    if size < 126:
        head = bytes([0x81, 0x80 | size])
    elif size < 65536:
        head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", size)
    else:
        head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", size)
    return head + b"\0\0\0\0" + payload


def read_until(sock: socket.socket, needle: bytes) -> None:
    data = b""
    while needle not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed")
        data += chunk


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 48
    settle = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    release = sys.argv[4] if len(sys.argv) > 4 else "1"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, release], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(
                b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            )
            read_until(s, b"\r\n\r\n")
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
            s.sendall(frame(json.dumps(init).encode()))
            read_until(s, b'"id":1')
            socks.append(s)
        time.sleep(0.5)
        before = rss_kib(proc.pid)
        big = json.dumps({"jsonrpc": "2.0", "method": "_big", "params": {"x": "a" * (mib << 20)}}).encode()
        for s in socks:
            s.sendall(frame(big) + frame(b'{"jsonrpc":"2.0","id":2,"method":"_ping"}'))
            read_until(s, b'"id":2')
        del big
        after = rss_kib(proc.pid)
        time.sleep(settle)
        settled = rss_kib(proc.pid)
        print(
            f"{n} connections, one {mib} MiB message each: server RSS {before} KiB idle before, "
            f"{after} KiB right after (+{after - before}), {settled} KiB {settle:g} s later "
            f"(+{settled - before} KiB, {(settled - before) / n:.1f} KiB per connection)"
        )
        for s in socks:
            s.close()
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
