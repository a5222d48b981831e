"""permessage-deflate (RFC 7692), on by ``Limits.ws_deflate``: negotiation, round trips, bounds, protocol errors.

Negotiation and (de)compression are checked on their own; the round trips use
the ``websockets`` client, which speaks the extension; the protocol errors use
raw frames on a loopback socket so that every reserved bit is under the test's
control. Waits are on incoming messages, never on time.
"""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import zlib
from typing import Any

import pytest

pytest.importorskip("picows")

from websockets.asyncio.client import connect
from websockets.extensions.permessage_deflate import PerMessageDeflate as ClientDeflate

from acp_fast.hosting import AcpHost
from acp_fast.transports.ws_deflate import (
    InflateError,
    InflateTooBig,
    PerMessageDeflate,
    inflate,
    negotiate,
)
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host as _with_host
from tests.ws_helpers import WsClient, read_frame
from tests.ws_helpers import client_frame as _frame

ON = Limits(ws_deflate=True)


# -- negotiation -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("offers", "answer"),
    [
        (["permessage-deflate"], "permessage-deflate; server_no_context_takeover; client_no_context_takeover"),
        (
            ["permessage-deflate; client_max_window_bits"],
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        ),
        (
            ["permessage-deflate; client_max_window_bits=10; server_no_context_takeover"],
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        ),
        (
            ['permessage-deflate; server_max_window_bits="10"'],
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10",
        ),
        # an 8-bit server window cannot be honoured by zlib: that offer is declined, the next one taken
        (
            ["permessage-deflate; server_max_window_bits=8, permessage-deflate"],
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        ),
        (["x-webkit-deflate-frame", "PerMessage-Deflate"], "permessage-deflate; server_no_context_takeover; "
         "client_no_context_takeover"),
    ],
)
def test_offers_we_can_honour_are_accepted_without_context_takeover(offers: list[str], answer: str) -> None:
    agreed = negotiate(offers)
    assert agreed is not None
    assert agreed.response == answer


@pytest.mark.parametrize(
    "offers",
    [
        [],
        ["x-webkit-deflate-frame"],
        ["permessage-deflate; server_max_window_bits=8"],
        ["permessage-deflate; server_max_window_bits=16"],
        ["permessage-deflate; server_max_window_bits=010"],
        ["permessage-deflate; server_max_window_bits"],  # a value is required in an offer
        ["permessage-deflate; client_max_window_bits=7"],
        ["permessage-deflate; server_no_context_takeover=1"],
        ["permessage-deflate; server_no_context_takeover; server_no_context_takeover"],
        ["permessage-deflate; mystery_param"],
    ],
)
def test_offers_we_cannot_honour_are_declined(offers: list[str]) -> None:
    assert negotiate(offers) is None


# -- compression ---------------------------------------------------------------------------------------
def test_each_message_inflates_alone_so_no_context_is_kept_between_messages() -> None:
    deflate = PerMessageDeflate()
    text = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"chunk"}}}'
    first, second = deflate.compress(text), deflate.compress(text)
    assert first == second  # the second would be a back-reference to the first if history were kept
    for payload in (first, second):
        assert zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff") == text
    assert inflate(first, len(text)) == text


def test_a_zip_bomb_stops_at_the_size_limit() -> None:
    bomb = PerMessageDeflate().compress(b" " * (8 << 20))  # 8 MiB of spaces: about 8 KiB compressed
    assert len(bomb) < 16 << 10
    with pytest.raises(InflateTooBig):
        inflate(bomb, 64 << 10)
    assert len(inflate(bomb, 8 << 20)) == 8 << 20


def test_a_stream_that_is_not_deflate_is_refused() -> None:
    with pytest.raises(InflateError):
        inflate(b"\xff\xff\xff\xff not deflate", 1 << 20)


# -- over a socket ---------------------------------------------------------------------------------------
async def _deflate_client(host: AcpHost) -> WsClient:
    ws = await connect(f"ws://127.0.0.1:{host.port}/acp", compression="deflate", max_size=None)
    return WsClient(ws)


def test_a_deflate_client_walks_the_demo_compressed_both_ways(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await _deflate_client(host)
        assert c.ws.response is not None
        assert "permessage-deflate" in c.ws.response.headers.get("Sec-WebSocket-Extensions", "")
        assert any(isinstance(e, ClientDeflate) for e in c.ws.protocol.extensions)
        await c.initialize()  # compressed by the client: the server inflated it
        sid = await c.new_session()
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 40 0"}]}
        done = await c.request("session/prompt", prompt)
        assert done["result"] == {"stopReason": "end_turn"}
        chunks = [u["content"]["text"] for u in c.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert chunks == [f"chunk {i} " for i in range(40)]
        # a fragmented compressed message: the server reassembles, then inflates the whole
        frames = ['{"jsonrpc":"2.0","id":"frag","method":"session/set_mode",', '"params":{"sessionId":"']
        frames += [sid, '","modeId":"code"}}']
        await c.ws.send(iter(frames))
        assert (await c.response("frag"))["result"] == {}
        await c.close()

    run(_with_host(body, limits=ON))


def test_deflate_is_declined_when_off_which_is_the_default(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await _deflate_client(host)
        assert c.ws.response is not None
        assert "Sec-WebSocket-Extensions" not in c.ws.response.headers
        assert c.ws.protocol.extensions == []
        await c.initialize()
        await c.close()

    assert Limits().ws_deflate is False
    run(_with_host(body, limits=Limits()))


def test_a_compressed_message_that_inflates_past_max_line_bytes_closes_1009(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await _deflate_client(host)
        await c.initialize()
        await c.send_raw('"' + " " * (1 << 20) + '"')  # 1 MiB inflated, a few KiB on the wire
        await c.closed.wait()
        assert c.close_code == 1009
        assert host.counts["connections"] <= 1

    run(_with_host(body, limits=Limits(ws_deflate=True, max_line_bytes=64 << 10)))


# -- reserved bits, raw frames -----------------------------------------------------------------------------
async def _raw_close_code(
    host: AcpHost, frames: list[bytes], offer: bool, seen: list[tuple[int, bytes]] | None = None
) -> tuple[int, bool]:
    """Upgrade (offering deflate or not), send ``frames``, return (close code, whether deflate was agreed).

    With ``seen``, the first frame before the close frame is added to it as (first byte, payload),
    and the client then closes with 1000.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /acp HTTP/1.1",
        f"Host: 127.0.0.1:{host.port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    if offer:
        lines.append("Sec-WebSocket-Extensions: permessage-deflate")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    agreed = b"permessage-deflate" in head.lower()
    for f in frames:
        writer.write(f)
    code = -1
    for _ in range(1000):  # frames until the close frame (answers to what was sent may come first)
        b0, payload = await read_frame(reader)
        if b0 & 0x0F == 0x8:
            code = struct.unpack(">H", payload[:2])[0]
            break
        if seen is not None:
            seen.append((b0, payload))
            writer.write(_frame(0x8, struct.pack(">H", 1000)))  # the answer came: close
    writer.close()
    return code, agreed


INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'


def _compressed(data: bytes) -> bytes:
    return PerMessageDeflate().compress(data)


@pytest.mark.parametrize(
    ("limits", "offer", "frames"),
    [
        # RSV1 when deflate was not agreed: the server has it off, or the client did not offer it
        (Limits(), True, [_frame(0x1, _compressed(INIT), rsv=0x40)]),
        (ON, False, [_frame(0x1, _compressed(INIT), rsv=0x40)]),
        # RSV1 on a continuation frame, with deflate agreed
        (ON, True, [_frame(0x1, _compressed(INIT)[:5], fin=False, rsv=0x40), _frame(0x0, b"x", rsv=0x40)]),
        # RSV1 on a control frame (a close; picows answers pings itself), and RSV2 / RSV3, which nothing defines
        (ON, True, [_frame(0x8, struct.pack(">H", 1000), rsv=0x40)]),
        (ON, True, [_frame(0x1, INIT, rsv=0x20)]),
        (ON, True, [_frame(0x1, INIT, rsv=0x10)]),
        # a compressed message that is not a deflate stream
        (ON, True, [_frame(0x1, b"\xff\xff\xff\xff not deflate", rsv=0x40)]),
    ],
    ids=["server-off", "not-offered", "continuation", "control", "rsv2", "rsv3", "not-deflate"],
)
def test_reserved_bits_outside_an_agreed_extension_close_1002(
    run: Any, limits: Limits, offer: bool, frames: list[bytes]
) -> None:
    async def body(host: AcpHost) -> None:
        code, agreed = await _raw_close_code(host, frames, offer)
        assert agreed == (offer and limits.ws_deflate)
        assert code == 1002

    run(_with_host(body, limits=limits))


def test_a_raw_compressed_initialize_is_answered(run: Any) -> None:
    """The positive twin of the raw cases: the same RSV1 frame is a valid message once deflate is agreed."""

    async def body(host: AcpHost) -> None:
        seen: list[tuple[int, bytes]] = []
        code, agreed = await _raw_close_code(host, [_frame(0x1, _compressed(INIT), rsv=0x40)], True, seen)
        assert agreed
        assert code == 1000
        first, payload = seen[0]
        assert first == 0xC1  # FIN, RSV1 (compressed), text
        assert b'"id":1,"result":{' in inflate(payload, 1 << 20)

    run(_with_host(body, limits=ON))
