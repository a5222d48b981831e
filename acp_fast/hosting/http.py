"""One HTTP/1.1 socket after the front: requests parsed by h11, answered in order.

h11 is sans-IO: this class feeds it the socket's bytes and writes what it
produces, so keep-alive, pipelining (the next request is parsed only after
the answer to the previous one went out), ``Content-Length`` and chunked
bodies, ``Connection: close`` and HTTP/1.0 clients are h11's rules, not ours.
A body above ``max_line_bytes`` (one ACP message) is refused ``413``.

A request is handed to ``handler(channel, request, body)``, which answers it
with ``respond`` (now or later: the channel reads no further request
meanwhile, and stops reading the socket while a held request waits) or turns
the socket into a long-lived event stream with ``start_stream``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

import h11

log = logging.getLogger(__name__)

Handler = Callable[["HttpChannel", h11.Request, bytes], None]


class StreamSink:
    """What a channel that carries an event stream reports to (flow control and loss)."""

    def channel_pause_writing(self, channel: HttpChannel) -> None: ...

    def channel_resume_writing(self, channel: HttpChannel) -> None: ...

    def channel_lost(self, channel: HttpChannel) -> None: ...


class HttpChannel(asyncio.Protocol):
    """One HTTP/1.1 connection: parse with h11, hand each whole request to the handler."""

    def __init__(
        self,
        transport: asyncio.Transport,
        handler: Handler,
        *,
        max_head_bytes: int,
        max_body_bytes: int,
        idle_timeout_s: float,
    ) -> None:
        self.transport = transport
        self._handler = handler
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self._max_body = max_body_bytes
        self._max_head = max_head_bytes
        self._idle_timeout_s = idle_timeout_s
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._busy = False  # a request is with the handler; no further one is parsed
        self._streaming = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self.sink: StreamSink | None = None
        self.lost = False
        self._read_paused = False
        #: Headers every answer to the request being handled carries (CORS, hosting/cors.py); reset per request.
        self.response_headers: list[tuple[str, str]] = []

    def start(self, already_read: bytes) -> None:
        """Take the socket over from the front, with the bytes it already read."""
        self.transport.set_protocol(self)
        self._h11.receive_data(already_read)
        self._process()

    # -- asyncio callbacks -----------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        self._cancel_idle()
        try:
            self._h11.receive_data(data)
        except RuntimeError:  # data after the peer's own close: nothing more to parse
            return
        if not self._busy:
            self._process()
        elif len(self._h11.trailing_data[0]) > self._max_head + self._max_body:
            # pipelined past a held request or an open stream: more than one request's worth waits unparsed
            self.transport.abort()

    def eof_received(self) -> bool | None:
        with contextlib.suppress(RuntimeError):
            self._h11.receive_data(b"")
        if not self._busy:
            self._process()
        return None

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self._cancel_idle()
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.channel_lost(self)

    def pause_writing(self) -> None:
        if self.sink is not None:
            self.sink.channel_pause_writing(self)

    def resume_writing(self) -> None:
        if self.sink is not None:
            self.sink.channel_resume_writing(self)

    # -- parsing ----------------------------------------------------------------------------
    def _process(self) -> None:
        conn = self._h11
        while not self._busy and not self.lost:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc.error_status_hint, str(exc))
                return
            if event is h11.NEED_DATA:
                if conn.their_state is h11.DONE or conn.their_state is h11.IDLE:
                    self._arm_idle()
                return
            if event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request = event
                self._body = bytearray()
                length = _header(event.headers, b"content-length")
                if length is not None and length.isdigit() and int(length) > self._max_body:
                    self._refuse(413, f"a request body holds one ACP message of at most {self._max_body} bytes")
                    return
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self._max_body:
                    self._refuse(413, f"a request body holds one ACP message of at most {self._max_body} bytes")
                    return
            elif isinstance(event, h11.EndOfMessage):
                request, self._request = self._request, None
                assert request is not None
                body, self._body = bytes(self._body), bytearray()
                self._busy = True
                self._handler(self, request, body)
            elif isinstance(event, h11.ConnectionClosed):
                self.transport.close()
                return

    def _refuse(self, status: int, text: str) -> None:
        """A request that cannot be parsed or is too large: answer and close (the stream is out of step)."""
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                self._send_all(status, [(b"Content-Type", b"text/plain"), (b"Connection", b"close")], text.encode())
        self.transport.close()

    # -- answering ------------------------------------------------------------------------------
    def respond(
        self,
        status: int,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] = (),
        *,
        content_type: str = "text/plain",
        close: bool = False,
    ) -> None:
        """Answer the request the handler holds; then parse the next one (keep-alive)."""
        if self.lost or not self._busy:
            return
        head = [(b"Content-Type", content_type.encode())] if body or content_type != "text/plain" else []
        head += [(k.encode(), v.encode()) for k, v in (*self.response_headers, *headers)]
        if close:
            head.append((b"Connection", b"close"))
        try:
            self._send_all(status, head, body)
        except h11.LocalProtocolError:
            self.transport.close()
            return
        self._next_cycle()

    def _send_all(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        conn = self._h11
        if status != 204:  # a 204 has no body and must not say how long it is (RFC 9110 §8.6)
            headers = [*headers, (b"Content-Length", str(len(body)).encode())]
        out = conn.send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
        if body:
            out = (out or b"") + (conn.send(h11.Data(data=body)) or b"")
        out = (out or b"") + (conn.send(h11.EndOfMessage()) or b"")
        self.transport.write(out)

    def _next_cycle(self) -> None:
        conn = self._h11
        self._busy = False
        self.response_headers = []
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            self.transport.close()
            return
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
            self._process()
        elif conn.their_state is not h11.DONE:
            self.transport.close()  # answered before reading the whole body: the stream is out of step

    def hold(self) -> None:
        """The handler keeps the request waiting: read nothing more from this socket meanwhile."""
        if not self._read_paused and not self.lost:
            self._read_paused = True
            self.transport.pause_reading()

    def release(self) -> None:
        if self._read_paused and not self.lost:
            self._read_paused = False
            self.transport.resume_reading()

    # -- event streams ------------------------------------------------------------------------------
    def start_stream(self, headers: Iterable[tuple[str, str]], sink: StreamSink) -> None:
        """Answer 200 with a body that stays open: ``send`` writes to it, ``end_stream`` finishes it.

        The socket reports ``resume_writing`` whenever its buffer empties (limits 0/0), so the
        connection re-checks its flow control each time one of its streams drained.
        """
        head = [(k.encode(), v.encode()) for k, v in (*self.response_headers, *headers)]
        self.sink = sink
        self._streaming = True
        self.transport.set_write_buffer_limits(high=0, low=0)
        self.transport.write(self._h11.send(h11.Response(status_code=200, headers=head, reason=b"OK")) or b"")

    def send(self, data: bytes) -> None:
        if self.lost or not self._streaming:
            return
        out = self._h11.send(h11.Data(data=data))
        if out:
            self.transport.write(out)

    @property
    def buffered(self) -> int:
        return 0 if self.lost else self.transport.get_write_buffer_size()

    def end_stream(self) -> None:
        """Finish the stream's body and close the socket once it is written (the sink hears when)."""
        if self.lost:
            return
        if self._streaming:
            self._streaming = False
            with contextlib.suppress(h11.LocalProtocolError):
                self.transport.write(self._h11.send(h11.EndOfMessage()) or b"")
        self.transport.close()

    def abort(self) -> None:
        self.sink = None
        if not self.lost:
            self.transport.abort()

    # -- idle keep-alive sockets -----------------------------------------------------------------------
    def _arm_idle(self) -> None:
        if self._idle_timer is None and not self.lost:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_timeout_s, self.transport.close)

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None


def header(request: h11.Request, name: bytes) -> str | None:
    """One request header's value (h11 lowercases names), or None."""
    value = _header(request.headers, name)
    return None if value is None else value.decode("latin-1")


def _header(headers: Any, name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return bytes(value)
    return None


def headers_map(request: h11.Request) -> dict[str, str]:
    """The request's headers for the auth hook: case-insensitive lookup, last value of a repeated name."""
    return _CaseInsensitive((k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers)


class _CaseInsensitive(dict[str, str]):
    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        super().__init__((k.lower(), v) for k, v in items)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


def _reason(status: int) -> bytes:
    """The standard reason phrase: optional in HTTP/1.1, but logs and people read it."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""
