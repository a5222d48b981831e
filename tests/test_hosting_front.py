"""One front on the port: the request head decides between picows (upgrade) and HTTP/1.1; unix sockets.

Loopback TCP on 127.0.0.1 and unix sockets under the test's tmp_path; waits
are on incoming data, never on time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.client import unix_connect

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, serve_ws
from acp_fast.wire.limits import Limits
from tests.http_helpers import HttpAcpClient
from tests.ws_helpers import WsClient

_UPGRADE = (
    b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def _unix_host(tmp_path: Any, **kwargs: Any) -> tuple[AcpHost, str]:
    path = str(tmp_path / "acp.sock")
    host = await serve_ws(lambda: DemoAgent(pace_ms=1), unix_path=path, **kwargs)
    return host, path


def test_websocket_walk_over_a_unix_socket(run: Any, tmp_path: Any) -> None:
    """picows sets TCP options on connect; on a unix socket that used to crash the loop."""

    async def main() -> None:
        host, path = await _unix_host(tmp_path)
        try:
            c = WsClient(await unix_connect(path, "ws://localhost/acp", compression=None, max_size=None))
            assert c.connection_id
            await c.initialize()
            sid = await c.new_session()
            done = await c.request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 5 0"}]}
            )
            assert done["result"] == {"stopReason": "end_turn"}
            assert len([u for u in c.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]) == 5
            await c.close()
        finally:
            await host.drain()
        assert host.counts["accepted"] == 1

    run(main())


def test_http_health_over_a_unix_socket(run: Any, tmp_path: Any) -> None:
    async def main() -> None:
        host, path = await _unix_host(tmp_path)
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await reader.read()
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok\n"), answer
        finally:
            await host.drain()

    run(main())


def test_upgrade_head_split_across_reads_is_handed_over_whole(run: Any) -> None:
    """The front buffers a head that arrives in pieces, then picows gets every byte of it."""

    async def main() -> None:
        host = await serve_ws(lambda: DemoAgent(pace_ms=1), "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            for i in range(0, len(_UPGRADE), 7):
                writer.write(_UPGRADE[i : i + 7])
                await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101") and b"Acp-Connection-Id" in head, head
            writer.close()
        finally:
            await host.drain()

    run(main())


def test_http10_health_check_is_answered(run: Any) -> None:
    """HAProxy's default httpchk speaks HTTP/1.0; picows alone refused it."""

    async def main() -> None:
        host = await serve_ws(lambda: DemoAgent(pace_ms=1), "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
            answer = await reader.read()
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ready\n"), answer
        finally:
            await host.drain()

    run(main())


def test_request_head_over_the_limit_gets_431(run: Any) -> None:
    async def main() -> None:
        host = await serve_ws(lambda: DemoAgent(pace_ms=1), "127.0.0.1", 0, limits=Limits(max_request_head_bytes=1024))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            writer.write(b"GET /acp HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 2048)
            answer = await reader.read()
            writer.close()
            assert answer.startswith(b"HTTP/1.1 431"), answer
        finally:
            await host.drain()

    run(main())


def test_streamable_http_walk_over_a_unix_socket(run: Any, tmp_path: Any) -> None:
    async def main() -> None:
        host, path = await _unix_host(tmp_path)
        try:
            c = HttpAcpClient(path)
            await c.initialize()
            sid = await c.new_session()
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 4 0"}]}
            done = await c.request("session/prompt", prompt, sid)
            assert done["result"] == {"stopReason": "end_turn"}
            assert len([u for u in c.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]) == 4
            assert (await c.delete()).status == 202
        finally:
            await host.drain()

    run(main())
