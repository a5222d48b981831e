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
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol, cast

import orjson

#: The key of the connection-scoped stream; session streams are keyed by session id.
CONNECTION_STREAM: None = None
StreamKey = str | None

#: Methods whose answer goes to the connection stream even though they name a session:
#: the client awaits it before it holds that session's stream (the RFD and the TypeScript SDK agree).
_ANSWER_ON_CONNECTION = frozenset({"session/load"})


class Receiver(Protocol):
    """A reader attached to a stream: an HTTP response body that stays open."""

    def send(self, data: bytes) -> None: ...

    @property
    def buffered(self) -> int: ...


class OutStream:
    """One event stream: what waits for a reader, and the reader when one is attached."""

    __slots__ = ("active", "key", "queue", "queued", "receiver")

    def __init__(self, key: StreamKey) -> None:
        self.key = key
        self.queue: deque[bytes] = deque()
        self.queued = 0
        self.receiver: Receiver | None = None
        self.active = False  # something was sent since the last keep-alive tick

    @property
    def buffered(self) -> int:
        receiver = self.receiver
        return self.queued + (receiver.buffered if receiver is not None else 0)


class StreamRouter:
    """Routes a connection's outgoing lines to its streams; bounded per stream and in stream count."""

    def __init__(self, *, max_streams: int, max_buffered: int, max_routes: int) -> None:
        self.max_streams = max_streams
        self.max_buffered = max_buffered
        self.max_routes = max_routes
        self.streams: dict[StreamKey, OutStream] = {CONNECTION_STREAM: OutStream(CONNECTION_STREAM)}
        self._answer_to: dict[Any, StreamKey] = {}  # client request id -> stream of its answer
        self._client_answers: dict[Any, str] = {}  # agent request id -> session it was sent on
        self.initial_id: Any = None
        self.initial: bytes | None = None
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
    def write(self, data: bytes | bytearray | memoryview) -> bool:
        """Route every line of ``data``; True if a stream is now over ``max_buffered``."""
        if self.closed:
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
                key = self._route(line)
                if key is not _INITIAL:
                    batches.setdefault(cast(StreamKey, key), []).append(b"data: " + line + b"\n\n")
            start = end + 1
        over = False
        for key, events in batches.items():
            stream = self.streams.get(key)
            if stream is None:
                if len(self.streams) >= self.max_streams:
                    return True
                stream = self.streams[key] = OutStream(key)
            chunk = b"".join(events)
            stream.active = True
            if stream.receiver is not None:
                stream.receiver.send(chunk)
            else:
                stream.queue.append(chunk)
                stream.queued += len(chunk)
            if stream.buffered > self.max_buffered:
                over = True
        return over

    def _route(self, line: bytes) -> StreamKey | object:
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
    def refusal(self, key: StreamKey) -> str | None:
        """Why a reader cannot be attached to ``key`` now, or None."""
        stream = self.streams.get(key)
        if stream is None:
            return "too many streams on this connection" if len(self.streams) >= self.max_streams else None
        return "this stream already has a reader" if stream.receiver is not None else None

    def attach(self, key: StreamKey, receiver: Receiver) -> str | None:
        """Attach a reader and hand it what waited; the reason it cannot be attached, or None."""
        refused = self.refusal(key)
        if refused is not None:
            return refused
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = OutStream(key)
        stream.receiver = receiver
        if stream.queue:
            waiting = b"".join(stream.queue)
            stream.queue.clear()
            stream.queued = 0
            receiver.send(waiting)
        return None

    def detach(self, key: StreamKey, receiver: Receiver) -> None:
        """The reader went away; a session stream with nothing waiting is forgotten."""
        stream = self.streams.get(key)
        if stream is None or stream.receiver is not receiver:
            return
        stream.receiver = None
        if key is not CONNECTION_STREAM and not stream.queue:
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
