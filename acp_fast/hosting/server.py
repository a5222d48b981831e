"""Many ACP connections in one process over WebSocket, on one ``/acp`` endpoint (R27-R29).

One ``AcpHost`` listens on TCP or a unix socket; every accepted socket starts
with the front (hosting/front.py), which reads the request head and gives the
socket to picows (a WebSocket upgrade) or to the HTTP/1.1 channel (health
probes, everything else). ``GET /acp`` with
``Upgrade: websocket`` becomes one ACP connection: its own agent instance
(from the factory), Connection, control lane, 32-slot pool and session table,
exactly as over stdio (R27); the ``101`` carries a fresh ``Acp-Connection-Id``
(a label for logs and affinity, never a credential). Before the upgrade the
request passes, in order: one ``Authorization`` header at most (400), the
Origin allow-list (403, hosting/cors.py), a token offered as a subprotocol
(400 if unreadable, hosting/subprotocol.py), the auth hook (401), the drain
state, the connection limit and the per-principal limit (503), so a refused
client costs one HTTP exchange and no ACP state. An upgraded socket that sends
no ``initialize`` within ``initialize_timeout_s`` is closed 1008.

``GET /healthz`` answers 200 while the process runs; ``GET /readyz`` 200
while it accepts connections and 503 once it drains. ``drain`` (SIGTERM in
``run_host``) refuses new connections, ends every connection the way EOF
does (running prompts are cancelled and answered ``cancelled``, R13-R15),
closes each socket with 1001 after its last answer, and returns within
``shutdown_grace_s + abort_join_s + drain_flush_s`` (R29).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import secrets
import signal
import sys
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import orjson
from picows import WSListener, WSUpgradeRequest, WSUpgradeResponse, WSUpgradeResponseWithListener

from ..agent.base import Agent
from ..agent.serve import run_to_exit
from ..extras import require
from ..transports.client_faults import ClientFaults
from ..transports.loop import event_loop_factory
from ..transports.routing import CONNECTION_STREAM
from ..transports.sse import Respond, SsePeer
from ..transports.ws import CLOSE_GOING_AWAY, CLOSE_INTERNAL, CLOSE_POLICY, WsPeer
from ..transports.ws_deflate import EXTENSIONS_HEADER, negotiate
from ..wire import jsonrpc
from ..wire.errors import InvalidRequest, ParseError
from ..wire.limits import Limits
from . import cors, subprotocol
from .auth import duplicate_header, with_client
from .budget import HostedPool, HostedSessionTable, ProcessBudget
from .detached import DetachedSessions, HostedAgentServer
from .forwarded import TrustedProxies, client_address
from .front import Front
from .http import BadRequest, HttpChannel, Request, StreamSink, header_pairs, headers_map, origin_form
from .store import SessionStore, open_store
from .unbound import UnboundSockets
from .web_console import WebConsole, loopback_origins

if TYPE_CHECKING:
    from ..observability.access_log import AccessLog
    from ..observability.metrics import Metrics
    from ..observability.tracing import Tracing

log = logging.getLogger(__name__)

AgentFactory = Callable[[], Agent]
#: Given the upgrade request's headers (case-insensitive), and if it takes a second argument the
#: client's address (hosting/forwarded.py): refuse with 401 (False), accept (True), or accept as a
#: named principal (a non-empty string). The principal owns the connection's sessions: only it
#: may re-attach them after a reconnect (hosting/detached.py).
Authorize = Callable[[Mapping[str, str]], bool | str] | Callable[[Mapping[str, str], str], bool | str]

CONNECTION_ID_HEADER = "Acp-Connection-Id"
SESSION_ID_HEADER = "Acp-Session-Id"
_Route = WSListener | WSUpgradeResponseWithListener | None


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where to listen: ``host``/``port`` for TCP, ``unix_path`` for a unix socket."""

    host: str | None = None
    port: int | None = None
    unix_path: str | None = None

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        """``HOST:PORT``, ``[V6]:PORT`` or ``unix:PATH``."""
        if text.startswith("unix:"):
            path = text[len("unix:") :]
            if not path:
                raise ValueError("unix: needs a path, e.g. unix:/run/acp.sock")
            return cls(unix_path=path)
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"expected HOST:PORT or unix:PATH, got {text!r}")
        return cls(host=host.strip("[]") or None, port=int(port))

    def __str__(self) -> str:
        return f"unix:{self.unix_path}" if self.unix_path else f"{self.host or '*'}:{self.port}"


class AcpHost:
    """Serves one agent class to many WebSocket clients in this process."""

    def __init__(
        self,
        agent_factory: AgentFactory,
        limits: Limits | None = None,
        *,
        path: str = "/acp",
        authorize: Authorize | None = None,
        allowed_origins: Collection[str] = (),
        web_console: bool = False,
        session_store: str | SessionStore | None = None,
        metrics: bool = False,
        metrics_listen: str | None = None,
        otel: bool = False,
        tracer_provider: Any = None,
        access_log: str | None = None,
        metrics_group: str | None = None,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.agent_factory = agent_factory
        self.proxies = proxies or TrustedProxies()  # whose PROXY and forwarding headers name the client
        self.limits = limits or Limits()
        self.path = path.encode()
        self.authorize = authorize
        self._hook = with_client(authorize) if authorize is not None else None
        self.allowed_origins = cors.check_origins(allowed_origins, auth=authorize is not None)  # hosting/cors.py
        self.budget = ProcessBudget(self.limits)
        if isinstance(session_store, str):
            session_store = open_store(session_store, self.limits.session_store_timeout_s)
        self.detached = DetachedSessions(self.budget, self.limits, session_store)
        self.draining = False
        self._peers: dict[WsPeer | SsePeer, asyncio.Task[None]] = {}
        self._http: dict[str, SsePeer] = {}  # Streamable HTTP connections by Acp-Connection-Id
        # HTTP front: HTTP sockets; sockets reading their first head, and all that serve no connection, in unbound
        self._channels: set[HttpChannel] = set()
        self.unbound = UnboundSockets(self.limits)  # hosting/unbound.py
        self._server: asyncio.Server | None = None
        self._drained: asyncio.Event | None = None
        self.binary_frames = 0
        self.refused: dict[int, int] = {}
        self.client_faults = ClientFaults(self.limits.client_error_logs_per_min)  # transports/client_faults.py
        self.accepted = 0
        #: Live connections per admission key (the principal, or the peer address without auth hook).
        self._live: dict[str, int] = {}
        self._keys: dict[WsPeer | SsePeer, str] = {}
        self.refused_per_principal = 0
        self.initialize_timeouts = 0
        self.web_console = WebConsole() if web_console else None  # GET / (hosting/web_console.py)
        # GET /metrics (metrics) and/or a listener of its own (metrics_listen): observability/metrics.py.
        self.metrics_listen = ListenAddress.parse(metrics_listen) if metrics_listen else None
        if self.metrics_listen is not None and self.metrics_listen.unix_path is not None:
            raise ValueError("metrics_listen takes HOST:PORT (a unix socket is not served)")
        self.metrics = _open_metrics(self) if metrics or metrics_listen else None
        self.metrics_here = metrics  # GET /metrics on the hosting port too
        self.metrics_group = metrics_group  # --workers N: the sockets the workers read each other's metrics on
        self.metrics_port = 0  # the metrics listener's port, once listening
        # OpenTelemetry spans per request and per turn (observability/tracing.py); the provider defaults to the global.
        self.tracing = _open_tracing(tracer_provider) if otel or tracer_provider is not None else None
        self.access_log = _open_access_log(access_log) if access_log else None  # observability/access_log.py

    # -- listening -------------------------------------------------------------------------------
    async def start(self, address: ListenAddress, *, reuse_port: bool = False) -> None:
        """Listen; ``reuse_port`` lets several worker processes share the port (SO_REUSEPORT)."""
        loop = asyncio.get_running_loop()
        backlog = min(self.limits.max_connections, 4096)
        if address.unix_path is not None:
            self._server = await loop.create_unix_server(
                lambda: Front(self, unix=True), address.unix_path, backlog=backlog
            )
            return
        self._server = await loop.create_server(
            lambda: Front(self, unix=False),
            address.host,
            address.port or 0,
            backlog=backlog,
            reuse_port=reuse_port or None,
        )
        if self.web_console is not None:  # the console's own (loopback) origin may use /acp
            self.allowed_origins |= loopback_origins(self.port)
        if self.metrics is not None:
            self.metrics.start()
            if self.metrics_group is not None:
                await self.metrics.join_group(self.metrics_group, self.limits)
            if self.metrics_listen is not None:
                at = self.metrics_listen
                self.metrics_port = await self.metrics.listen(at.host, at.port or 0, self.limits)

    # -- the HTTP front: sockets before they serve an ACP connection ------------------------------
    @property
    def unbound_sockets(self) -> int:
        """Sockets reading their first head, and HTTP sockets that never addressed a live connection."""
        return self.unbound.total

    def http_channel(self, transport: asyncio.Transport, already_read: bytes, peer: str, client: str) -> None:
        """The front read a request that is not a WebSocket upgrade: serve the socket as HTTP/1.1.

        ``peer`` is the socket's client as far as the socket says (its PROXY
        header included), ``client`` as its first request's headers say.
        """
        channel = HttpChannel(
            transport,
            self._http_request,
            self.limits,
            admit=self._http_admit,
            on_lost=self._http_channel_lost,
            on_refused=self._channel_refused,
        )
        channel.peer, channel.client = peer, client
        channel.address = "" if self.proxies.trusts(client) else client
        self._channels.add(channel)
        self.unbound.add(channel.address)
        channel.draining = self.draining  # answered (readyz says 503), then closed
        channel.start(already_read)

    def _http_channel_lost(self, channel: HttpChannel) -> None:
        self._channels.discard(channel)
        self._bind(channel)

    def _bind(self, channel: HttpChannel) -> None:
        """The socket serves a live ACP connection (or is gone): it no longer counts as unbound."""
        if not channel.bound:
            channel.bound = True
            self.unbound.close(channel.address)

    def _http_admit(self, channel: HttpChannel, request: Request) -> bool:
        """On the request head, before any body byte is kept: one Authorization, Origin (403), auth (401).

        A refusal is answered here and the body is never read. A POST that
        would start a connection may carry ``max_initialize_body_bytes``.
        """
        channel.client = client_address(channel.peer, request.headers, self.proxies)
        if self.access_log is not None:  # on the head: a request refused here is logged too
            self.access_log.http(channel, request.method, request.target, lambda: self._who(request))
        if request.path != self.path:
            request.max_body = min(request.max_body, self.limits.max_request_head_bytes)  # no other path takes a body
            return True
        if duplicate_header(header_pairs(request), "Authorization"):
            self._http_refuse(channel, 400, "more than one Authorization header")
            return False
        headers = headers_map(request)
        if cors.is_preflight(request.method, headers):
            return True  # answered by _acp_request before auth: a preflight carries no credentials
        if not cors.origin_allowed(self.allowed_origins, headers.get("Origin")):
            self._http_refuse(channel, 403, "origin not allowed")
            return False
        channel.response_headers = cors.response_headers(self.allowed_origins, headers)  # refusals too
        if self.authorize is not None:
            request.principal = self._principal(headers, channel.client)
            if request.principal is None:
                self._http_refuse(channel, 401, "unauthorized", [("WWW-Authenticate", "Bearer")])
                return False
        if request.method == b"POST" and CONNECTION_ID_HEADER not in headers:
            request.max_body = min(request.max_body, self.limits.max_initialize_body_bytes)
        return True

    def _http_request(self, channel: HttpChannel, request: Request, body: bytes) -> None:
        path = request.path
        if path == self.path:
            self._acp_request(channel, request, body)
        elif path == b"/healthz":
            channel.respond(200, b"ok\n", close=True)
        elif path == b"/readyz":
            if self.draining:
                channel.respond(503, b"draining\n", close=True)
            else:
                channel.respond(200, b"ready\n", close=True)
        elif path == b"/metrics" and self.metrics is not None and self.metrics_here:
            # The auth hook applies, as on /acp: a scrape config sends the bearer token (docs/OBSERVABILITY.md).
            if self.authorize is not None and self._principal(headers_map(request), channel.client) is None:
                self._http_refuse(channel, 401, "unauthorized", [("WWW-Authenticate", "Bearer")])
                return
            self.metrics.answer_http(channel, self.limits)
        elif self.web_console is not None and self.web_console.serves(path):
            status, page, headers, kind = self.web_console.answer(request.method, request.target, headers_map(request))
            channel.respond(status, page, headers, content_type=kind)
        else:
            channel.respond(404, b"404 Not Found", close=True)

    # -- the Streamable HTTP profile -----------------------------------------------------------------
    def _acp_request(self, channel: HttpChannel, request: Request, body: bytes) -> None:
        """One request of the Streamable HTTP profile, admitted on its head (``_http_admit``) like an upgrade."""
        headers = headers_map(request)
        if cors.is_preflight(request.method, headers):  # before auth: a preflight carries no credentials
            self._preflight(channel, headers)
            return
        principal = request.principal
        method = request.method
        connection_id = headers.get(CONNECTION_ID_HEADER)
        if method == b"POST":
            self._acp_post(channel, headers, body, connection_id, principal)
            return
        if method not in (b"GET", b"DELETE"):
            channel.respond(405, b"Method Not Allowed\n", [("Allow", "GET, POST, DELETE")])
            return
        if method == b"GET" and "text/event-stream" not in headers.get("Accept", "").lower():
            self._http_refuse(channel, 406, "GET /acp needs Accept: text/event-stream (or a WebSocket upgrade)")
            return
        if connection_id is None:
            self._http_refuse(channel, 400, "Missing Acp-Connection-Id")
            return
        peer = self._http_peer(connection_id, principal)
        if peer is None:
            self._http_refuse(channel, 404, "Unknown Acp-Connection-Id")
            return
        self._bind(channel)
        if method == b"DELETE":
            channel.respond(202)
            peer.end()
            return
        self._open_stream(channel, peer, headers.get(SESSION_ID_HEADER), headers.get("Last-Event-ID"))

    def _who(self, request: Request) -> tuple[str | None, str | None]:
        """The access log's (principal, connection id) of a request: those of the connection it names."""
        connection_id = headers_map(request).get(CONNECTION_ID_HEADER)
        peer = self._http.get(connection_id) if connection_id else None
        return (peer.principal if peer is not None else None), connection_id

    def _http_peer(self, connection_id: str, principal: str | None) -> SsePeer | None:
        """The connection, if it exists, has not ended and belongs to this principal (else: unknown, 404)."""
        peer = self._http.get(connection_id)
        if peer is None or peer.ended or peer.principal != principal:
            return None
        return peer

    def _preflight(self, channel: HttpChannel, headers: Mapping[str, str]) -> None:
        status, extra = cors.preflight(self.allowed_origins, headers, self.limits.cors_max_age_s)
        if status == 204:
            channel.respond(204, b"", extra)
        else:
            self._http_refuse(channel, status, "origin not allowed")

    def _http_refuse(
        self, channel: HttpChannel, status: int, text: str, headers: list[tuple[str, str]] | None = None
    ) -> None:
        self._count_refused(status)
        channel.respond(status, text.encode() + b"\n", headers or [])

    def _acp_post(
        self,
        channel: HttpChannel,
        headers: Mapping[str, str],
        body: bytes,
        connection_id: str | None,
        principal: str | None,
    ) -> None:
        content_type = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            self._http_refuse(channel, 415, "POST /acp needs Content-Type: application/json")
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self._json_error(channel, jsonrpc.encode_error(None, ParseError(f"Parse error: {exc}")))
            return
        if type(message) is not dict:
            what = "batches are not supported" if type(message) is list else "a message must be a JSON object"
            self._json_error(channel, jsonrpc.encode_error(None, InvalidRequest(f"Invalid Request: {what}")))
            return
        is_initialize = message.get("method") == "initialize" and "id" in message
        if connection_id is None:
            if is_initialize and not _valid_request_id(message["id"]):
                # Its -32600 could never be matched to this POST (the error carries no id): answer it here.
                error = InvalidRequest("Invalid Request: id must be a string or an int64 integer")
                self._json_error(channel, jsonrpc.encode_error(None, error))
            elif is_initialize:
                self._http_initialize(channel, body, message, principal)
            else:
                self._http_refuse(channel, 400, "Missing Acp-Connection-Id (only initialize starts a connection)")
            return
        if is_initialize:
            self._http_refuse(channel, 400, "initialize is not allowed on an existing connection")
            return
        peer = self._http_peer(connection_id, principal)
        if peer is None:
            self._http_refuse(channel, 404, "Unknown Acp-Connection-Id")
            return
        self._bind(channel)
        session = headers.get(SESSION_ID_HEADER)
        wrong = peer.router.check(message, session)
        if wrong is not None:
            self._http_refuse(channel, 400, wrong)
            return
        if not peer.accepting:
            channel.hold()  # the POST waits unanswered: read nothing more from its socket meanwhile
        peer.post(body, message, session, _responder(channel))

    def _json_error(self, channel: HttpChannel, line: bytes) -> None:
        """Bad JSON or a batch: the JSON-RPC error is this POST's own body (400), as the TypeScript server does."""
        self._count_refused(400)
        channel.respond(400, line.rstrip(b"\n"), content_type="application/json")

    def _http_initialize(
        self, channel: HttpChannel, body: bytes, message: dict[str, Any], principal: str | None
    ) -> None:
        if self.draining:
            self._http_refuse(channel, 503, "draining", [("Retry-After", "1")])
            return
        if len(self._peers) >= self.limits.max_connections:
            self._http_refuse(channel, 503, "connection limit reached", [("Retry-After", "1")])
            return
        if channel.connections_created >= self.limits.max_initialize_per_socket:
            self._count_refused(503)
            channel.respond(503, b"this socket opened its share of connections; reconnect\n", close=True)
            return
        key = _admission_key(principal, channel.client)
        if self._over_principal_cap(key):
            self._http_refuse(channel, 503, "too many connections for this client", [("Retry-After", "1")])
            return
        channel.connections_created += 1
        # The id is a capability for its principal (without auth: a bearer secret): 128 random bits.
        peer = SsePeer(secrets.token_hex(16), self.limits, principal)
        if not self._start_peer(peer, principal, key):
            peer.abort()
            channel.respond(500, b"agent could not be created\n")
            return
        self._http[peer.connection_id] = peer
        self._bind(channel)
        respond = _responder(channel, "application/json")
        peer.initialize(body, message, respond)

    def _open_stream(
        self, channel: HttpChannel, peer: SsePeer, session: str | None, last_event_id: str | None = None
    ) -> None:
        key = CONNECTION_STREAM if session is None else session
        resume_after: int | None = None
        if last_event_id is not None and self.limits.sse_replay:
            if not (last_event_id.isascii() and last_event_id.isdigit() and len(last_event_id) <= 19):
                self._http_refuse(channel, 400, "Last-Event-ID must be an event id this stream sent")
                return
            resume_after = int(last_event_id)
        refused = peer.stream_refusal(key)
        if refused is not None:
            if refused == "gone":
                self._http_refuse(channel, 404, "Unknown Acp-Connection-Id")
            elif refused == "this stream already has a reader":
                self._http_refuse(channel, 409, "this stream already has a reader")
            else:
                self._http_refuse(channel, 400, refused)
            return
        channel.start_stream(_SSE_HEADERS, _StreamSink(peer))
        peer.open_stream(key, channel, resume_after)

    @property
    def port(self) -> int:
        """The TCP port bound (useful after listening on port 0)."""
        assert self._server is not None
        for sock in self._server.sockets:
            name = sock.getsockname()
            if isinstance(name, tuple):
                return int(name[1])
        raise RuntimeError("not listening on TCP")

    # -- before the upgrade --------------------------------------------------------------------------
    def _route(self, request: WSUpgradeRequest, client: str = "") -> _Route:
        """Answer an upgrade request; ``client`` is the peer's address ('' when unknown: a unix socket)."""
        try:  # absolute-form too (GET http://host/acp), as for any other request (hosting/http.py)
            path = origin_form(b"GET", request.path).split(b"?", 1)[0]
        except BadRequest as exc:
            return self._refuse(HTTPStatus.BAD_REQUEST, f"{exc}\n".encode())
        if path == b"/healthz":
            return _plain(HTTPStatus.OK, b"ok\n")
        if path == b"/readyz":
            if self.draining:
                return _plain(HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n")
            return _plain(HTTPStatus.OK, b"ready\n")
        if path != self.path:
            return None  # 404
        headers = request.headers
        if duplicate_header(headers.items(), "Authorization"):  # which one counts would differ by reader
            return self._refuse(HTTPStatus.BAD_REQUEST, b"more than one Authorization header\n", None, client)
        if not cors.origin_allowed(self.allowed_origins, headers.get("Origin")):
            return self._refuse(HTTPStatus.FORBIDDEN, b"origin not allowed\n", None, client)
        try:  # the ACP subprotocol to select, and a token offered as one (hosting/subprotocol.py)
            offer = subprotocol.read_offer(headers.getall(subprotocol.PROTOCOL_HEADER, []))
            auth_headers = subprotocol.hook_headers(headers, offer)
        except subprotocol.OfferError as exc:
            return self._refuse(HTTPStatus.BAD_REQUEST, f"{exc}\n".encode(), None, client)
        principal: str | None = None
        if self.authorize is not None:
            principal = self._principal(auth_headers, client)
            if principal is None:
                return self._refuse(HTTPStatus.UNAUTHORIZED, b"unauthorized\n", {"WWW-Authenticate": "Bearer"}, client)
        if "websocket" not in headers.get("Upgrade", "").lower():
            return self._refuse(
                HTTPStatus.UPGRADE_REQUIRED,
                b"this server offers ACP over WebSocket only\n",
                {"Upgrade": "websocket", "Connection": "Upgrade"},
                client,
            )
        if self.draining:
            return self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n", {"Retry-After": "1"}, client)
        if len(self._peers) >= self.limits.max_connections:
            busy = b"connection limit reached\n"
            return self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, busy, {"Retry-After": "1"}, client)
        key = _admission_key(principal, client)
        if self._over_principal_cap(key):
            return self._refuse(
                HTTPStatus.SERVICE_UNAVAILABLE, b"too many connections for this client\n", {"Retry-After": "1"}, client
            )
        connection_id = uuid.uuid4().hex
        extra = {CONNECTION_ID_HEADER: connection_id}
        if offer.protocol is not None:
            extra[subprotocol.PROTOCOL_HEADER] = offer.protocol  # one the client offered, never the bearer entry
        deflate = negotiate(headers.getall(EXTENSIONS_HEADER, [])) if self.limits.ws_deflate else None
        if deflate is not None:
            extra[EXTENSIONS_HEADER] = deflate.response
        peer = WsPeer(connection_id, self.limits, lambda p: self._start_ws(p, principal, key, client), deflate=deflate)
        peer.on_initialize_timeout = self._count_initialize_timeout
        peer.faults = self.client_faults
        response = WSUpgradeResponse.create_101_response(extra)
        return WSUpgradeResponseWithListener(response, peer)

    def _principal(self, headers: Mapping[str, str], client: str = "") -> str | None:
        """Who the auth hook accepted (None: refused).

        A string from the hook names the principal; ``True`` makes the
        credential itself the principal (a digest of ``Authorization``), so
        every holder of one bearer token is one principal.
        """
        assert self._hook is not None
        try:
            verdict = self._hook(headers, client)
        except Exception:
            log.exception("the authorize hook failed; refusing the request")
            return None
        if isinstance(verdict, str):
            return f"hook:{verdict}" if verdict else None
        if not verdict:
            return None
        credential = headers.get("Authorization", "").encode()
        return "authorization:" + hashlib.sha256(credential).hexdigest()

    def _count_initialize_timeout(self) -> None:
        self.initialize_timeouts += 1

    def _over_principal_cap(self, key: str | None) -> bool:
        """Does ``key`` already hold ``max_connections_per_principal`` live connections? (Counted when so.)"""
        if key is None or self._live.get(key, 0) < self.limits.max_connections_per_principal:
            return False
        self.refused_per_principal += 1
        log.debug("refusing a connection: this %s holds %d already", key.partition(":")[0], self._live[key])
        return True

    def _count_refused(self, status: HTTPStatus | int) -> None:
        code = int(status)
        self.refused[code] = self.refused.get(code, 0) + 1

    def _channel_refused(self, channel: HttpChannel, status: int) -> None:
        """The HTTP channel answered a request it could not read (400, 408, 413, 431, ...) itself."""
        self._count_refused(status)
        if self.access_log is not None:
            self.access_log.http_refused(channel, status)

    def _refuse(
        self, status: HTTPStatus, body: bytes, headers: Mapping[str, str] | None = None, client: str = ""
    ) -> WSUpgradeResponseWithListener:
        self._count_refused(status)
        if self.access_log is not None:
            self.access_log.ws_refused(self.path.decode(), int(status), client)
        return WSUpgradeResponseWithListener(WSUpgradeResponse.create_error_response(status, body, headers), None)

    # -- one connection -------------------------------------------------------------------------------
    def _start_ws(self, peer: WsPeer, principal: str | None, key: str | None, client: str) -> None:
        self._start_peer(peer, principal, key, client)

    def _start_peer(
        self, peer: WsPeer | SsePeer, principal: str | None, key: str | None = None, client: str = ""
    ) -> bool:
        """A connection begins (upgrade completed, or initialize POSTed): one agent, one AgentServer, one task.

        ``key`` (the principal, or the peer address) is held to
        ``max_connections_per_principal``; the front refuses past it before
        any state exists, and this re-check closes a WebSocket 1008.
        """
        conn = peer.conn
        assert conn is not None
        if self._over_principal_cap(key):
            if isinstance(peer, WsPeer):
                peer.close(CLOSE_POLICY, b"too many connections for this client")
            return False
        try:
            agent = self.agent_factory()
            sessions = HostedSessionTable(self.limits.max_sessions, self.budget)
            pool = HostedPool(conn.loop, self.limits.max_background, self.budget)
            server = HostedAgentServer(
                agent, conn, sessions=sessions, pool=pool, detached=self.detached, principal=principal
            )
        except Exception:
            log.exception("could not create the agent for connection %s", peer.connection_id[:8])
            if isinstance(peer, WsPeer):
                peer.close(CLOSE_INTERNAL, b"agent could not be created")
            return False
        self.accepted += 1
        if self.metrics is not None:
            self.metrics.attach(peer, server)
        if self.tracing is not None:
            self.tracing.attach(server, "websocket" if isinstance(peer, WsPeer) else "http")
        if self.access_log is not None and isinstance(peer, WsPeer):
            self.access_log.ws_started(peer, principal, client)
        task = conn.loop.create_task(self._serve(peer, server), name=f"acp.host:{peer.connection_id[:8]}")
        self._peers[peer] = task
        if key is not None:
            self._keys[peer] = key
            self._live[key] = self._live.get(key, 0) + 1
        return True

    async def _serve(self, peer: WsPeer | SsePeer, server: HostedAgentServer) -> None:
        try:
            await server.conn.run()
        except Exception:
            log.exception("connection %s failed", peer.connection_id[:8])
        finally:
            # A drain parks too when another process can take the sessions over.
            handover = not self.draining or self.detached.shared
            park = handover and self.limits.detached_session_timeout_s > 0 and server.can_resume
            try:
                await server.release_sessions(park)
            except Exception:
                log.exception("connection %s: parking its sessions failed", peer.connection_id[:8])
            self.binary_frames += peer.binary_frames
            self._peers.pop(peer, None)
            if self.metrics is not None:
                self.metrics.detach(peer)
            if self.access_log is not None:
                self.access_log.ws_ended(peer, self.path.decode())
            if self.tracing is not None:
                self.tracing.detach(server)
            key = self._keys.pop(peer, None)
            if key is not None:
                left = self._live[key] - 1
                if left:
                    self._live[key] = left
                else:
                    del self._live[key]
            if isinstance(peer, SsePeer):
                self._http.pop(peer.connection_id, None)
            if peer.out is not None and not peer.out.is_closing():
                peer.out.close()
            if self.draining and not self._peers and self._drained is not None:
                self._drained.set()

    # -- drain (R29) -----------------------------------------------------------------------------------
    async def drain(self) -> None:
        """Refuse new connections, end every connection like EOF, close each with 1001, then stop listening.

        With a shared session store each connection's sessions are parked there
        as it ends (a running prompt is cancelled and answered first), for the
        process the client reconnects to; the memory store drops them.
        """
        if self._drained is not None:
            await self._drained.wait()
            return
        self.draining = True
        if self.tracing is not None:
            self.tracing.drain()
        self._drained = drained = asyncio.Event()
        peers = list(self._peers)
        log.info("draining %d connection(s)", len(peers))
        for peer in peers:
            peer.end(CLOSE_GOING_AWAY)
        for channel in list(self._channels):  # HTTP sockets between or inside requests close now
            channel.drain()
        for front in list(self.unbound.fronts):  # sockets still sending their first head
            front.drain()
        limits = self.limits
        bound = limits.shutdown_grace_s + limits.abort_join_s + limits.drain_flush_s
        if self._peers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drained.wait(), timeout=bound)
        for peer in list(self._peers):
            log.warning("connection %s outlived the drain bound; dropping it", peer.connection_id[:8])
            peer.abort()
        self.detached.clear()
        drained.set()
        if self._server is not None:
            self._server.close()
        await self.detached.close()
        if self.metrics is not None:
            await self.metrics.stop()

    async def close(self) -> None:
        """Drain, then release the listening socket."""
        await self.drain()

    # -- introspection ------------------------------------------------------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        """Live process-wide counts; all but the totals return to zero once every client is gone.

        ``reading_paused``: connections whose socket is not being read (backpressure, R26);
        ``max_buffered_output``: the most output bytes any one connection has queued;
        ``detached_sessions``: sessions whose socket dropped, parked for a reconnect;
        ``refused_per_principal``: connections refused by ``max_connections_per_principal`` (total);
        ``initialize_timeouts``: WebSockets closed for sending no ``initialize`` in time (total);
        ``refused_per_address``: sockets refused because their address held ``max_unbound_per_address`` (total).
        """
        return {
            "connections": len(self._peers),
            "sessions": self.budget.sessions,
            "detached_sessions": self.budget.detached,
            "detached_expired": self.detached.expired,
            "running_prompts": self.budget.running_prompts,
            "accepted": self.accepted,
            "binary_frames": self.binary_frames + sum(p.binary_frames for p in self._peers),
            "reading_paused": sum(1 for p in self._peers if p.reading_paused),
            "max_buffered_output": max((p.buffered_output for p in self._peers), default=0),
            "http_connections": len(self._http),
            "http_streams": sum(p.stream_count for p in self._http.values()),
            "refused_per_principal": self.refused_per_principal,
            "initialize_timeouts": self.initialize_timeouts,
            "refused_per_address": self.unbound.refused_per_address,
        }


_SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))


def _open_metrics(host: AcpHost) -> Metrics:
    """Import the metrics module only now: a host without metrics never loads prometheus_client."""
    require("metrics", "--metrics / --metrics-listen")
    from ..observability.metrics import Metrics

    return Metrics(host)


def _open_access_log(fmt: str) -> AccessLog:
    from ..observability.access_log import AccessLog

    return AccessLog(fmt)


def _open_tracing(tracer_provider: Any) -> Tracing:
    """Import the tracing module only now: a host without --otel never loads opentelemetry."""
    require("otel", "--otel")
    from ..observability.tracing import Tracing

    return Tracing(tracer_provider)


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


def _admission_key(principal: str | None, client: str) -> str | None:
    """Whose connection this is, for ``max_connections_per_principal``: None (not capped) on a unix socket."""
    if principal is not None:
        return principal
    return f"address:{client}" if client else None


def _responder(channel: HttpChannel, content_type: str = "text/plain") -> Respond:
    def respond(status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        channel.release()
        channel.respond(status, body, headers, content_type=content_type)

    return respond


def _plain(status: HTTPStatus, body: bytes) -> WSUpgradeResponseWithListener:
    if status is HTTPStatus.OK:
        response = WSUpgradeResponse.create_ok_response(body)
    else:
        response = WSUpgradeResponse.create_error_response(status, body, {"Content-Type": "text/plain"})
    return WSUpgradeResponseWithListener(response, None)


async def serve_ws(
    agent_factory: AgentFactory,
    host: str | None = "127.0.0.1",
    port: int | None = 0,
    *,
    unix_path: str | None = None,
    limits: Limits | None = None,
    path: str = "/acp",
    authorize: Authorize | None = None,
    allowed_origins: Collection[str] = (),
    web_console: bool = False,
    session_store: str | SessionStore | None = None,
    metrics: bool = False,
    metrics_listen: str | None = None,
    otel: bool = False,
    tracer_provider: Any = None,
    access_log: str | None = None,
    proxies: TrustedProxies | None = None,
) -> AcpHost:
    """Start serving ``agent_factory()`` per WebSocket connection; returns the listening host.

    ``session_store``: where parked sessions wait (``memory``, ``sqlite:PATH``,
    ``redis://HOST:PORT/DB`` or a :class:`SessionStore`); None is memory.
    ``metrics``: serve ``GET /metrics`` on this port; ``metrics_listen``
    (``HOST:PORT``): serve it on a port of its own instead (the metrics extra).
    ``otel``: OpenTelemetry spans per request and per prompt turn, through
    ``tracer_provider`` or the global one (the otel extra). ``access_log``:
    ``text`` or ``json``, one stderr line per HTTP request and WebSocket connection.
    ``proxies``: the proxies whose PROXY and forwarding headers name the client (hosting/forwarded.py).
    """
    acp_host = AcpHost(
        agent_factory,
        limits,
        path=path,
        authorize=authorize,
        allowed_origins=allowed_origins,
        web_console=web_console,
        session_store=session_store,
        metrics=metrics,
        metrics_listen=metrics_listen,
        otel=otel,
        tracer_provider=tracer_provider,
        access_log=access_log,
        proxies=proxies,
    )
    address = ListenAddress(unix_path=unix_path) if unix_path else ListenAddress(host=host, port=port)
    await acp_host.start(address)
    return acp_host


def run_host(
    agent_factory: AgentFactory,
    address: ListenAddress,
    limits: Limits | None = None,
    *,
    use_uvloop: bool = True,
    authorize: Authorize | None = None,
    allowed_origins: Collection[str] = (),
    reuse_port: bool = False,
    web_console: bool = False,
    session_store: str | None = None,
    freeze_gc: bool = False,
    metrics: bool = False,
    metrics_listen: str | None = None,
    otel: bool = False,
    access_log: str | None = None,
    metrics_group: str | None = None,
    proxies: TrustedProxies | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT, then drain (R29); return the exit status, as ``run_agent`` does.

    0, or 1 when the drain had to abandon tasks that ignored cancellation or
    executor threads that did not return (left behind: ``Runner.close`` would
    wait for ever). ``freeze_gc`` is ``run_agent``'s opt-in ``gc.freeze`` (process-wide,
    and a cycle frozen at start-up is never collected); ``acp-fast`` asks for it.
    ``session_store``, ``metrics``, ``metrics_listen``, ``otel``, ``access_log`` and ``proxies`` as for
    :func:`serve_ws`;
    ``metrics_group``: with ``--workers N``, the directory where the workers serve each other their metrics.
    """
    factory, kind = event_loop_factory(use_uvloop)
    if freeze_gc:
        if metrics or metrics_listen or otel:  # imported before the freeze: frozen with the rest
            from ..observability import preload

            preload(bool(metrics or metrics_listen), otel)
        gc.freeze()  # see run_agent: what was imported lives as long as the process
    runner = asyncio.Runner(loop_factory=factory)
    # A closed socket's picows ping loop may still be pending after the drain: cancelled and joined there.
    return run_to_exit(
        runner,
        _run(
            agent_factory,
            address,
            limits,
            authorize,
            allowed_origins,
            kind,
            reuse_port,
            web_console,
            session_store,
            metrics=metrics,
            metrics_listen=metrics_listen,
            otel=otel,
            access_log=access_log,
            metrics_group=metrics_group,
            proxies=proxies,
        ),
        (limits or Limits()).abort_join_s,
        log,
        threads_join_s=(limits or Limits()).abort_join_s,
    )


async def _run(
    agent_factory: AgentFactory,
    address: ListenAddress,
    limits: Limits | None,
    authorize: Authorize | None,
    allowed_origins: Collection[str],
    loop_kind: str,
    reuse_port: bool,
    web_console: bool = False,
    session_store: str | None = None,
    *,
    metrics: bool = False,
    metrics_listen: str | None = None,
    otel: bool = False,
    access_log: str | None = None,
    metrics_group: str | None = None,
    proxies: TrustedProxies | None = None,
) -> None:
    host = AcpHost(
        agent_factory,
        limits,
        authorize=authorize,
        allowed_origins=allowed_origins,
        web_console=web_console,
        session_store=session_store,
        metrics=metrics,
        metrics_listen=metrics_listen,
        otel=otel,
        access_log=access_log,
        metrics_group=metrics_group,
        proxies=proxies,
    )
    await host.start(address, reuse_port=reuse_port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    # A worker starts with these held (hosting/workers.py): one that came during start-up is handled now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    where = str(address) if address.unix_path else f"{address.host or '*'}:{host.port}"
    if not address.unix_path and address.host in (None, "0.0.0.0", "::"):
        where += " (every interface: reachable from other machines)"
    banner = f"acp-fast: serving ACP over WebSocket and Streamable HTTP on {where} at /acp ({loop_kind} loop)"
    print(banner, file=sys.stderr, flush=True)  # after the handlers: a signal sent on seeing it drains
    if web_console and not address.unix_path:
        name = address.host if address.host and address.host not in ("0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{f'[{name}]' if ':' in name else name}:{host.port}/"
        print(f"acp-fast: web console at {url}", file=sys.stderr, flush=True)
    if host.metrics_listen is not None:
        print(f"acp-fast: metrics at http://{host.metrics_listen.host}:{host.metrics_port}/metrics", file=sys.stderr)
    await stop.wait()
    log.info("signal received: draining")
    await host.drain()
