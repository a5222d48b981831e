"""WebSocket hardening, each case over a real loopback socket.

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

import pytest

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from acp_fast.transports.output_cap import OutputCap
from acp_fast.wire.limits import Limits
from tests.host_helpers import wait_counts_zero, with_host
from tests.ws_helpers import WsClient, client_frame, read_frame

#: Generous bound for an answer that should come at once (a hang becomes a failure, not a timing assertion).
BOUND_S = 5.0

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def text(message: Any) -> bytes:
    return client_frame(OP_TEXT, json.dumps(message).encode())


async def raw_upgrade(
    host: AcpHost, extra: bytes = b"", target: bytes = b"/acp"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare socket, upgraded: the test writes frames byte for byte."""
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    writer.write(
        b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
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


# -- a request followed by a control frame in one socket read ----------------------------------------------


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


# -- the output cap means "the client is not reading" ------------------------------------------------------

MiB = 1024 * 1024


class BigUpdates(DemoAgent):
    """A prompt ``big N`` sends one N MiB update, then ends the turn; any extension method answers N MiB."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        words = prompt[0]["text"].split()
        if words[:1] == ["big"]:
            await self.client.agent_message_chunk(session_id, "z" * (int(words[1]) * MiB))
            return {"stopReason": "end_turn"}
        return await super().prompt(session_id, prompt, **kwargs)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * (int(params["mib"]) * MiB)}


def test_large_updates_pass_to_a_reading_client_under_the_default_cap(run: Any) -> None:
    """12 and 24 MiB updates (cap 4 MiB) reach a client that reads; the prompt's answer follows; no 1008."""

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        for mib in (12, 24):
            done = await c.request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"big {mib}"}]}
            )
            assert done.get("result") == {"stopReason": "end_turn"}, str(done)[:200]
            update = c.updates(sid)[-1]
            assert len(update["content"]["text"]) == mib * MiB
            answer = await c.request("_big", {"mib": mib})  # an answer bypasses producer backpressure
            assert len(answer["result"]["data"]) == mib * MiB
            c.messages.clear()
        assert not c.closed.is_set()
        await c.close()
        await wait_counts_zero(host)

    run(with_host(body, factory=BigUpdates), timeout=120)


def test_a_client_that_stops_reading_is_still_closed_1008(run: Any) -> None:
    """Output above the cap that does not shrink for output_stall_timeout_s closes the socket 1008."""

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        c.ws.transport.pause_reading()
        await c.request_nowait("_big", {"mib": 8})
        for _ in range(2000):  # bounded: the stall timer is 0.05 s
            if any(p.out is not None and p.out.is_closing() for p in host.registry.peers):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("never closed")
        c.ws.transport.resume_reading()
        await asyncio.wait_for(c.closed.wait(), BOUND_S * 4)
        assert c.close_code == 1008
        await wait_counts_zero(host)

    limits = Limits(max_buffered_output_bytes=256 * 1024, output_stall_timeout_s=0.05, drain_flush_s=60.0)
    run(with_host(body, factory=BigUpdates, limits=limits))


def test_output_cap_closes_past_one_message_at_once_and_a_stalled_client_after_the_timer(run: Any) -> None:
    """The rule itself (transports/output_cap.py; over a socket R26 stops reading before the ceiling is reached)."""

    async def body() -> None:
        size = [0]
        stalled = asyncio.Event()
        cap = OutputCap(
            asyncio.get_running_loop(),
            cap=100,
            max_message=1000,
            stall_s=0.01,
            size=lambda: size[0],
            on_stalled=stalled.set,
        )
        size[0] = 1000  # one message in flight: above the cap, within cap + one message
        assert not cap.over()
        size[0] = 600  # progress at the first check: it re-arms; at the next, none: the client is not reading
        await asyncio.wait_for(stalled.wait(), BOUND_S)  # no progress since: the client is not reading
        size[0] = 1101
        assert cap.over()
        cap.cancel()

    run(body())


def test_limits_refuse_combinations_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="write_high_water"):
        Limits(max_buffered_output_bytes=1024)
    with pytest.raises(ValueError, match="ping_interval_s"):
        Limits(ping_interval_s=1.0, ping_timeout_s=2.0)


# -- the close code answered to a client's close -----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"", 1000),
        (struct.pack(">H", 1000), 1000),
        (struct.pack(">H", 1001), 1001),
        (struct.pack(">H", 4000) + b"bye", 4000),
        (struct.pack(">H", 1005), 1002),  # "no status": never on the wire
        (struct.pack(">H", 1006), 1002),  # "abnormal": never on the wire
        (struct.pack(">H", 1015), 1002),  # "TLS failure": never on the wire
        (struct.pack(">H", 0), 1002),
        (struct.pack(">H", 5000), 1002),
        (struct.pack(">H", 2500), 1002),
        (b"\x03", 1002),  # a one-byte status
    ],
)
def test_the_clients_close_code_is_echoed_only_when_it_may_be_sent(run: Any, payload: bytes, expected: int) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        writer.write(client_frame(OP_CLOSE, payload))
        assert await close_status(reader) == expected
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


# -- an absolute-form target, as RFC 9112 3.2.2 says a server must take it --------------------------------


@pytest.mark.parametrize("target", [b"http://127.0.0.1/acp", b"HTTP://example.test:8765/acp?x=1"])
def test_an_upgrade_to_an_absolute_form_target_is_served_like_a_post_to_it(run: Any, target: bytes) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host, target=target)  # a 101, not a 404
        writer.write(text(INIT))
        answer = await answer_to(reader, 1)
        assert answer["result"]["protocolVersion"] == 1, answer
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


def test_an_upgrade_to_an_absolute_form_target_without_a_host_is_refused_400_like_a_post(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(
            b"GET http:///acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert head.startswith(b"HTTP/1.1 400"), head
        writer.close()

    run(with_host(body))
