"""A raw JSON-RPC-over-WebSocket client for hosting tests (loopback only, event-driven waits)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import struct
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

PROTOCOL_VERSION = 1
_ids = itertools.count(1)


class WsClient:
    """Sends raw frames or JSON-RPC messages; records every incoming text message."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.messages: list[dict[str, Any]] = []
        self.non_json: list[str] = []
        self.closed = asyncio.Event()
        self._changed = asyncio.Event()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.close_exc: ConnectionClosed | None = None
        self.auto_answer: Callable[[dict[str, Any]], Any] | None = None

    @classmethod
    async def open(cls, url: str, **kwargs: Any) -> WsClient:
        ws = await connect(url, compression=None, max_size=None, **kwargs)
        return cls(ws)

    @property
    def connection_id(self) -> str | None:
        assert self.ws.response is not None
        return self.ws.response.headers.get("Acp-Connection-Id")

    @property
    def close_code(self) -> int | None:
        rcvd = self.ws.protocol.close_rcvd
        return rcvd.code if rcvd is not None else None

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, bytes):
                    continue
                try:
                    msg = json.loads(frame)
                except ValueError:
                    self.non_json.append(frame)
                    continue
                self.messages.append(msg)
                if self.auto_answer is not None and "method" in msg and "id" in msg:
                    result = self.auto_answer(msg)
                    if result is not None:
                        await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                self._changed.set()
        except ConnectionClosed as exc:
            self.close_exc = exc
        finally:
            self.closed.set()
            self._changed.set()

    async def send(self, obj: Any) -> None:
        await self.ws.send(json.dumps(obj))

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def request_nowait(self, method: str, params: Any = None) -> int:
        rid = next(_ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        return rid

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        rid = await self.request_nowait(method, params)
        return await self.response(rid)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def response(self, rid: Any) -> dict[str, Any]:
        return await self.wait_for(lambda: self.find(rid))

    def find(self, rid: Any) -> dict[str, Any] | None:
        for m in self.messages:
            if m.get("id") == rid and "method" not in m:
                return m
        return None

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.messages
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
        ]

    async def wait_for(self, predicate: Callable[[], Any], bound: int = 100_000) -> Any:
        """Wait for ``predicate`` to hold, re-checking after each incoming message (not on a clock)."""
        for _ in range(bound):
            value = predicate()
            if value:
                return value
            if self.closed.is_set():
                value = predicate()
                if value:
                    return value
                raise AssertionError("the connection closed before the condition held")
            self._changed.clear()
            await self._changed.wait()
        raise AssertionError("condition never held")

    async def initialize(self) -> dict[str, Any]:
        resp = await self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}})
        assert "result" in resp, resp
        return resp["result"]

    async def new_session(self) -> str:
        resp = await self.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert "result" in resp, resp
        return str(resp["result"]["sessionId"])

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


def client_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0) -> bytes:
    """One masked client frame; ``rsv`` is the reserved bits already shifted into place (0x40 = RSV1)."""
    mask = os.urandom(4)
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([0x80 | size])
    else:
        head += bytes([0x80 | 126]) + struct.pack(">H", size)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One unmasked server frame: (first byte, payload)."""
    b0, b1 = await reader.readexactly(2)
    size = b1 & 0x7F
    if size == 126:
        size = struct.unpack(">H", await reader.readexactly(2))[0]
    elif size == 127:
        size = struct.unpack(">Q", await reader.readexactly(8))[0]
    return b0, await reader.readexactly(size)
