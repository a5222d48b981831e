"""The Streamable HTTP profile from the client's side, for ``acp-fast client http://...``.

Messages leave as POSTs on one keep-alive socket, one at a time in the
order the Writer produced them (the host feeds POSTs to the connection in
the order it accepts them, so serial POSTs keep the order). Answers and
agent messages arrive on event streams: the connection stream (a GET with
``Acp-Connection-Id``) and one stream per session (with ``Acp-Session-Id``),
opened when a session id is first seen: in a ``session/new`` answer, or in
a message we send (``session/load`` of a session this connection does not
hold yet). An answer to a request that came on a session stream carries
that session's id, as the host requires. h11 parses every response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import h11
import orjson

from ...client.connection import ClientHandler, ClientSideConnection
from ...wire.limits import Limits
from .links import Link, LinkError, MessageReadControl, Tap, _os_error, message_connection

_CONNECTION_ID = "Acp-Connection-Id"
_SESSION_ID = "Acp-Session-Id"


class _Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class _Socket:
    """One HTTP/1.1 socket: requests in turn, each answer read whole (or streamed to ``on_data``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    async def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        on_head: Callable[[int, dict[str, str]], None] | None = None,
        on_data: Callable[[bytes], None] | None = None,
    ) -> _Reply:
        conn = self.h11
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        if body or method == "POST":
            headers = [*headers, ("Content-Length", str(len(body)))]
        out = conn.send(h11.Request(method=method, target=target, headers=headers)) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        self.writer.write(out)
        status, got, data = 0, {}, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await self.reader.read(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                got = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
                if on_head is not None:
                    on_head(status, got)
            elif isinstance(event, h11.Data):
                if on_data is not None and status == 200:
                    on_data(bytes(event.data))
                else:
                    data += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return _Reply(status, got, bytes(data))

    def close(self) -> None:
        self.writer.close()


class _EventStream:
    """Splits an event stream into the ``data`` of each event."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self._buf = b""
        self._deliver = deliver

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buf:
            event, self._buf = self._buf.split(b"\n\n", 1)
            data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                self._deliver(b"\n".join(data))


class HttpLink(Link):
    """One ACP connection as the Streamable HTTP profile carries it."""

    def __init__(self, url: str, headers: Sequence[tuple[str, str]], limits: Limits) -> None:
        parts = urlsplit(url)
        self.url = url
        self.host = parts.hostname or "127.0.0.1"
        self.ssl = parts.scheme == "https"
        self.port = parts.port or (443 if self.ssl else 80)
        self.target = parts.path or "/"
        self.headers = [("Host", parts.netloc), *headers]
        self.limits = limits
        self.connection_id: str | None = None
        self.failure: str | None = None
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams: dict[str | None, asyncio.Task[None]] = {}
        self._request_session: dict[Any, str] = {}  # agent request id -> the session stream it came on
        self._post_socket: _Socket | None = None
        self._deliver: Callable[[bytes], None] | None = None
        self._ended = False
        self._tasks: set[asyncio.Task[None]] = set()

    def end_reason(self) -> str:
        return self.failure or "the server ended the connection"

    async def _open(self) -> _Socket:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl or None)
        except OSError as exc:
            raise LinkError(f"cannot connect to {self.url}: {_os_error(exc)}") from None
        return _Socket(reader, writer)

    def _end(self, why: str | None) -> None:
        """The connection is over for the client: the Connection sees EOF once."""
        if self._ended:
            return
        self._ended = True
        if why is not None and self.failure is None:
            self.failure = why
        self.client.conn.feed_eof(None)

    # -- outgoing -------------------------------------------------------------------------
    def _send(self, line: bytes) -> None:
        self._out.put_nowait(line)

    async def _sender(self) -> None:
        try:
            while True:
                line = await self._out.get()
                if line is None:
                    return
                await self._post(line)
        except (OSError, h11.ProtocolError) as exc:
            self._end(f"the POST socket to {self.url} failed: {_os_error(exc)}")

    async def _post(self, line: bytes) -> None:
        if self._post_socket is None:
            self._post_socket = await self._open()
        headers = [
            *self.headers,
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ]
        session_id = self._session_of(line)
        if self.connection_id is not None:
            headers.append((_CONNECTION_ID, self.connection_id))
        if session_id is not None:
            headers.append((_SESSION_ID, session_id))
            self._open_stream(session_id)
        reply = await self._post_socket.request("POST", self.target, headers, line)
        if self.connection_id is None:  # the initialize POST: its answer is the body
            if reply.status != 200:
                self._end(f"{self.url} answered the initialize POST with HTTP {reply.status}{_body_hint(reply.body)}")
                return
            connection_id = reply.headers.get(_CONNECTION_ID.lower())
            if reply.body and self._deliver is not None:
                self._deliver(reply.body)
            if not connection_id:
                self._end(f"{self.url} opened no connection (no {_CONNECTION_ID} header)")
                return
            self.connection_id = connection_id
            self._open_stream(None)
            return
        if reply.status == 404:
            self._end(f"{self.url} no longer knows this connection (HTTP 404)")
        elif reply.status >= 400:
            self._end(f"{self.url} refused a POST with HTTP {reply.status}{_body_hint(reply.body)}")
        elif reply.body and self._deliver is not None:
            self._deliver(reply.body)

    def _session_of(self, line: bytes) -> str | None:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(msg, dict):
            return None
        params = msg.get("params")
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            return str(params["sessionId"])
        if "method" not in msg and "id" in msg:  # our answer to one of the agent's requests
            return self._request_session.pop(_key(msg["id"]), None)
        return None

    # -- incoming -------------------------------------------------------------------------
    def _open_stream(self, session_id: str | None) -> None:
        if session_id in self._streams or self._ended:
            return
        task = asyncio.get_running_loop().create_task(self._read_stream(session_id))
        self._streams[session_id] = task

    async def _read_stream(self, session_id: str | None) -> None:
        assert self.connection_id is not None
        headers = [*self.headers, ("Accept", "text/event-stream"), (_CONNECTION_ID, self.connection_id)]
        if session_id is not None:
            headers.append((_SESSION_ID, session_id))
        events = _EventStream(lambda data: self._on_event(session_id, data))
        sock: _Socket | None = None
        try:
            sock = await self._open()
            reply = await sock.request("GET", self.target, headers, on_data=events.feed)
            if session_id is None:
                self._end(None if reply.status == 200 else f"{self.url} refused the event stream (HTTP {reply.status})")
        except (OSError, LinkError, h11.ProtocolError) as exc:
            if session_id is None:
                self._end(f"the event stream from {self.url} failed: {_os_error(exc)}")
        finally:
            if sock is not None:
                sock.close()

    def _on_event(self, session_id: str | None, data: bytes) -> None:
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError:
            msg = None
        if isinstance(msg, dict):
            if session_id is not None and "method" in msg and "id" in msg:
                self._request_session[_key(msg["id"])] = session_id
            result = msg.get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                self._open_stream(str(result["sessionId"]))  # session/new: its updates wait on its stream
        if self._deliver is not None:
            self._deliver(data)

    # -- lifetime -------------------------------------------------------------------------
    def _start(self, handler: ClientHandler, tap: Tap | None) -> ClientSideConnection:
        control = MessageReadControl(lambda: None, lambda: None, lambda: self._end(None))
        client, deliver = message_connection(self.limits, handler, tap, self._send, self._close_writes, control)
        self._deliver = deliver
        self._sender_task = asyncio.get_running_loop().create_task(self._sender())
        return client

    def _close_writes(self) -> None:
        self._out.put_nowait(None)

    async def close(self) -> None:
        """DELETE the connection (its EOF on the host), then end every stream, bounded."""
        try:
            async with asyncio.timeout(5):
                self._out.put_nowait(None)
                await self._sender_task
                if self.connection_id is not None and not self._ended:
                    sock = await self._open()
                    try:
                        await sock.request("DELETE", self.target, [*self.headers, (_CONNECTION_ID, self.connection_id)])
                    finally:
                        sock.close()
        except (TimeoutError, OSError, LinkError, h11.ProtocolError):
            pass
        self._end(None)
        for task in self._streams.values():
            task.cancel()
        if self._post_socket is not None:
            self._post_socket.close()
        await super().close()


def _key(rid: Any) -> Any:
    return ("s", rid) if isinstance(rid, str) else ("n", rid)


def _body_hint(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().splitlines()
    return f": {text[0][:200]}" if text else ""


async def open_http(
    url: str, headers: Sequence[tuple[str, str]], handler: ClientHandler, limits: Limits, tap: Tap | None = None
) -> HttpLink:
    """Reach a hosted agent over Streamable HTTP; the connection opens with the initialize POST."""
    link = HttpLink(url, headers, limits)
    link._post_socket = await link._open()  # connection refused is reported here, before initialize
    link.client = link._start(handler, tap)
    link.client.run()
    return link
