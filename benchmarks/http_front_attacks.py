"""Two attacks on the HTTP/1.1 front, measured against a host in its own process (issues 22 and 27).

1. Stalled bodies: four sockets each start a 32 MiB ``POST /acp`` body, send
   as much of it as the server reads, and never finish; the host's auth hook
   refuses everyone. Reported: the host's RSS growth, how many sockets got an
   answer, and how many the host still holds open.
2. Pipelining: 300 ``POST /acp {}`` in one write on one socket; reported: how
   many were answered before the socket ended or went quiet.

Run from the repository: ``python benchmarks/http_front_attacks.py`` (the
host is ``acp_fast`` as importable from here, so a second checkout measures
the base).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from acp_fast.tools.bench.hosting import rss_kib

_HOST = """
import asyncio, sys
from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, ListenAddress

async def main():
    host = AcpHost(DemoAgent, authorize=(lambda headers: False) if sys.argv[1] == "refuse" else None)
    await host.start(ListenAddress(host="127.0.0.1", port=0))
    print(host.port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

BODY = 32 * 1024 * 1024


def _start(mode: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", _HOST, mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


async def _stalled_body(port: int) -> tuple[bool, bool]:
    """(answered, still open after the client stopped sending for a while)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n"
    writer.write(head.encode())
    chunk = b" " * 65536
    sent = 0
    try:
        while sent < BODY - len(chunk):  # all but the last 64 KiB: the body never completes
            writer.write(chunk)
            sent += len(chunk)
            try:
                await asyncio.wait_for(writer.drain(), 2.0)
            except TimeoutError:
                break  # the server stopped reading
    except ConnectionError:
        pass
    data, closed = await _read_until_eof(reader, 3.0)  # past any linger
    writer.close()
    return data.startswith(b"HTTP/1.1 4"), not closed


async def _read_until_eof(reader: asyncio.StreamReader, seconds: float) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the socket within ``seconds``."""
    data = b""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    try:
        while loop.time() < end:
            chunk = await asyncio.wait_for(reader.read(65536), end - loop.time())
            if not chunk:
                return data, True
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionError:
        return data, True
    return data, False


async def _pipelined(port: int, n: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    one = b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    writer.write(one * n)
    answered = 0
    try:
        while answered < n:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3.0)
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            answered += 1
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        pass
    writer.close()
    return answered


def main() -> None:
    out: dict[str, object] = {"acp_fast": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    proc, port = _start("refuse")
    try:
        time.sleep(0.3)
        before = rss_kib(proc.pid)

        async def four() -> list[tuple[bool, bool]]:
            return await asyncio.gather(*(_stalled_body(port) for _ in range(4)))

        results = asyncio.run(four())
        after = rss_kib(proc.pid)
        out["stalled_bodies"] = {
            "rss_growth_mib": round((after - before) / 1024, 1),
            "answered": sum(a for a, _ in results),
            "still_open": sum(o for _, o in results),
        }
    finally:
        proc.kill()
        proc.wait()
    proc, port = _start("open")
    try:
        out["pipelined_300_answered"] = asyncio.run(_pipelined(port, 300))
    finally:
        proc.kill()
        proc.wait()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
