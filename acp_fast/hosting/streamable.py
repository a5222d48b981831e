"""The Streamable HTTP profile on ``/acp``: a POST per message, a GET per event stream, DELETE to end.

``initialize`` POSTed without ``Acp-Connection-Id`` starts a connection and is
answered with a fresh one (128 random bits: a capability for its principal);
every later request names it. Each request is admitted on its head by the
host's ``Admission``, like a WebSocket upgrade, before any body byte is kept.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..transports.routing import CONNECTION_STREAM, StreamRefusal
from ..transports.sse import Respond, SsePeer
from ..wire import jsonrpc
from ..wire.errors import InvalidRequest, ParseError
from ..wire.limits import Limits
from . import cors
from .admission import Admission, Head, Refused
from .config import CONNECTION_ID_HEADER, SESSION_ID_HEADER
from .forwarded import client_address
from .http import HttpChannel, StreamSink
from .registry import PeerRegistry
from .request import Request, header_pairs, headers_map

if TYPE_CHECKING:
    from ..observability.access_log import AccessLog
    from .forwarded import TrustedProxies

_SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))
#: How each stream refusal is answered: the status, and the sentence when it is not the refusal's own.
_STREAM_REFUSALS = {
    StreamRefusal.GONE: (404, "Unknown Acp-Connection-Id"),
    StreamRefusal.HAS_READER: (409, StreamRefusal.HAS_READER.value),
    StreamRefusal.TOO_MANY: (400, StreamRefusal.TOO_MANY.value),
}


class ProfileHost(Protocol):
    """What the profile needs of its host."""

    limits: Limits
    path: bytes
    proxies: TrustedProxies
    admission: Admission
    registry: PeerRegistry
    access_log: AccessLog | None

    def start_peer(self, peer: SsePeer, principal: str | None, key: str | None = None, client: str = "") -> bool: ...

    def bind(self, channel: HttpChannel) -> None: ...


class StreamableHttp:
    """Admits each HTTP request on its head, and answers those to ``/acp``."""

    def __init__(self, host: ProfileHost) -> None:
        self.host = host
        self.admission = host.admission
        self.registry = host.registry
        self.limits = host.limits

    def admit(self, channel: HttpChannel, request: Request) -> bool:
        """On the request head, before any body byte is kept: one Authorization, Origin (403), auth (401).

        A refusal is answered here and the body is never read. A POST that
        would start a connection may carry ``max_initialize_body_bytes``.
        """
        host = self.host
        channel.client = client_address(channel.peer, request.headers, host.proxies)
        if host.access_log is not None:  # on the head: a request refused here is logged too
            host.access_log.http(channel, request.method, request.target, lambda: self._who(request))
        if request.path != host.path:
            request.max_body = min(request.max_body, self.limits.max_request_head_bytes)  # no other path takes a body
            return True
        headers = headers_map(request)
        preflight = cors.is_preflight(request.method, headers)
        verdict = self.admission.check(Head(header_pairs(request), headers, channel.client, preflight=preflight))
        if preflight and not isinstance(verdict, Refused):
            return True  # answered by request() before auth: a preflight carries no credentials
        if not isinstance(verdict, Refused) or verdict.origin_allowed:  # refusals past the Origin check too
            channel.response_headers = cors.response_headers(self.admission.allowed_origins, headers)
        if isinstance(verdict, Refused):
            self.refuse(channel, verdict)
            return False
        request.principal = verdict.principal
        if request.method == b"POST" and CONNECTION_ID_HEADER not in headers:
            request.max_body = min(request.max_body, self.limits.max_initialize_body_bytes)
        return True

    def request(self, channel: HttpChannel, request: Request, body: bytes) -> None:
        """One request to ``/acp``, admitted on its head (``admit``)."""
        headers = headers_map(request)
        if cors.is_preflight(request.method, headers):  # before auth: a preflight carries no credentials
            self._preflight(channel, headers)
            return
        principal = request.principal
        method = request.method
        connection_id = headers.get(CONNECTION_ID_HEADER)
        if method == b"POST":
            self._post(channel, headers, body, connection_id, principal)
            return
        if method not in (b"GET", b"DELETE"):
            channel.respond(405, b"Method Not Allowed\n", [("Allow", "GET, POST, DELETE")])
            return
        if method == b"GET" and "text/event-stream" not in headers.get("Accept", "").lower():
            self._refuse(channel, 406, "GET /acp needs Accept: text/event-stream (or a WebSocket upgrade)")
            return
        if connection_id is None:
            self._refuse(channel, 400, "Missing Acp-Connection-Id")
            return
        peer = self._bound_peer(channel, connection_id, principal)
        if peer is None:
            return
        if method == b"DELETE":
            channel.respond(202)
            peer.end()
            return
        self._open_stream(channel, peer, headers.get(SESSION_ID_HEADER), headers.get("Last-Event-ID"))

    def _bound_peer(self, channel: HttpChannel, connection_id: str, principal: str | None) -> SsePeer | None:
        """The connection the request names, its socket now bound to it; None: answered 404 (unknown)."""
        peer = self.registry.http_peer(connection_id, principal)
        if peer is None:
            self._refuse(channel, 404, "Unknown Acp-Connection-Id")
            return None
        self.host.bind(channel)
        return peer

    def refuse(self, channel: HttpChannel, refused: Refused) -> None:
        """Answer an admission refusal."""
        self.admission.count_refused(refused.status)
        channel.respond(refused.status, refused.reason.encode() + b"\n", list(refused.headers), close=refused.close)

    def _refuse(self, channel: HttpChannel, status: int, text: str) -> None:
        self.admission.count_refused(status)
        channel.respond(status, text.encode() + b"\n")

    def _who(self, request: Request) -> tuple[str | None, str | None]:
        """The access log's (principal, connection id) of a request: those of the connection it names."""
        connection_id = headers_map(request).get(CONNECTION_ID_HEADER)
        peer = self.registry.http.get(connection_id) if connection_id else None
        return (peer.principal if peer is not None else None), connection_id

    def _preflight(self, channel: HttpChannel, headers: Mapping[str, str]) -> None:
        status, extra = cors.preflight(self.admission.allowed_origins, headers, self.limits.cors_max_age_s)
        if status == 204:
            channel.respond(204, b"", extra)
        else:
            self._refuse(channel, status, "origin not allowed")

    def _post(
        self,
        channel: HttpChannel,
        headers: Mapping[str, str],
        body: bytes,
        connection_id: str | None,
        principal: str | None,
    ) -> None:
        content_type = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            self._refuse(channel, 415, "POST /acp needs Content-Type: application/json")
            return
        message = self._message(channel, body)
        if message is None:
            return
        is_initialize = message.get("method") == "initialize" and "id" in message
        if connection_id is None:
            if is_initialize and not _valid_request_id(message["id"]):
                # Its -32600 could never be matched to this POST (the error carries no id): answer it here.
                error = InvalidRequest("Invalid Request: id must be a string or an int64 integer")
                self._json_error(channel, jsonrpc.encode_error(None, error))
            elif is_initialize:
                self._initialize(channel, body, message, principal)
            else:
                self._refuse(channel, 400, "Missing Acp-Connection-Id (only initialize starts a connection)")
            return
        if is_initialize:
            self._refuse(channel, 400, "initialize is not allowed on an existing connection")
            return
        peer = self._bound_peer(channel, connection_id, principal)
        if peer is None:
            return
        session = headers.get(SESSION_ID_HEADER)
        wrong = peer.router.check(message, session)
        if wrong is not None:
            self._refuse(channel, 400, wrong)
            return
        if not peer.accepting:
            channel.hold()  # the POST waits unanswered: read nothing more from its socket meanwhile
        peer.post(body, message, session, _responder(channel))

    def _message(self, channel: HttpChannel, body: bytes) -> dict[str, Any] | None:
        """The POSTed JSON object; bad JSON or a batch is answered here (None)."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self._json_error(channel, jsonrpc.encode_error(None, ParseError(f"Parse error: {exc}")))
            return None
        if type(message) is not dict:
            what = "batches are not supported" if type(message) is list else "a message must be a JSON object"
            self._json_error(channel, jsonrpc.encode_error(None, InvalidRequest(f"Invalid Request: {what}")))
            return None
        return message

    def _json_error(self, channel: HttpChannel, line: bytes) -> None:
        """Bad JSON or a batch: the JSON-RPC error is this POST's own body (400), as the TypeScript server does."""
        self.admission.count_refused(400)
        channel.respond(400, line.rstrip(b"\n"), content_type="application/json")

    def _initialize(self, channel: HttpChannel, body: bytes, message: dict[str, Any], principal: str | None) -> None:
        socket_full = channel.connections_created >= self.limits.max_initialize_per_socket
        key = self.admission.room(principal, channel.client, socket_full)
        if isinstance(key, Refused):
            self.refuse(channel, key)
            return
        channel.connections_created += 1
        # The id is a capability for its principal (without auth: a bearer secret): 128 random bits.
        peer = SsePeer(secrets.token_hex(16), self.limits, principal)
        if not self.host.start_peer(peer, principal, key):
            peer.abort()
            channel.respond(500, b"agent could not be created\n")
            return
        self.registry.http[peer.connection_id] = peer
        self.host.bind(channel)
        respond = _responder(channel, "application/json")
        peer.initialize(body, message, respond)

    def _open_stream(
        self, channel: HttpChannel, peer: SsePeer, session: str | None, last_event_id: str | None = None
    ) -> None:
        key = CONNECTION_STREAM if session is None else session
        resume_after: int | None = None
        if last_event_id is not None and self.limits.sse_replay:
            if not (last_event_id.isascii() and last_event_id.isdigit() and len(last_event_id) <= 19):
                self._refuse(channel, 400, "Last-Event-ID must be an event id this stream sent")
                return
            resume_after = int(last_event_id)
        refused = peer.stream_refusal(key)
        if refused is not None:
            status, text = _STREAM_REFUSALS[refused]
            self._refuse(channel, status, text)
            return
        channel.start_stream(_SSE_HEADERS, _StreamSink(peer))
        peer.open_stream(key, channel, resume_after)


class _StreamSink(StreamSink):
    """A GET's socket reports flow and loss to the connection whose stream it carries."""

    __slots__ = ("_peer",)

    def __init__(self, peer: SsePeer) -> None:
        self._peer = peer

    def channel_resume_writing(self, channel: HttpChannel) -> None:
        self._peer.reader_drained()

    def channel_lost(self, channel: HttpChannel) -> None:
        self._peer.reader_lost(channel)


def _valid_request_id(value: Any) -> bool:
    """A request id acp_fast answers under (JSON-RPC: a string or a number; here integers within int64)."""
    return type(value) is str or (type(value) is int and -(2**63) <= value < 2**63)


def _responder(channel: HttpChannel, content_type: str = "text/plain") -> Respond:
    def respond(status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        channel.release()
        channel.respond(status, body, headers, content_type=content_type)

    return respond
