"""WebSocket hardening (issues 22 and 27), each case over a real loopback socket.

Clients write raw, masked RFC 6455 frames (tests/ws_helpers.py), so every byte
the server sends back, and when it closes, is visible. Waits are bounded
(``asyncio.wait_for`` turns a hang into a failure); nothing synchronizes on
a clock.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from acp_fast.hosting import AcpHost
from acp_fast.wire.limits import Limits
from tests.host_helpers import wait_counts_zero, with_host
from tests.ws_helpers import client_frame, read_frame

#: Generous bound for an answer that should come at once (a hang becomes a failure, not a timing assertion).
BOUND_S = 5.0

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def text(message: Any) -> bytes:
    return client_frame(OP_TEXT, json.dumps(message).encode())


async def raw_upgrade(host: AcpHost, extra: bytes = b"") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare socket, upgraded: the test writes frames byte for byte."""
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    writer.write(
        b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + extra + b"\r\n"
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    assert head.startswith(b"HTTP/1.1 101"), head
    return reader, writer


async def next_data(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next server frame that is not a ping/pong (bounded)."""
    for _ in range(1000):
        b0, payload = await asyncio.wait_for(read_frame(reader), BOUND_S)
        if b0 & 0x0F not in (OP_PING, OP_PONG):
            return b0, payload
    raise AssertionError("only control frames")


async def answer_to(reader: asyncio.StreamReader, rid: Any) -> dict[str, Any]:
    for _ in range(1000):
        b0, payload = await next_data(reader)
        assert b0 & 0x0F == OP_TEXT, (b0, payload[:80])
        msg: dict[str, Any] = json.loads(payload)
        if msg.get("id") == rid and "method" not in msg:
            return msg
    raise AssertionError("no answer")


async def close_status(reader: asyncio.StreamReader) -> int:
    """Frames up to the server's close; its status; nothing may follow it (RFC 6455 5.5.1)."""
    for _ in range(10_000):
        b0, payload = await next_data(reader)
        if b0 & 0x0F == OP_CLOSE:
            rest = await asyncio.wait_for(reader.read(), BOUND_S)
            assert rest == b"", f"bytes after the close frame: {rest[:120]!r}"
            return int(struct.unpack(">H", payload[:2])[0]) if len(payload) >= 2 else 1005
    raise AssertionError("no close frame")


# -- issue 22.1: a request followed by a control frame in one socket read ----------------------------------


def test_request_and_ping_in_one_write_is_answered(run: Any) -> None:
    """picows answers the PING itself; the request frame before it is still dispatched at once."""

    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        writer.write(text(INIT) + client_frame(OP_PING, b"hi"))
        answer = await answer_to(reader, 1)
        assert "result" in answer, answer
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


def test_request_and_pong_to_the_servers_ping_in_one_write_is_answered(run: Any) -> None:
    """The PONG to the server's own keep-alive ping, behind a request in one write: the request is answered."""

    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        b0, payload = await asyncio.wait_for(read_frame(reader), BOUND_S)
        assert b0 & 0x0F == OP_PING, b0  # the client is silent: the server pings it
        writer.write(text(INIT) + client_frame(OP_PONG, payload))
        answer = await answer_to(reader, 1)
        assert "result" in answer, answer
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(ping_interval_s=0.3, ping_timeout_s=0.3)))
