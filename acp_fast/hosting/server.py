"""Many ACP connections in one process over WebSocket and Streamable HTTP, on one ``/acp`` endpoint (R27-R29).

One ``AcpHost`` listens on TCP or a unix socket; every accepted socket starts
with the front (hosting/front.py), which reads the request head and gives the
socket to picows (a WebSocket upgrade, answered by hosting/upgrade.py) or to
the HTTP/1.1 channel (hosting/http.py: the Streamable HTTP profile in
hosting/streamable.py, health probes, metrics and the console in
hosting/routes.py). Both profiles admit a connection through one
``Admission`` (hosting/admission.py), before any ACP state exists. Each ACP
connection has its own agent instance (from the factory), Connection, control
lane, 32-slot pool and session table, exactly as over stdio (R27); the live
ones are a ``PeerRegistry`` (hosting/registry.py).

``drain`` (SIGTERM in ``run_host``) refuses new connections, ends every
connection the way EOF does (running prompts are cancelled and answered
``cancelled``, R13-R15), closes each socket with 1001 after its last answer,
and returns within ``shutdown_grace_s + abort_join_s + drain_flush_s`` (R29).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from picows import WSUpgradeRequest

from ..agent.serve import run_to_exit
from ..extras import require
from ..transports.client_faults import ClientFaults
from ..transports.loop import event_loop_factory
from ..transports.ws import CLOSE_GOING_AWAY, CLOSE_INTERNAL, CLOSE_POLICY, WsPeer
from ..wire.limits import Limits
from .admission import Admission
from .budget import HostedPool, HostedSessionTable, ProcessBudget
from .config import (
    CONNECTION_ID_HEADER,
    SESSION_ID_HEADER,
    AgentFactory,
    Authorize,
    HostConfig,
    ListenAddress,
)
from .detached import DetachedSessions, HostedAgentServer
from .front import Front
from .front import Route as _Route
from .http import HttpChannel
from .registry import Peer, PeerRegistry
from .request import Request
from .routes import Routes
from .store import open_store
from .streamable import StreamableHttp
from .unbound import UnboundSockets
from .upgrade import WebSocketUpgrade
from .web_console import WebConsole, loopback_origins

if TYPE_CHECKING:
    from ..observability.access_log import AccessLog
    from ..observability.metrics import Metrics
    from ..observability.tracing import Tracing

log = logging.getLogger(__name__)


class AcpHost:
    """Serves one agent class to many WebSocket and Streamable HTTP clients in this process.

    ``AcpHost(factory, config)``; the keyword form ``AcpHost(factory, limits,
    path=..., authorize=..., ...)`` builds the ``HostConfig`` from its keywords.
    """

    def __init__(self, agent_factory: AgentFactory, config: HostConfig | Limits | None = None, **options: Any) -> None:
        if not isinstance(config, HostConfig):
            config = HostConfig.of(config, **options)
        elif options:
            raise TypeError("AcpHost takes a HostConfig or keyword options, not both")
        self.config = config
        self.agent_factory = agent_factory
        self.limits = limits = config.limits
        self.proxies = config.proxies  # whose PROXY and forwarding headers name the client
        self.path = config.path.encode()
        self.authorize = config.authorize
        self.registry = PeerRegistry()
        self.admission = Admission(config, self.registry)  # hosting/admission.py
        self.refused = self.admission.refused
        self.client_faults = ClientFaults(limits.client_error_logs_per_min)  # transports/client_faults.py
        self.budget = ProcessBudget(limits)
        store = config.session_store
        self.detached = DetachedSessions(
            self.budget, limits, open_store(store, limits.session_store_timeout_s) if isinstance(store, str) else store
        )
        # HTTP front: HTTP sockets; sockets reading their first head, and all that serve no connection, in unbound
        self._channels: set[HttpChannel] = set()
        self.unbound = UnboundSockets(limits)  # hosting/unbound.py
        self._server: asyncio.Server | None = None
        self._drained: asyncio.Event | None = None
        self.accepted = 0
        self.web_console = WebConsole() if config.web_console else None  # GET / (hosting/web_console.py)
        # GET /metrics (metrics) and/or a listener of its own (metrics_listen): observability/metrics.py.
        self.metrics_listen = config.metrics_address
        self.metrics = _open_metrics(self) if config.metrics or config.metrics_listen else None
        self.metrics_group = config.metrics_group  # --workers N: where the workers read each other's metrics
        self.metrics_port = 0  # the metrics listener's port, once listening
        # OpenTelemetry spans per request and per turn (observability/tracing.py); the provider defaults to the global.
        otel = config.otel or config.tracer_provider is not None
        self.tracing = _open_tracing(config.tracer_provider) if otel else None
        self.access_log = _open_access_log(config.access_log) if config.access_log else None
        self.routes = Routes(self.admission, limits, self.web_console, config.metrics)  # hosting/routes.py
        self.routes.metrics = self.metrics
        self.http = StreamableHttp(self)  # hosting/streamable.py
        self.ws = WebSocketUpgrade(self)  # hosting/upgrade.py

    @property
    def draining(self) -> bool:
        """Set once the host drains: new connections are refused, ``/readyz`` answers 503."""
        return self.admission.draining

    @draining.setter
    def draining(self, value: bool) -> None:
        self.admission.draining = value

    @property
    def allowed_origins(self) -> set[str]:
        """The origins that may open connections (the console's own included once listening)."""
        return self.admission.allowed_origins

    # -- listening -------------------------------------------------------------------------------
    async def start(self, address: ListenAddress | None = None, *, reuse_port: bool | None = None) -> None:
        """Listen (at ``config.listen`` by default); ``reuse_port`` lets worker processes share the port."""
        address = self.config.listen if address is None else address
        reuse_port = self.config.reuse_port if reuse_port is None else reuse_port
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
            self.allowed_origins.update(loopback_origins(self.port))
        if self.metrics is not None:
            self.metrics.start()
            if self.metrics_group is not None:
                await self.metrics.join_group(self.metrics_group, self.limits)
            if self.metrics_listen is not None:
                at = self.metrics_listen
                self.metrics_port = await self.metrics.listen(at.host, at.port or 0, self.limits)

    @property
    def port(self) -> int:
        """The TCP port bound (useful after listening on port 0)."""
        assert self._server is not None
        for sock in self._server.sockets:
            name = sock.getsockname()
            if isinstance(name, tuple):
                return int(name[1])
        raise RuntimeError("not listening on TCP")

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
            admit=self.http.admit,
            on_lost=self._http_channel_lost,
            on_refused=self._channel_refused,
        )
        channel.peer, channel.client = peer, client
        channel.address = "" if self.proxies.trusts(client) else client
        self._channels.add(channel)
        self.unbound.add(channel.address)
        channel.draining = self.draining  # answered (readyz says 503), then closed
        channel.start(already_read)

    def _http_request(self, channel: HttpChannel, request: Request, body: bytes) -> None:
        if request.path == self.path:
            self.http.request(channel, request, body)
        else:
            self.routes.answer(channel, request)

    def _http_channel_lost(self, channel: HttpChannel) -> None:
        self._channels.discard(channel)
        self.bind(channel)

    def bind(self, channel: HttpChannel) -> None:
        """The socket serves a live ACP connection (or is gone): it no longer counts as unbound."""
        if not channel.bound:
            channel.bound = True
            self.unbound.close(channel.address)

    def count_refused(self, status: int) -> None:
        """A request was refused with ``status`` (``refused`` counts them by status)."""
        self.admission.count_refused(status)

    def _channel_refused(self, channel: HttpChannel, status: int) -> None:
        """The HTTP channel answered a request it could not read (400, 408, 413, 431, ...) itself."""
        self.count_refused(status)
        if self.access_log is not None:
            self.access_log.http_refused(channel, status)

    # -- the WebSocket upgrade -------------------------------------------------------------------
    def route(self, request: WSUpgradeRequest, client: str = "") -> _Route:
        """Answer an upgrade request (hosting/upgrade.py); ``client`` is the peer's address ('' on a unix socket)."""
        return self.ws.route(request, client)

    # -- one connection -------------------------------------------------------------------------------
    def start_peer(self, peer: Peer, principal: str | None, key: str | None = None, client: str = "") -> bool:
        """A connection begins (upgrade completed, or initialize POSTed): one agent, one AgentServer, one task.

        ``key`` (the principal, or the peer address) is held to
        ``max_connections_per_principal``; the front refuses past it before
        any state exists, and this re-check closes a WebSocket 1008.
        """
        conn = peer.conn
        assert conn is not None
        if self.admission.over_principal_cap(key):
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
        self.registry.add(peer, task, key)
        return True

    async def _serve(self, peer: Peer, server: HostedAgentServer) -> None:
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
            self.registry.remove(peer)
            if self.metrics is not None:
                self.metrics.detach(peer)
            if self.access_log is not None:
                self.access_log.ws_ended(peer, self.path.decode())
            if self.tracing is not None:
                self.tracing.detach(server)
            if peer.out is not None and not peer.out.is_closing():
                peer.out.close()
            if self.draining and not self.registry and self._drained is not None:
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
        peers = list(self.registry.peers)
        log.info("draining %d connection(s)", len(peers))
        for peer in peers:
            peer.end(CLOSE_GOING_AWAY)
        for channel in list(self._channels):  # HTTP sockets between or inside requests close now
            channel.drain()
        for front in list(self.unbound.fronts):  # sockets still sending their first head
            front.drain()
        limits = self.limits
        bound = limits.shutdown_grace_s + limits.abort_join_s + limits.drain_flush_s
        if self.registry:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drained.wait(), timeout=bound)
        for peer in list(self.registry.peers):
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
        peers = self.registry.counts()
        return {
            "connections": peers["connections"],
            "sessions": self.budget.sessions,
            "detached_sessions": self.budget.detached,
            "detached_expired": self.detached.expired,
            "running_prompts": self.budget.running_prompts,
            "accepted": self.accepted,
            **{name: peers[name] for name in _PEER_COUNTS},
            "refused_per_principal": self.admission.refused_per_principal,
            "initialize_timeouts": self.ws.initialize_timeouts,
            "refused_per_address": self.unbound.refused_per_address,
        }


_PEER_COUNTS = ("binary_frames", "reading_paused", "max_buffered_output", "http_connections", "http_streams")


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


async def serve_ws(
    agent_factory: AgentFactory,
    host: HostConfig | str | None = "127.0.0.1",
    port: int | None = 0,
    *,
    unix_path: str | None = None,
    limits: Limits | None = None,
    **options: Any,
) -> AcpHost:
    """Start serving ``agent_factory()`` per connection at ``config.listen``; returns the listening host.

    ``serve_ws(factory, config)`` with a :class:`HostConfig`. The keyword form
    ``serve_ws(factory, host, port, unix_path=..., limits=..., path=...,
    authorize=..., ...)`` (every other keyword a ``HostConfig`` field) builds
    the config from its arguments.
    """
    if isinstance(host, HostConfig):
        if port != 0 or unix_path is not None or limits is not None or options:
            raise TypeError("serve_ws takes a HostConfig or keyword options, not both")
        config = host
    else:
        listen = ListenAddress(unix_path=unix_path) if unix_path else ListenAddress(host=host, port=port)
        config = HostConfig.of(limits, listen=listen, **options)
    acp_host = AcpHost(agent_factory, config)
    await acp_host.start()
    return acp_host


def run_host(
    agent_factory: AgentFactory,
    config: HostConfig | ListenAddress,
    limits: Limits | None = None,
    **options: Any,
) -> int:
    """Serve until SIGTERM/SIGINT, then drain (R29); return the exit status, as ``run_agent`` does.

    0, or 1 when the drain had to abandon tasks that ignored cancellation or
    executor threads that did not return (left behind: ``Runner.close`` would
    wait for ever). ``config.freeze_gc`` is ``run_agent``'s opt-in ``gc.freeze``
    (process-wide, and a cycle frozen at start-up is never collected);
    ``acp-fast`` asks for it. The keyword form ``run_host(factory, address,
    limits, use_uvloop=..., reuse_port=..., ...)`` (every keyword a
    ``HostConfig`` field) builds the config from its arguments.
    """
    if isinstance(config, HostConfig):
        if limits is not None or options:
            raise TypeError("run_host takes a HostConfig or keyword options, not both")
    else:
        config = HostConfig.of(limits, listen=config, **options)
    factory, kind = event_loop_factory(config.use_uvloop)
    if config.freeze_gc:
        metrics = bool(config.metrics or config.metrics_listen)
        if metrics or config.otel:  # imported before the freeze: frozen with the rest
            from ..observability import preload

            preload(metrics, config.otel)
        gc.freeze()  # see run_agent: what was imported lives as long as the process
    runner = asyncio.Runner(loop_factory=factory)
    # A closed socket's picows ping loop may still be pending after the drain: cancelled and joined there.
    join_s = config.limits.abort_join_s
    return run_to_exit(runner, _run(agent_factory, config, kind), join_s, log, threads_join_s=join_s)


async def _run(agent_factory: AgentFactory, config: HostConfig, loop_kind: str) -> None:
    host = AcpHost(agent_factory, config)
    await host.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    # A worker starts with these held (hosting/workers.py): one that came during start-up is handled now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    address = config.listen
    where = str(address) if address.unix_path else f"{address.host or '*'}:{host.port}"
    if not address.unix_path and address.host in (None, "0.0.0.0", "::"):
        where += " (every interface: reachable from other machines)"
    banner = f"acp-fast: serving ACP over WebSocket and Streamable HTTP on {where} at {config.path} ({loop_kind} loop)"
    print(banner, file=sys.stderr, flush=True)  # after the handlers: a signal sent on seeing it drains
    if config.web_console and not address.unix_path:
        name = address.host if address.host and address.host not in ("0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{f'[{name}]' if ':' in name else name}:{host.port}/"
        print(f"acp-fast: web console at {url}", file=sys.stderr, flush=True)
    if host.metrics_listen is not None:
        print(f"acp-fast: metrics at http://{host.metrics_listen.host}:{host.metrics_port}/metrics", file=sys.stderr)
    await stop.wait()
    log.info("signal received: draining")
    await host.drain()


__all__ = [
    "CONNECTION_ID_HEADER",
    "SESSION_ID_HEADER",
    "AcpHost",
    "AgentFactory",
    "Authorize",
    "HostConfig",
    "ListenAddress",
    "run_host",
    "serve_ws",
]
