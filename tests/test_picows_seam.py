"""The one private picows entry acp_fast relies on fails loudly, naming what moved.

``hosting/front.py:hand_to_picows`` builds picows' server protocol itself (the
constructor ``ws_create_server`` uses, which picows does not document) so that
one port can serve both the WebSocket and the HTTP profile. A picows release
that changes that constructor must fail here, with the version in the message,
rather than somewhere inside a hosting test.
"""

from __future__ import annotations

import asyncio
import socket
from importlib.metadata import version

import pytest

picows = pytest.importorskip("picows")

from picows import WSFrame, WSListener, WSMsgType, WSTransport, WSUpgradeRequest  # noqa: E402

from acp_fast.hosting import front  # noqa: E402
from acp_fast.wire.limits import Limits  # noqa: E402

UPGRADE = (
    b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


class _Echo(WSListener):
    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type is WSMsgType.TEXT:
            transport.send(WSMsgType.TEXT, frame.get_payload_as_bytes())


def test_hand_to_picows_builds_the_server_protocol_of_the_installed_release() -> None:
    async def body() -> bytes:
        loop = asyncio.get_running_loop()
        server_sock, client_sock = socket.socketpair()
        routed: list[WSUpgradeRequest] = []

        def route(request: WSUpgradeRequest) -> WSListener:
            routed.append(request)
            return _Echo()

        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, server_sock)
        try:
            front.hand_to_picows(transport, UPGRADE, route, Limits(), unix=True)
        except TypeError as exc:
            pytest.fail(
                f"picows {version('picows')} changed the server protocol's constructor that "
                f"hosting/front.py:hand_to_picows calls ({exc}); update it there"
            )
        reader, writer = await asyncio.open_connection(sock=client_sock)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert routed and routed[0].path == b"/acp"
        writer.write(bytes([0x81, 0x82, 0, 0, 0, 0]) + b"hi")  # masked text frame, zero mask
        frame = await asyncio.wait_for(reader.readexactly(4), 10)
        writer.close()
        transport.close()
        assert frame == bytes([0x81, 0x02]) + b"hi"
        return head

    head = asyncio.run(body())
    assert head.startswith(b"HTTP/1.1 101"), head
