"""Which event stream each outgoing message of a Streamable HTTP connection goes to (sans-IO).

A Streamable HTTP connection has no socket of its own: the client POSTs its
messages and reads the agent's on long-lived event streams, one for the
connection and one per session. ``StreamRouter`` decides, for each line the
Writer produces, which stream it belongs to, and holds it until a reader is
attached:

- an answer goes where its request's answer is expected: the session stream
  of the ``Acp-Session-Id`` the request came with, else (and for
  ``session/load``, whose answer the client awaits before it has the session)
  the connection stream;
- a notification or agent request with ``params.sessionId`` goes to that
  session's stream; anything else to the connection stream;
- the answer to the connection's first request (``initialize``) is kept
  apart: it is the body of that POST's own ``200``.

Every stream's bytes (queued plus what its reader's socket still holds) are
bounded by ``max_buffered``; ``write`` reports when one passes it. Nothing
here touches a socket or the event loop, so the rules are tested directly.

Resumable streams (opt-in, ``replay`` > 0): every event of a stream carries
an ``id:`` (1, 2, ... per stream) and the stream keeps its last ``replay``
events (at most ``replay_bytes`` of them) in a ring. A reader attached with
``Last-Event-ID: N`` gets the events after N from the ring, then the live
stream; when N is no longer in the ring (or was never sent) it first gets a
``_acp_fast/stream_gap`` notification, so a gap is never silent.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any, Protocol, cast

import orjson

from ..wire.routes import ANSWER, ERROR, REQUEST, Route

#: The key of the connection-scoped stream; session streams are keyed by session id.
CONNECTION_STREAM: None = None
StreamKey = str | None


class StreamRefusal(enum.StrEnum):
    """Why a reader cannot be attached to a stream; the value is the sentence a client reads."""

    GONE = "the connection has ended"
    HAS_READER = "this stream already has a reader"
    TOO_MANY = "too many streams on this connection"

#: The notification a resumed reader gets first when the events after its ``Last-Event-ID`` are not all held.
STREAM_GAP_METHOD = "_acp_fast/stream_gap"

#: Methods whose answer goes to the connection stream even though they name a session:
#: the client awaits it before it holds that session's stream (the RFD and the TypeScript SDK agree).
_ANSWER_ON_CONNECTION = frozenset({"session/load"})


class Receiver(Protocol):
    """A reader attached to a stream: an HTTP response body that stays open."""

    def send(self, data: bytes) -> None: ...

    @property
    def buffered(self) -> int: ...


class OutStream:
    """One event stream: what waits for a reader, the reader when one is attached, and the replay ring."""

    __slots__ = ("active", "key", "queue", "queued", "receiver", "ring", "ring_bytes", "seq")

    def __init__(self, key: StreamKey) -> None:
        self.key = key
        self.queue: deque[bytes] = deque()
        self.queued = 0
        self.receiver: Receiver | None = None
        self.active = False  # something was sent since the last keep-alive tick
        self.seq = 0  # the id of the last event (resumable streams only)
        self.ring: deque[tuple[int, bytes]] = deque()
        self.ring_bytes = 0

    @property
    def buffered(self) -> int:
        receiver = self.receiver
        return self.queued + (receiver.buffered if receiver is not None else 0)


class StreamRouter:
    """Routes a connection's outgoing lines to its streams; bounded per stream and in stream count."""

    def __init__(
        self, *, max_streams: int, max_buffered: int, max_routes: int, replay: int = 0, replay_bytes: int = 0
    ) -> None:
        self.max_streams = max_streams
        self.max_buffered = max_buffered
        self.max_routes = max_routes
        self.replay = replay
        self.replay_bytes = replay_bytes
        self.streams: dict[StreamKey, OutStream] = {CONNECTION_STREAM: OutStream(CONNECTION_STREAM)}
        self._answer_to: dict[Any, StreamKey] = {}  # client request id -> stream of its answer
        self._client_answers: dict[Any, str] = {}  # agent request id -> session it was sent on
        self.initial_id: Any = None
        self.initial: bytes | None = None
        self.initial_ok = False  # the initialize answer is a result, not an error
        self.closed = False

    # -- incoming -----------------------------------------------------------------------------
    def check(self, message: dict[str, Any], session_header: str | None) -> str | None:
        """Why a POSTed message cannot be accepted (answered 400), or None.

        A message naming a session (``params.sessionId``) must carry that id as
        ``Acp-Session-Id``; an answer to a request the agent sent on a session
        stream must carry that session's id.
        """
        if "method" in message:
            params = message.get("params")
            named = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(named, str):
                if session_header is None:
                    return "Missing Acp-Session-Id"
                if session_header != named:
                    return "Mismatched Acp-Session-Id"
            return None
        expected = self._client_answers.get(_key(message.get("id")))
        if expected is not None and session_header != expected:
            return "Missing Acp-Session-Id" if session_header is None else "Mismatched Acp-Session-Id"
        return None

    def accepted(self, message: dict[str, Any], session_header: str | None) -> None:
        """A POSTed message goes to the agent: remember where its answer is expected."""
        rid = _key(message.get("id"))
        method = message.get("method")
        if method is None:
            self._client_answers.pop(rid, None)
            return
        if rid is None or not isinstance(method, str):
            return
        if self.initial_id is None and method == "initialize" and not self._answer_to:
            self.initial_id = rid
            return
        if session_header is not None and method not in _ANSWER_ON_CONNECTION:
            self._answer_to[rid] = session_header
        _bound(self._answer_to, self.max_routes)

    # -- outgoing --------------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview, routes: deque[Route | None] | None = None) -> bool:
        """Route every line of ``data``; True if a stream is now over ``max_buffered``.

        ``routes`` holds, in order, what each line's sender said about it
        (peer/writer.py ``RoutedWriter``); a line without one is parsed.
        """
        if self.closed:
            if routes:
                routes.clear()
            return False
        raw = bytes(data)
        batches: dict[StreamKey, list[bytes]] = {}
        start, n = 0, len(raw)
        while start < n:
            end = raw.find(b"\n", start)
            if end < 0:
                end = n
            if end > start:
                line = raw[start:end]
                route = routes.popleft() if routes else None
                key = self._route(line) if route is None else self._routed(line, route)
                if key is not _INITIAL:
                    batches.setdefault(cast(StreamKey, key), []).append(line)
            start = end + 1
        over = False
        for key, lines in batches.items():
            stream = self.streams.get(key)
            if stream is None:
                if len(self.streams) >= self.max_streams:
                    return True
                stream = self.streams[key] = OutStream(key)
            if self.replay:
                chunk = b"".join([self._keep(stream, line) for line in lines])
            else:
                chunk = b"".join([b"data: " + line + b"\n\n" for line in lines])
            stream.active = True
            if stream.receiver is not None:
                stream.receiver.send(chunk)
            else:
                stream.queue.append(chunk)
                stream.queued += len(chunk)
            if stream.buffered > self.max_buffered:
                over = True
        return over

    def _keep(self, stream: OutStream, line: bytes) -> bytes:
        """The event for ``line`` with the stream's next id, kept in its ring (bounded by count and bytes)."""
        stream.seq += 1
        event = b"id: %d\ndata: %b\n\n" % (stream.seq, line)
        ring = stream.ring
        ring.append((stream.seq, event))
        stream.ring_bytes += len(event)
        while ring and (len(ring) > self.replay or stream.ring_bytes > self.replay_bytes):
            stream.ring_bytes -= len(ring.popleft()[1])
        return event

    def _routed(self, line: bytes, route: Route) -> StreamKey | object:
        """Where a line goes, from what its sender knew: the rules of ``_route`` without a parse."""
        kind, rid, session = route
        if kind <= ERROR:  # ANSWER or ERROR
            key = _key(rid)
            if key is not None and key == self.initial_id and self.initial is None:
                self.initial = line
                self.initial_ok = kind == ANSWER
                return _INITIAL
            return self._answer_to.pop(key, CONNECTION_STREAM)
        if type(session) is not str:
            return CONNECTION_STREAM
        if kind == REQUEST:
            key = _key(rid)
            if key is not None:
                self._client_answers[key] = session
                _bound(self._client_answers, self.max_routes)
        return session

    def _route(self, line: bytes) -> StreamKey | object:
        """Where a line goes, read from the line itself (output written without a route)."""
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            return CONNECTION_STREAM
        if type(message) is not dict:
            return CONNECTION_STREAM
        rid = _key(message.get("id"))
        if "method" not in message:
            if rid is not None and rid == self.initial_id and self.initial is None:
                self.initial = line
                self.initial_ok = "result" in message
                return _INITIAL
            return self._answer_to.pop(rid, CONNECTION_STREAM)
        params = message.get("params")
        session = params.get("sessionId") if type(params) is dict else None
        if type(session) is not str:
            return CONNECTION_STREAM
        if rid is not None:
            self._client_answers[rid] = session
            _bound(self._client_answers, self.max_routes)
        return session

    # -- readers -------------------------------------------------------------------------------------
    def refusal(self, key: StreamKey) -> StreamRefusal | None:
        """Why a reader cannot be attached to ``key`` now, or None."""
        stream = self.streams.get(key)
        if stream is None:
            return StreamRefusal.TOO_MANY if len(self.streams) >= self.max_streams else None
        return StreamRefusal.HAS_READER if stream.receiver is not None else None

    def attach(self, key: StreamKey, receiver: Receiver, last_event_id: int | None = None) -> StreamRefusal | None:
        """Attach a reader and hand it what waited; the reason it cannot be attached, or None.

        With ``last_event_id`` on a resumable stream, what the reader gets first
        is the ring's events after that id instead of the queue (which the ring
        holds too), preceded by a stream-gap notification when some are gone.
        """
        refused = self.refusal(key)
        if refused is not None:
            return refused
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = OutStream(key)
        stream.receiver = receiver
        if self.replay and last_event_id is not None:
            stream.queue.clear()
            stream.queued = 0
            receiver.send(self._resume(stream, last_event_id))
        elif stream.queue:
            waiting = b"".join(stream.queue)
            stream.queue.clear()
            stream.queued = 0
            receiver.send(waiting)
        return None

    def _resume(self, stream: OutStream, last_event_id: int) -> bytes:
        ring = stream.ring
        oldest = ring[0][0] if ring else stream.seq + 1
        if oldest <= last_event_id + 1 <= stream.seq + 1:
            return b"".join([event for seq, event in ring if seq > last_event_id])
        gap = {
            "jsonrpc": "2.0",
            "method": STREAM_GAP_METHOD,
            "params": {
                "lastEventId": str(last_event_id),
                "oldestEventId": str(oldest) if ring else None,
                "reason": "unknown" if last_event_id > stream.seq else "evicted",
            },
        }
        return b"data: " + orjson.dumps(gap) + b"\n\n" + b"".join([event for _, event in ring])

    def detach(self, key: StreamKey, receiver: Receiver) -> None:
        """The reader went away; a session stream with nothing waiting (and no replay ring) is forgotten."""
        stream = self.streams.get(key)
        if stream is None or stream.receiver is not receiver:
            return
        stream.receiver = None
        if key is not CONNECTION_STREAM and not stream.queue and not self.replay:
            del self.streams[key]

    @property
    def receivers(self) -> list[Receiver]:
        return [s.receiver for s in self.streams.values() if s.receiver is not None]

    @property
    def buffered(self) -> int:
        """Bytes every stream holds: queued for a reader, or in its reader's socket."""
        return sum(s.buffered for s in self.streams.values())

    def idle_receivers(self) -> list[Receiver]:
        """Readers sent nothing since the last call (they get a keep-alive comment)."""
        idle = []
        for stream in self.streams.values():
            if stream.receiver is not None and not stream.active:
                idle.append(stream.receiver)
            stream.active = False
        return idle

    def close(self) -> None:
        """Nothing more is routed; what waited for a reader is dropped."""
        self.closed = True
        for stream in self.streams.values():
            stream.queue.clear()
            stream.queued = 0
            stream.ring.clear()
            stream.ring_bytes = 0


_INITIAL = object()


def _key(rid: Any) -> Any:
    """A request id usable as a dict key that keeps 1 and "1" apart (and refuses unhashable ids)."""
    if type(rid) is str or type(rid) is int:
        return (type(rid) is str, rid)
    return None


def _bound(table: dict[Any, Any], limit: int) -> None:
    """Forget the oldest entries past ``limit`` (requests that will never be answered cannot pile up)."""
    while len(table) > limit:
        del table[next(iter(table))]
