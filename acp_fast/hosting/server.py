"""Many ACP connections in one process over WebSocket, on one ``/acp`` endpoint (R27-R29).

One ``AcpHost`` listens on TCP (unix sockets are not served yet: picows
sets TCP options on every accepted socket). ``GET /acp`` with
``Upgrade: websocket`` becomes one ACP connection: its own agent instance
(from the factory), Connection, control lane, 32-slot pool and session table,
exactly as over stdio (R27); the ``101`` carries a fresh ``Acp-Connection-Id``
(a label for logs and affinity, never a credential). Before the upgrade the
request passes, in order: the Origin allow-list (403), the auth hook (401),
the drain state and the connection limit (503), so a refused client costs
one HTTP exchange and no ACP state.

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
import os
import signal
import sys
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from picows import WSListener, WSUpgradeRequest, WSUpgradeResponse, WSUpgradeResponseWithListener, ws_create_server

from ..agent.base import Agent
from ..transports.loop import event_loop_factory
from ..transports.ws import CLOSE_GOING_AWAY, CLOSE_INTERNAL, WsPeer
from ..transports.ws_deflate import EXTENSIONS_HEADER, negotiate
from ..wire.limits import Limits
from .budget import HostedPool, HostedSessionTable, ProcessBudget
from .detached import DetachedSessions, HostedAgentServer

log = logging.getLogger(__name__)

AgentFactory = Callable[[], Agent]
#: Given the upgrade request's headers (case-insensitive): refuse with 401 (False), accept
#: (True), or accept as a named principal (a non-empty string). The principal owns the
#: connection's sessions: only it may re-attach them after a reconnect (hosting/detached.py).
Authorize = Callable[[Mapping[str, str]], bool | str]

CONNECTION_ID_HEADER = "Acp-Connection-Id"
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
    ) -> None:
        self.agent_factory = agent_factory
        self.limits = limits or Limits()
        self.path = path.encode()
        self.authorize = authorize
        self.allowed_origins = frozenset(allowed_origins)
        self.budget = ProcessBudget(self.limits)
        self.detached = DetachedSessions(self.budget, self.limits.detached_session_timeout_s)
        self.draining = False
        self._peers: dict[WsPeer, asyncio.Task[None]] = {}
        self._server: asyncio.Server | None = None
        self._drained: asyncio.Event | None = None
        self.binary_frames = 0
        self.refused: dict[int, int] = {}
        self.accepted = 0

    # -- listening -------------------------------------------------------------------------------
    async def start(self, address: ListenAddress, *, reuse_port: bool = False) -> None:
        """Listen; ``reuse_port`` lets several worker processes share the port (SO_REUSEPORT)."""
        limits = self.limits
        options: dict[str, Any] = {
            "enable_auto_ping": True,
            "auto_ping_idle_timeout": limits.ping_interval_s,
            "auto_ping_reply_timeout": limits.ping_timeout_s,
            "max_frame_size": limits.max_line_bytes,
            "read_buffer_init_size": limits.ws_read_buffer_bytes,
            "websocket_handshake_timeout": limits.handshake_timeout_s,
            "logger_name": logging.getLogger("acp_fast.hosting.ws"),
            "backlog": min(limits.max_connections, 4096),
            # The loop's own transports: 22.3 vs 27.5 KiB per idle connection with aiofastnet's
            # (benchmarks/hosting_idle.py, 2000 connections), latencies within run-to-run noise.
            "use_aiofastnet": False,
        }
        if address.unix_path is not None:
            # picows 2.3 sets TCP options on every accepted socket; on AF_UNIX that fails and crashes the loop.
            raise NotImplementedError("unix sockets are not served yet (picows accepts TCP only); use HOST:PORT")
        if reuse_port:
            options["reuse_port"] = True
        self._server = await ws_create_server(self._route, address.host, address.port, **options)

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
    def _route(self, request: WSUpgradeRequest) -> _Route:
        path = request.path.split(b"?", 1)[0]
        if path == b"/healthz":
            return _plain(HTTPStatus.OK, b"ok\n")
        if path == b"/readyz":
            if self.draining:
                return _plain(HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n")
            return _plain(HTTPStatus.OK, b"ready\n")
        if path != self.path:
            return None  # 404
        headers = request.headers
        origin = headers.get("Origin")
        if origin is not None and origin not in self.allowed_origins:
            return self._refuse(HTTPStatus.FORBIDDEN, b"origin not allowed\n")
        principal: str | None = None
        if self.authorize is not None:
            principal = self._principal(headers)
            if principal is None:
                return self._refuse(HTTPStatus.UNAUTHORIZED, b"unauthorized\n", {"WWW-Authenticate": "Bearer"})
        if "websocket" not in headers.get("Upgrade", "").lower():
            return self._refuse(
                HTTPStatus.UPGRADE_REQUIRED,
                b"this server offers ACP over WebSocket only\n",
                {"Upgrade": "websocket", "Connection": "Upgrade"},
            )
        if self.draining:
            return self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n", {"Retry-After": "1"})
        if len(self._peers) >= self.limits.max_connections:
            return self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, b"connection limit reached\n", {"Retry-After": "1"})
        connection_id = uuid.uuid4().hex
        extra = {CONNECTION_ID_HEADER: connection_id}
        deflate = negotiate(headers.getall(EXTENSIONS_HEADER, [])) if self.limits.ws_deflate else None
        if deflate is not None:
            extra[EXTENSIONS_HEADER] = deflate.response
        peer = WsPeer(connection_id, self.limits, lambda p: self._start_peer(p, principal), deflate=deflate)
        response = WSUpgradeResponse.create_101_response(extra)
        return WSUpgradeResponseWithListener(response, peer)

    def _principal(self, headers: Mapping[str, str]) -> str | None:
        """Who the auth hook accepted (None: refused).

        A string from the hook names the principal; ``True`` makes the
        credential itself the principal (a digest of ``Authorization``), so
        every holder of one bearer token is one principal.
        """
        assert self.authorize is not None
        try:
            verdict = self.authorize(headers)
        except Exception:
            log.exception("the authorize hook failed; refusing the request")
            return None
        if isinstance(verdict, str):
            return f"hook:{verdict}" if verdict else None
        if not verdict:
            return None
        credential = headers.get("Authorization", "").encode()
        return "authorization:" + hashlib.sha256(credential).hexdigest()

    def _refuse(
        self, status: HTTPStatus, body: bytes, headers: Mapping[str, str] | None = None
    ) -> WSUpgradeResponseWithListener:
        self.refused[status.value] = self.refused.get(status.value, 0) + 1
        return WSUpgradeResponseWithListener(WSUpgradeResponse.create_error_response(status, body, headers), None)

    # -- one connection -------------------------------------------------------------------------------
    def _start_peer(self, peer: WsPeer, principal: str | None) -> None:
        """The upgrade completed: one agent, one AgentServer, one dispatch task for this socket."""
        conn = peer.conn
        assert conn is not None
        try:
            agent = self.agent_factory()
            sessions = HostedSessionTable(self.limits.max_sessions, self.budget)
            pool = HostedPool(conn.loop, self.limits.max_background, self.budget)
            server = HostedAgentServer(
                agent, conn, sessions=sessions, pool=pool, detached=self.detached, principal=principal
            )
        except Exception:
            log.exception("could not create the agent for connection %s", peer.connection_id)
            peer.close(CLOSE_INTERNAL, b"agent could not be created")
            return
        self.accepted += 1
        task = conn.loop.create_task(self._serve(peer, server), name=f"acp.host:{peer.connection_id[:8]}")
        self._peers[peer] = task

    async def _serve(self, peer: WsPeer, server: HostedAgentServer) -> None:
        try:
            await server.conn.run()
        except Exception:
            log.exception("connection %s failed", peer.connection_id)
        finally:
            park = not self.draining and self.limits.detached_session_timeout_s > 0 and server.can_resume
            server.release_sessions(park)
            self.binary_frames += peer.binary_frames
            self._peers.pop(peer, None)
            if peer.out is not None and not peer.out.is_closing():
                peer.out.close()
            if self.draining and not self._peers and self._drained is not None:
                self._drained.set()

    # -- drain (R29) -----------------------------------------------------------------------------------
    async def drain(self) -> None:
        """Refuse new connections, end every connection like EOF, close each with 1001, then stop listening."""
        if self._drained is not None:
            await self._drained.wait()
            return
        self.draining = True
        self._drained = drained = asyncio.Event()
        peers = list(self._peers)
        log.info("draining %d connection(s)", len(peers))
        for peer in peers:
            peer.end(CLOSE_GOING_AWAY)
        limits = self.limits
        bound = limits.shutdown_grace_s + limits.abort_join_s + limits.drain_flush_s
        if self._peers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drained.wait(), timeout=bound)
        for peer in list(self._peers):
            log.warning("connection %s outlived the drain bound; dropping it", peer.connection_id)
            peer.abort()
        self.detached.clear()
        drained.set()
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Drain, then release the listening socket."""
        await self.drain()

    # -- introspection ------------------------------------------------------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        """Live process-wide counts; all but the totals return to zero once every client is gone.

        ``reading_paused``: connections whose socket is not being read (backpressure, R26);
        ``max_buffered_output``: the most output bytes any one connection has queued;
        ``detached_sessions``: sessions whose socket dropped, parked for a reconnect.
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
        }


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
) -> AcpHost:
    """Start serving ``agent_factory()`` per WebSocket connection; returns the listening host."""
    acp_host = AcpHost(agent_factory, limits, path=path, authorize=authorize, allowed_origins=allowed_origins)
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
) -> None:
    """Serve until SIGTERM/SIGINT, then drain (R29) and return."""
    factory, kind = event_loop_factory(use_uvloop)
    gc.collect()
    gc.freeze()  # see run_agent: what was imported lives as long as the process
    runner = asyncio.Runner(loop_factory=factory)
    try:
        runner.run(_run(agent_factory, address, limits, authorize, allowed_origins, kind, reuse_port))
        leftovers = [t for t in asyncio.all_tasks(runner.get_loop()) if not t.done()]
        if leftovers:  # Runner.close would wait for them for ever (a task that swallows cancellation)
            log.error("%d task(s) ignored cancellation; exiting without them", len(leftovers))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    finally:
        runner.close()


async def _run(
    agent_factory: AgentFactory,
    address: ListenAddress,
    limits: Limits | None,
    authorize: Authorize | None,
    allowed_origins: Collection[str],
    loop_kind: str,
    reuse_port: bool,
) -> None:
    host = AcpHost(agent_factory, limits, authorize=authorize, allowed_origins=allowed_origins)
    await host.start(address, reuse_port=reuse_port)
    where = str(address) if address.unix_path else f"{address.host or '*'}:{host.port}"
    print(f"acp-fast: serving ACP over WebSocket on {where} at /acp ({loop_kind} loop)", file=sys.stderr, flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("signal received: draining")
    await host.drain()
