"""One HTTP/1.1 socket after the front: requests read strictly (RFC 9112, hosting/request.py), answered in order.

Why a parser of our own and not h11: the front must authorize on the request
head before any body byte is kept, bound every head however its bytes arrive,
refuse what RFC 9112 calls faulty framing (``Content-Length`` beside
``Transfer-Encoding``, bare-LF lines, chunk sizes that overflow), answer any
number of pipelined requests from a loop, and pause reading while answers are
owed. h11 sits between the socket and each of those rules (it accepts a
complete 64 KiB head in one read, reads bare LF, prefers ``Transfer-Encoding``
over ``Content-Length``); checks around it would re-parse what it parsed. A
server side that only reads requests and writes ``Content-Length`` answers and
one chunked event stream is small enough to own.

What it does:

- a head (request line and fields) of at most ``max_request_head_bytes``
  (431 past it) that must be complete ``handshake_timeout_s`` after its first
  byte (408); a keep-alive socket with no request waits ``idle_timeout_s``;
- ``admit(channel, request)`` runs on the complete head (Origin, auth): a
  refusal is answered without reading the body, the socket then closes
  after a short linger that discards what the client still sends;
- a body (``Content-Length`` or chunked, at most ``request.max_body``, 413
  past it) that must be complete ``http_request_timeout_s`` after its head;
- ``handler(channel, request, body)`` answers with ``respond`` (now or later:
  meanwhile nothing further is parsed, and reading pauses once a pipelined
  request waits) or turns the socket into an event stream (``start_stream``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from ..peer.flow import Pause, ReadPauses
from ..wire.limits import Limits
from .request import BadRequest, BodyReader, Request, header_pairs, headers_map, origin_form, parse_head

Handler = Callable[["HttpChannel", "Request", bytes], None]
Admit = Callable[["HttpChannel", "Request"], bool]

_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"

# channel states
_HEAD, _ADMIT, _BODY, _BUSY, _STREAM, _LINGER, _CLOSED = range(7)
_IDLE = 7  # a timer kind: a keep-alive socket waiting for its next request
# reasons reading is paused


class StreamSink:
    """What a channel that carries an event stream reports to (flow control and loss)."""

    def channel_pause_writing(self, channel: HttpChannel) -> None: ...

    def channel_resume_writing(self, channel: HttpChannel) -> None: ...

    def channel_lost(self, channel: HttpChannel) -> None: ...


class HttpChannel(asyncio.Protocol):
    """One HTTP/1.1 connection: parse each request strictly, admit it on its head, answer in order."""

    def __init__(
        self,
        transport: asyncio.Transport,
        handler: Handler,
        limits: Limits,
        *,
        admit: Admit | None = None,
        on_lost: Callable[[HttpChannel], None] | None = None,
        on_refused: Callable[[HttpChannel, int], None] | None = None,
    ) -> None:
        self.transport = transport
        self._handler = handler
        self._admit = admit
        self._on_lost = on_lost
        self._on_refused = on_refused  # told of the refusals the channel answers itself (400, 408, 431, ...)
        self._max_head = limits.max_request_head_bytes
        self._max_body = limits.max_line_bytes
        self._max_chunk_line = limits.max_chunk_line_bytes
        self._head_timeout_s = limits.handshake_timeout_s
        self._body_timeout_s = limits.http_request_timeout_s
        self._idle_timeout_s = limits.ping_interval_s
        self._linger_s = limits.http_linger_s
        self._buf = bytearray()
        self._state = _HEAD
        self._request: Request | None = None
        self._reader: BodyReader | None = None  # the body being read
        self._processing = False
        self._pauses = ReadPauses(self._pause_edge, self._close)
        self._eof = False
        self.draining = False
        self._must_linger = False  # the input is out of step (refused mid-request): discard before closing
        self._chunked_out = True
        self._timer: asyncio.TimerHandle | None = None
        self._timer_kind = -1
        self.sink: StreamSink | None = None
        self.lost = False
        #: Headers every answer to the request being handled carries (CORS, hosting/cors.py); reset per request.
        self.response_headers: list[tuple[str, str]] = []
        self.bound = False  # the host's: this socket serves (or served) a live ACP connection
        self.connections_created = 0  # ACP connections this socket opened with initialize POSTs
        self.peer = self.client = self.address = ""  # the host's: hosting/forwarded.py, hosting/unbound.py

    def start(self, already_read: bytes) -> None:
        """Take the socket over from the front, with the bytes it already read."""
        self.transport.set_protocol(self)
        self._buf += already_read
        self._process()

    # -- asyncio callbacks -----------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        state = self._state
        if state in (_LINGER, _CLOSED):
            return  # a refused request's body, discarded
        self._buf += data
        if state == _STREAM:
            if len(self._buf) > self._max_head:  # pipelined behind a stream that never ends
                self.abort()
            return
        self._process()

    def eof_received(self) -> bool | None:
        self._eof = True
        if self._state in (_BUSY, _ADMIT):
            return True  # answer what is owed, then close
        if self._state == _HEAD and self._buf:
            self._process()
        return None

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self._state = _CLOSED
        self._cancel_timer()
        self._buf = bytearray()
        self._reader = None
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.channel_lost(self)
        if self._on_lost is not None:
            self._on_lost(self)

    def pause_writing(self) -> None:
        if self.sink is not None:
            self.sink.channel_pause_writing(self)

    def resume_writing(self) -> None:
        if self.sink is not None:
            self.sink.channel_resume_writing(self)

    # -- parsing: one loop, never re-entered ----------------------------------------------------
    def _process(self) -> None:
        """Parse and dispatch what is buffered. An answer given inside the handler does not recurse into here:
        the loop itself goes on to the next request, so any number of pipelined requests costs no stack."""
        if self._processing:
            return
        self._processing = True
        try:
            while not self.lost:
                state = self._state
                if state == _HEAD:
                    progressed = self._read_head()
                elif state == _BODY:
                    progressed = self._read_body()
                else:
                    break
                if not progressed:
                    break
        except BadRequest as exc:
            self._refuse(exc.status, str(exc))
        finally:
            self._processing = False
        self._after_process()

    def _after_process(self) -> None:
        if self.lost:
            return
        state = self._state
        backlog = state in (_BUSY, _ADMIT) and bool(self._buf)
        self._pauses.set(Pause.BACKLOG, backlog)  # answers are owed and more requests wait: read no further
        if state == _HEAD:
            if self._eof or (self.draining and not self._buf):
                self._close()
            elif self._buf:
                self._arm(_HEAD, self._head_timeout_s, self._timed_out)
            else:
                self._arm(_IDLE, self._idle_timeout_s, self._close)  # an idle keep-alive socket
        elif state == _BODY:
            self._arm(_BODY, self._body_timeout_s, self._timed_out)
        elif state in (_BUSY, _ADMIT, _STREAM):
            self._cancel_timer()

    def _read_head(self) -> bool:
        buf = self._buf
        while buf[:2] == _CRLF:  # RFC 9112 §2.2: empty lines before a request line are ignored
            del buf[:2]
        end = buf.find(_HEAD_END, 0, self._max_head + 4)
        bare = buf.find(b"\n\n", 0, self._max_head + 4)
        if bare >= 0 and (end < 0 or bare < end):
            raise BadRequest(400, "the request head does not end in CRLF CRLF")
        if end < 0:
            if len(buf) > self._max_head:
                raise BadRequest(431, f"the request head exceeds {self._max_head} bytes")
            return False
        request = parse_head(bytes(buf[:end]))
        del buf[: end + 4]
        request.max_body = self._max_body
        self._request = request
        self._state = _ADMIT
        if self._admit is not None and not self._admit(self, request):
            if self._state == _ADMIT:  # the hook refused without answering
                self._refuse(403, "refused")
            return self._state == _HEAD
        if request.content_length > request.max_body:
            raise BadRequest(413, f"a request body holds one ACP message of at most {request.max_body} bytes")
        if not request.has_body:
            self._dispatch(b"")
            return self._state == _HEAD
        if request.expect_continue:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self._state = _BODY
        self._reader = BodyReader(request, self._max_chunk_line, self._max_head)
        return True

    def _read_body(self) -> bool:
        reader = self._reader
        assert reader is not None
        body = reader.read(self._buf)
        if body is None:
            return False
        self._reader = None
        self._dispatch(body)
        return self._state == _HEAD

    def _dispatch(self, body: bytes) -> None:
        request = self._request
        assert request is not None
        self._state = _BUSY
        self._cancel_timer()
        self._handler(self, request, body)

    def _refuse(self, status: int, text: str) -> None:
        """A request that cannot be read, is refused on its head or timed out: answer, then close."""
        if self._state in (_LINGER, _CLOSED) or self.lost:
            return
        if self._state != _STREAM:
            self._state = _BUSY
            self._must_linger = True
            if self._on_refused is not None:
                self._on_refused(self, status)
            self.respond(status, text.encode() + b"\n", close=True)
        else:
            self.abort()

    def _timed_out(self) -> None:
        self._timer = None
        self._timer_kind = -1
        self._refuse(408, "the request did not arrive in time")

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
        """Answer the request the handler holds; then go on to the next one (keep-alive)."""
        if self.lost or self._state not in (_BUSY, _ADMIT):
            return
        request = self._request
        unread = self._state == _ADMIT and request is not None and request.has_body
        unread = unread or self._must_linger
        close = close or unread or self.draining or request is None or not request.keep_alive
        out = bytearray(b"HTTP/1.1 %d %s\r\n" % (status, _reason(status)))
        if body or content_type != "text/plain":
            out += b"Content-Type: %s\r\n" % content_type.encode("latin-1")
        for name, value in (*self.response_headers, *headers):
            out += b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1"))
        if status >= 200 and status not in (204, 304):
            out += b"Content-Length: %d\r\n" % len(body)
        if close:
            out += b"Connection: close\r\n"
        elif request is not None and request.version == b"HTTP/1.0":
            out += b"Connection: keep-alive\r\n"  # an HTTP/1.0 client assumes close unless told
        out += _CRLF
        if request is None or request.method != b"HEAD":
            out += body
        self.transport.write(out)
        self._request = None
        self.response_headers = []
        if close:
            if self._eof and not unread:
                self._close()
            else:  # more may come (a pipelined request, a body): closing now could reset away the answer
                self._linger()
            return
        self._state = _HEAD
        self._pauses.release(Pause.HELD)
        self._process()

    def _close(self) -> None:
        self._state = _CLOSED
        self._cancel_timer()
        self.transport.close()

    def _linger(self) -> None:
        """The answer closes the socket: end our side, discard what still comes for a moment, then drop.

        The client may still be sending (a refused body, pipelined requests):
        closing at once with unread bytes makes the kernel reset the
        connection, and a reset can destroy the answer before the client reads
        it. A client that closes its side ends the linger at once.
        """
        self._state = _LINGER
        self._buf = bytearray()
        self._pauses.release(Pause.HELD | Pause.BACKLOG)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(_LINGER, self._linger_s, self.transport.abort)

    def hold(self) -> None:
        """The handler keeps the request waiting: read nothing more from this socket meanwhile."""
        self._pauses.hold(Pause.HELD)

    def release(self) -> None:
        self._pauses.release(Pause.HELD)

    def _pause_edge(self, paused: bool) -> None:
        if self.lost:
            return
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def drain(self) -> None:
        """The host drains: a socket between requests or inside one closes now, one owed an answer after it."""
        self.draining = True
        if self._state in (_HEAD, _BODY, _LINGER):
            self._close()

    # -- event streams ------------------------------------------------------------------------------
    def start_stream(self, headers: Iterable[tuple[str, str]], sink: StreamSink) -> None:
        """Answer 200 with a chunked body that stays open: ``send`` writes to it, ``end_stream`` finishes it.

        The socket reports ``resume_writing`` whenever its buffer empties (limits 0/0), so the
        connection re-checks its flow control each time one of its streams drained.
        """
        if self.lost:
            return
        request = self._request
        self._chunked_out = request is None or request.version == b"HTTP/1.1"
        out = bytearray(b"HTTP/1.1 200 OK\r\n")
        for name, value in (*self.response_headers, *headers):
            out += b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1"))
        out += b"Transfer-Encoding: chunked\r\n\r\n" if self._chunked_out else b"Connection: close\r\n\r\n"
        self.response_headers = []
        self.sink = sink
        self._state = _STREAM
        self._cancel_timer()
        self._pauses.release(Pause.HELD | Pause.BACKLOG)
        self.transport.set_write_buffer_limits(high=0, low=0)
        self.transport.write(out)

    def send(self, data: bytes) -> None:
        if self.lost or self._state != _STREAM or not data:
            return
        if self._chunked_out:
            self.transport.writelines((b"%x\r\n" % len(data), data, _CRLF))
        else:
            self.transport.write(data)

    @property
    def buffered(self) -> int:
        return 0 if self.lost else self.transport.get_write_buffer_size()

    def end_stream(self) -> None:
        """Finish the stream's body and close the socket once it is written (the sink hears when)."""
        if self.lost:
            return
        if self._state == _STREAM and self._chunked_out:
            self.transport.write(b"0\r\n\r\n")
        self._close()

    def abort(self) -> None:
        self.sink = None
        self._state = _CLOSED
        if not self.lost:
            self.transport.abort()

    # -- timers ----------------------------------------------------------------------------------
    def _arm(self, kind: int, seconds: float, callback: Callable[[], Any]) -> None:
        """One timer per socket; re-arming the same kind keeps its deadline (a trickle does not restart it)."""
        if self._timer_kind == kind and self._timer is not None:
            return
        self._cancel_timer()
        self._timer_kind = kind
        self._timer = asyncio.get_running_loop().call_later(seconds, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_kind = -1


def _reason(status: int) -> bytes:
    """The standard reason phrase: optional in HTTP/1.1, but logs and people read it."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


# The request parser lives in hosting/request.py; its names are still importable from here.
__all__ = [
    "BadRequest",
    "HttpChannel",
    "Request",
    "StreamSink",
    "header_pairs",
    "headers_map",
    "origin_form",
    "parse_head",
]
