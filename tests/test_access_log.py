"""The opt-in access log (acp_fast/observability/access_log.py) over real loopback sockets."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from acp_fast.hosting import AcpHost, bearer_token
from acp_fast.observability.access_log import LOGGER
from tests.host_helpers import with_host
from tests.ws_helpers import WsClient


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[list[str]]:
    handler = _Lines()
    log = logging.getLogger(LOGGER)
    log.addHandler(handler)  # the access log then adds no stderr handler of its own
    try:
        yield handler.lines
    finally:
        log.removeHandler(handler)


async def _http(port: int, head: str, body: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + body)
    data = await reader.read()
    writer.close()
    return data


def test_json_lines_for_http_and_websocket(run: Any, lines: list[str]) -> None:
    async def body(host: AcpHost) -> None:
        await _http(host.port, "GET /healthz?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        await _http(
            host.port,
            "POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer t0k\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(init)}\r\nConnection: close\r\n\r\n",
            init.encode(),
        )
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", additional_headers={"Authorization": "Bearer t0k"})
        await c.initialize()
        await c.close()
        for _ in range(100_000):  # the WebSocket's end ran (the Streamable HTTP connection stays)
            if host.counts["connections"] == host.counts["http_connections"]:
                break
            await asyncio.sleep(0)
        refused = await _http(host.port, "GET /acp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert b" 401 " in refused.split(b"\r\n", 1)[0]

    run(with_host(body, access_log="json", authorize=bearer_token("t0k")))
    records = [json.loads(line) for line in lines]
    health, post, ws, refused = records
    assert (health["method"], health["path"], health["status"], health["principal"]) == ("GET", "/healthz", 200, "-")
    assert health["remote"] == "127.0.0.1" and health["duration_s"] >= 0
    assert (post["method"], post["path"], post["status"]) == ("POST", "/acp", 200)
    assert len(post["connection"]) == 8, post  # the new connection's id, from the answer's headers
    assert (ws["method"], ws["path"], ws["status"], ws["close"]) == ("GET", "/acp", 101, 1000)
    assert ws["principal"].startswith("authorization:") and len(ws["principal"]) == len("authorization:") + 8
    assert len(ws["connection"]) == 8
    assert (refused["path"], refused["status"]) == ("/acp", 401)


def test_text_lines(run: Any, lines: list[str]) -> None:
    async def body(host: AcpHost) -> None:
        await _http(host.port, "GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

    run(with_host(body, access_log="text"))
    (line,) = lines
    assert line.startswith('127.0.0.1 "GET /nowhere" 404 ') and line.endswith(" principal=- conn=-"), line


def test_off_by_default(run: Any, lines: list[str]) -> None:
    async def body(host: AcpHost) -> None:
        assert host.access_log is None
        await _http(host.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

    run(with_host(body))
    assert lines == []


def test_refusals_the_channel_answers_itself_are_logged_once(run: Any, lines: list[str]) -> None:
    """A head that cannot be read (400) or is too large (431) gets a line with ``-`` for method and path;
    a body refused after its head was read (413) keeps its one line from the head's hook."""

    async def body(host: AcpHost) -> None:
        bad = await _http(host.port, "GET /healthz HTTP/1.1\nHost: x\n\n")
        assert b" 400 " in bad.split(b"\r\n", 1)[0]
        big = await _http(host.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + "a" * (20 * 1024) + "\r\n\r\n")
        assert b" 431 " in big.split(b"\r\n", 1)[0]
        huge = host.limits.max_line_bytes + 1
        too_long = await _http(
            host.port,
            "POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {huge}\r\n\r\n",
        )
        assert b" 413 " in too_long.split(b"\r\n", 1)[0]

    run(with_host(body, access_log="json"))
    records = [json.loads(line) for line in lines]
    assert [(r["method"], r["path"], r["status"]) for r in records] == [
        ("-", "-", 400),
        ("-", "-", 431),
        ("POST", "/acp", 413),
    ], records
    assert all(r["remote"] == "127.0.0.1" for r in records)
