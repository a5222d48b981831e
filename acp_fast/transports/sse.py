"""Streamable HTTP as a peer transport: POST bodies in, event streams out (no socket of its own).

One ``SsePeer`` is one ACP connection. Its input is the POSTed messages,
each fed to the Connection's ``feed_line`` (the same decoder, inbox, control
lane and pool as stdio or WebSocket) in the order the host accepts them; its
output is the Writer's lines, which ``StreamRouter`` (transports/routing.py)
sorts onto the connection stream and the session streams, holding each until
a GET attaches a reader.

Flow control (R26) spans every stream: while the bytes they hold (queued for
a reader, or in a reader's socket) are above the Writer's high-water mark,
producers wait in ``drain()`` and further POSTs are held unanswered, as a
WebSocket's socket stops being read. A client that is not reading (output past
``max_buffered_output_bytes`` with no progress for ``output_stall_timeout_s``,
transports/output_cap.py) ends the connection, as a WebSocket is closed 1008.

The connection ends (EOF for the Connection, R13-R15) on ``end()``: the
client's DELETE, a drain, or no stream read for ``ping_interval_s +
ping_timeout_s``. Answers produced by the shutdown still reach the streams
being read; then every stream's body ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, cast

from ..peer.connection import Connection
from ..peer.flow import Pause, ReadPauses
from ..peer.writer import RoutedWriter
from ..wire.limits import Limits
from .output_cap import OutputCap
from .routing import CONNECTION_STREAM, StreamKey, StreamRefusal, StreamRouter

log = logging.getLogger(__name__)

#: What an event adds to one line on a stream (``data: `` and the blank line).
_EVENT_OVERHEAD = 16

_KEEP_ALIVE = b": keep-alive\n\n"


class StreamReader(Protocol):
    """An open GET response the peer writes events to (hosting/http.py's channel)."""

    def send(self, data: bytes) -> None: ...

    @property
    def buffered(self) -> int: ...

    def end_stream(self) -> None: ...

    def abort(self) -> None: ...


#: Answers one held POST: ``(status, body, headers)``.
Respond = Callable[[int, bytes, list[tuple[str, str]]], None]


class _Post:
    __slots__ = ("body", "message", "respond", "session")

    def __init__(self, body: bytes, message: dict[str, Any], session: str | None, respond: Respond) -> None:
        self.body = body
        self.message = message
        self.session = session
        self.respond = respond


class RouterTransport(asyncio.WriteTransport):
    """The Writer's transport: each write is routed to the streams by the peer."""

    def __init__(self, peer: SsePeer) -> None:
        super().__init__()
        self._peer = peer
        self._closing = False
        self.lost = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._peer.output(data)

    def get_write_buffer_size(self) -> int:
        return 0 if self.lost else self._peer.router.buffered

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._peer.set_flow_limits(high or 0, low or 0)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """The Writer closes at the end of the shutdown: end every stream after what it holds."""
        if not self._closing:
            self._closing = True
            self._peer.close_streams()

    def abort(self) -> None:
        self._closing = True
        self.lost = True
        self._peer.abort_streams()


class SsePeer:
    """One Streamable HTTP connection serving one Connection."""

    def __init__(self, connection_id: str, limits: Limits, principal: str | None) -> None:
        loop = asyncio.get_running_loop()
        self.connection_id = connection_id
        self.limits = limits
        self.principal = principal
        self.loop = loop
        self.router = StreamRouter(
            max_streams=limits.max_sessions + 1,
            max_buffered=limits.max_buffered_output_bytes + limits.max_line_bytes + _EVENT_OVERHEAD,
            max_routes=limits.max_inbox + limits.max_background + limits.max_pending_outgoing,
            replay=limits.sse_replay,
            replay_bytes=limits.sse_replay_bytes,
        )
        self.writer = RoutedWriter(loop, limits)  # each line comes with its route: no parse to sort it
        self.out = RouterTransport(self)
        self._cap = OutputCap(
            loop,
            cap=limits.max_buffered_output_bytes,
            max_message=limits.max_line_bytes + _EVENT_OVERHEAD,
            stall_s=limits.output_stall_timeout_s,
            size=lambda: self.router.buffered,
            on_stalled=self._stalled,
        )
        self._high = limits.write_high_water
        self._low = limits.write_low_water
        self.writer.attach(self.out)
        self.conn = Connection(loop, self.writer, limits, name=f"acp[{connection_id[:8]}]")
        self.pauses = ReadPauses(self._pause_edge, self.end)  # the POSTs' intake; the Connection's ReadControl
        self.conn.reader_attached(self.pauses)
        self.binary_frames = 0
        self.ended = False
        self._output_paused = False
        self._waiting: deque[_Post] = deque()
        self._readers: dict[StreamReader, StreamKey] = {}
        self._closing_readers: set[StreamReader] = set()
        self._initial: Respond | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._keep_alive = loop.call_later(limits.ping_interval_s, self._tick)
        self._arm_idle()

    # -- input: POSTs -------------------------------------------------------------------------
    def post(self, body: bytes, message: dict[str, Any], session: str | None, respond: Respond) -> None:
        """Feed one POSTed message (answered 202 once fed); held while the connection cannot take input."""
        if self.ended:
            respond(404, b"Unknown Acp-Connection-Id", [])
            return
        if self.pauses.reasons or self._waiting:
            if len(self._waiting) >= self.limits.max_inbox:
                respond(503, b"too many requests waiting on this connection", [("Retry-After", "1")])
                return
            self._waiting.append(_Post(body, message, session, respond))
            return
        self._feed(_Post(body, message, session, respond))

    @property
    def accepting(self) -> bool:
        """Whether a POST arriving now is fed at once (else it waits, and its socket should not be read)."""
        return not (self.pauses.reasons or self._waiting or self.ended)

    def initialize(self, body: bytes, message: dict[str, Any], respond: Respond) -> None:
        """The connection's first POST: its answer is that POST's own body."""
        self._initial = respond
        self.post(body, message, None, lambda status, data, headers: None)

    def _feed(self, post: _Post) -> None:
        self.router.accepted(post.message, post.session)
        self.conn.feed_line(post.body)
        self.conn.feed_end()
        post.respond(202, b"", [])

    def _pause_edge(self, paused: bool) -> None:
        """Nothing holds the intake any more: feed the POSTs that waited, until something holds it again."""
        waiting = self._waiting
        while waiting and not self.pauses.reasons and not self.ended:
            self._feed(waiting.popleft())

    # -- output: the streams ---------------------------------------------------------------------
    def output(self, data: bytes | bytearray | memoryview) -> None:
        over = self.router.write(data, self.writer.routes)
        if self.router.initial is not None and self._initial is not None:
            self._answer_initialize(self.router.initial)
        if over or self._cap.over():
            self.overflow()
            return
        self._check_flow()

    def _stalled(self) -> None:
        if not self.router.closed:
            self.overflow()

    def _answer_initialize(self, line: bytes) -> None:
        respond, self._initial = self._initial, None
        assert respond is not None
        if not self.router.initial_ok:
            respond(200, line, [])  # refused: no connection id, and the connection ends
            self.end()
            return
        respond(200, line, [("Acp-Connection-Id", self.connection_id)])

    def set_flow_limits(self, high: int, low: int) -> None:
        self._high, self._low = high, low

    def _check_flow(self) -> None:
        buffered = self.router.buffered
        if not self._output_paused and buffered > self._high:
            self._output_paused = True
            self.writer.pause_writing()
            self.pauses.hold(Pause.OUTPUT)
        elif self._output_paused and buffered <= self._low:
            self._output_paused = False
            self.writer.resume_writing()
            self.pauses.release(Pause.OUTPUT)

    def overflow(self) -> None:
        """The client is not reading (transports/output_cap.py): end the connection now."""
        self._cap.cancel()
        log.warning(
            "ending connection %s: its streams hold %d bytes its client is not reading (cap %d)",
            self.connection_id[:8],
            self.router.buffered,
            self.limits.max_buffered_output_bytes,
        )
        self.router.close()
        self.close_streams()
        self.out.lost = True
        self.end()  # first: the POSTs still waiting are answered 404, not fed when output is released
        self._release_output()

    def _release_output(self) -> None:
        if self._output_paused:
            self._output_paused = False
            self.writer.resume_writing()
        self.pauses.release(Pause.OUTPUT)

    # -- readers: GET streams ------------------------------------------------------------------------
    def stream_refusal(self, key: StreamKey) -> StreamRefusal | None:
        """Why a GET cannot read this stream (answered 404/409/400), or None."""
        if self.ended or self.out.is_closing():
            return StreamRefusal.GONE
        return self.router.refusal(key)

    def open_stream(self, key: StreamKey, reader: StreamReader, last_event_id: int | None = None) -> None:
        """Attach a GET's response body (already answered 200) to a stream: what waited goes out now
        (with ``last_event_id``, on a resumable stream: what came after that event)."""
        refused = self.router.attach(key, reader, last_event_id)
        if refused is not None:
            reader.end_stream()
            return
        self._readers[reader] = key
        self._cancel_idle()
        self._check_flow()

    def reader_lost(self, reader: StreamReader) -> None:
        """A GET's socket closed (the client went away, or its stream ended)."""
        key = self._readers.pop(reader, _MISSING)
        if key is not _MISSING:
            self.router.detach(cast(StreamKey, key), reader)
        self._closing_readers.discard(reader)
        if self.out.is_closing() and not self._closing_readers and not self._readers:
            self.writer.connection_lost(None)  # Writer.close waits for the last stream to leave
            return
        if not self._readers:
            self._arm_idle()
        self._check_flow()

    def reader_drained(self) -> None:
        self._check_flow()

    def close_streams(self) -> None:
        """End every stream's body once it is written; what waited for a reader is dropped."""
        self.router.close()
        for reader in list(self._readers):
            self._closing_readers.add(reader)
            key = self._readers.pop(reader)
            self.router.detach(key, reader)
            reader.end_stream()
        self._cancel_idle()
        self._keep_alive.cancel()
        if self.out.is_closing() and not self._closing_readers:
            self.writer.connection_lost(None)  # nothing left to flush: Writer.close need not wait

    def abort_streams(self) -> None:
        self.router.close()
        readers = list(self._readers) + list(self._closing_readers)
        self._readers.clear()
        self._closing_readers.clear()
        for reader in readers:
            reader.abort()
        self._cancel_idle()
        self._keep_alive.cancel()

    def _tick(self) -> None:
        """SSE keep-alive: a comment on every stream that sent nothing for ``ping_interval_s``."""
        if self.ended and not self._readers:
            return
        for reader in self.router.idle_receivers():
            reader.send(_KEEP_ALIVE)
        self._keep_alive = self.loop.call_later(self.limits.ping_interval_s, self._tick)

    def _arm_idle(self) -> None:
        if self._idle_timer is None and not self.ended:
            bound = self.limits.ping_interval_s + self.limits.ping_timeout_s
            self._idle_timer = self.loop.call_later(bound, self._idle_end)

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_end(self) -> None:
        self._idle_timer = None
        if not self._readers:
            log.info(
                "connection %s: no stream read for %.0f s; ending it",
                self.connection_id[:8],
                self.limits.ping_interval_s + self.limits.ping_timeout_s,
            )
            self.end()

    # -- the end ---------------------------------------------------------------------------------------------
    def end(self, code: Any = None) -> None:
        """EOF for the Connection: DELETE, drain or idle. Held POSTs are answered 404 (not taken)."""
        if self.ended:
            return
        self.ended = True
        self._cancel_idle()
        self._cap.cancel()
        waiting, self._waiting = self._waiting, deque()
        for post in waiting:
            post.respond(404, b"Unknown Acp-Connection-Id", [])
        if self._initial is not None:
            respond, self._initial = self._initial, None
            respond(503, b"the connection ended before initialize was answered", [])
        self.conn.feed_eof(None)

    def abort(self) -> None:
        self.out.abort()

    # -- introspection -----------------------------------------------------------------------------------------
    @property
    def reading_paused(self) -> bool:
        return self.pauses.paused

    @property
    def buffered_output(self) -> int:
        return self.router.buffered

    @property
    def stream_count(self) -> int:
        return len(self._readers)


_MISSING: Any = object()
CONNECTION = CONNECTION_STREAM
