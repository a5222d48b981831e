"""A raw Streamable HTTP client for hosting tests: h11 over loopback sockets, event-driven waits."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

import h11

PROTOCOL_VERSION = 1
_ids = itertools.count(1)


class Reply:
    """One complete HTTP answer."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.headers!r}, {self.body[:200]!r})"


def _headers(pairs: Any) -> dict[str, str]:
    return {k.decode().lower(): v.decode() for k, v in pairs}


async def open_socket(address: int | str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if isinstance(address, str):
        return await asyncio.open_unix_connection(address)
    return await asyncio.open_connection("127.0.0.1", address)


async def request(
    address: int | str,
    method: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    path: str = "/acp",
) -> Reply:
    """One request on a fresh socket (``Connection: close``); returns the whole answer."""
    reader, writer = await open_socket(address)
    conn = h11.Connection(h11.CLIENT)
    head = [("Host", "127.0.0.1"), ("Connection", "close"), *(headers or {}).items()]
    if body or method == "POST":
        head.append(("Content-Length", str(len(body))))
    out = conn.send(h11.Request(method=method, target=path, headers=head)) or b""
    if body:
        out += conn.send(h11.Data(data=body)) or b""
    out += conn.send(h11.EndOfMessage()) or b""
    writer.write(out)
    status, got, data = 0, {}, bytearray()
    try:
        for _ in range(100_000):
            event = conn.next_event()
            if event is h11.NEED_DATA:
                chunk = await reader.read(65536)
                conn.receive_data(chunk)
                continue
            if isinstance(event, h11.Response):
                status, got = event.status_code, _headers(event.headers)
            elif isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return Reply(status, got, bytes(data))
        raise AssertionError("the answer never ended")
    finally:
        writer.close()


class SseStream:
    """One open GET event stream; every message it carries is recorded."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_message: Callable[[Any], None]
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.status = 0
        self.headers: dict[str, str] = {}
        self.messages: list[Any] = []
        self.comments = 0
        self.ids: list[int] = []  # the ``id:`` of each event that carried one (resumable streams)
        self.opened = asyncio.Event()
        self.closed = asyncio.Event()
        self._on_message = on_message
        self._conn = h11.Connection(h11.CLIENT)
        self._buf = b""
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, address: int | str, headers: dict[str, str], on_message: Callable[[Any], None]) -> SseStream:
        reader, writer = await open_socket(address)
        stream = cls(reader, writer, on_message)
        head = [("Host", "127.0.0.1"), ("Accept", "text/event-stream"), *headers.items()]
        writer.write(
            (stream._conn.send(h11.Request(method="GET", target="/acp", headers=head)) or b"")
            + (stream._conn.send(h11.EndOfMessage()) or b"")
        )
        await stream.opened.wait()
        return stream

    async def _read(self) -> None:
        conn = self._conn
        try:
            for _ in range(10_000_000):
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    chunk = await self.reader.read(65536)
                    conn.receive_data(chunk)
                    continue
                if isinstance(event, h11.Response):
                    self.status, self.headers = event.status_code, _headers(event.headers)
                    self.opened.set()
                elif isinstance(event, h11.Data):
                    self._events(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return
        except (ConnectionError, h11.RemoteProtocolError):
            return
        finally:
            self.opened.set()
            self.closed.set()
            self.writer.close()
            self._on_message(None)

    def _events(self, data: bytes) -> None:
        self._buf += data
        while b"\n\n" in self._buf:
            event, self._buf = self._buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"id: "):
                    self.ids.append(int(line[4:]))
                elif line.startswith(b"data: "):
                    message = json.loads(line[6:])
                    self.messages.append(message)
                    self._on_message(message)
                elif line.startswith(b":"):
                    self.comments += 1

    def close(self) -> None:
        self.writer.transport.abort()


class HttpAcpClient:
    """A Streamable HTTP ACP client: POSTs out, the connection stream and one stream per session in."""

    def __init__(self, address: int | str, headers: dict[str, str] | None = None) -> None:
        self.address = address
        self.headers = dict(headers or {})
        self.connection_id: str | None = None
        self.streams: dict[str | None, SseStream] = {}
        self.messages: list[tuple[str | None, Any]] = []  # (stream's session or None, message)
        self.auto_answer: Callable[[dict[str, Any]], Any] | None = None
        self._changed = asyncio.Event()
        self._pending_answers: list[asyncio.Task[Any]] = []

    def _record(self, session: str | None) -> Callable[[Any], None]:
        def on_message(message: Any) -> None:
            if message is not None:
                self.messages.append((session, message))
                if self.auto_answer is not None and "method" in message and "id" in message:
                    result = self.auto_answer(message)
                    if result is not None:
                        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                        task = asyncio.get_running_loop().create_task(self.post(answer, session=session))
                        self._pending_answers.append(task)
            self._changed.set()

        return on_message

    async def post(self, message: Any, session: str | None = None, raw: bytes | None = None, **extra: str) -> Reply:
        headers = {"Content-Type": "application/json", **self.headers, **extra}
        if self.connection_id is not None:
            headers["Acp-Connection-Id"] = self.connection_id
        if session is not None:
            headers["Acp-Session-Id"] = session
        body = raw if raw is not None else json.dumps(message).encode()
        return await request(self.address, "POST", headers, body)

    async def initialize(self) -> dict[str, Any]:
        reply = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}},
            }
        )
        assert reply.status == 200, reply
        self.connection_id = reply.headers["acp-connection-id"]
        await self.open_stream(None)
        return dict(reply.json()["result"])

    async def open_stream(self, session: str | None, last_event_id: int | None = None) -> SseStream:
        assert self.connection_id is not None
        headers = {**self.headers, "Acp-Connection-Id": self.connection_id}
        if session is not None:
            headers["Acp-Session-Id"] = session
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        stream = await SseStream.open(self.address, headers, self._record(session))
        assert stream.status == 200, stream.status
        self.streams[session] = stream
        return stream

    async def request_nowait(self, method: str, params: Any = None, session: str | None = None) -> int:
        rid = next(_ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        reply = await self.post(message, session=session)
        assert reply.status == 202 and reply.body == b"", reply
        return rid

    async def request(self, method: str, params: Any = None, session: str | None = None) -> dict[str, Any]:
        rid = await self.request_nowait(method, params, session)
        return await self.response(rid)

    async def notify(self, method: str, params: Any, session: str | None = None) -> None:
        reply = await self.post({"jsonrpc": "2.0", "method": method, "params": params}, session=session)
        assert reply.status == 202, reply

    def find(self, rid: Any) -> tuple[str | None, dict[str, Any]] | None:
        for where, m in self.messages:
            if m.get("id") == rid and "method" not in m:
                return where, m
        return None

    async def response(self, rid: Any) -> dict[str, Any]:
        _, message = await self.wait_for(lambda: self.find(rid))
        return message  # type: ignore[no-any-return]

    def updates(self, session: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for where, m in self.messages
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session
        ]

    async def wait_for(self, predicate: Callable[[], Any], bound: int = 100_000) -> Any:
        """Wait for ``predicate`` to hold, re-checking after each incoming message or stream end."""
        for _ in range(bound):
            value = predicate()
            if value:
                return value
            if self.streams and all(s.closed.is_set() for s in self.streams.values()):
                raise AssertionError("every stream ended before the condition held")
            self._changed.clear()
            await self._changed.wait()
        raise AssertionError("condition never held")

    async def new_session(self) -> str:
        resp = await self.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert "result" in resp, resp
        sid = str(resp["result"]["sessionId"])
        await self.open_stream(sid)
        return sid

    async def delete(self) -> Reply:
        assert self.connection_id is not None
        return await request(self.address, "DELETE", {**self.headers, "Acp-Connection-Id": self.connection_id})

    def close(self) -> None:
        for stream in self.streams.values():
            stream.close()
