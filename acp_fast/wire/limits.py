"""Every bound acp_fast enforces, named once, with the reason for its value.

Nothing in the runtime grows without one of these limits. They travel together
in one frozen :class:`Limits`, so a server is configured in one place (the CLI
flags map onto its fields one to one).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

KiB = 1024
MiB = 1024 * KiB

#: Longest accepted line (R25). ACP carries images and embedded resources as
#: base64 inside one line; the official Python SDK reads with a 50 MB limit, so
#: 64 MiB accepts everything it sends while still refusing a runaway stream.
MAX_LINE_BYTES = 64 * MiB

#: How much of an over-limit line the framer keeps, so the caller can recover
#: the request id (``{"jsonrpc":"2.0","id":...`` is almost always near the
#: start). Small enough that a hostile stream costs nothing.
OVERLIMIT_HEAD_BYTES = 4 * KiB

#: Size of the buffer handed to the loop on the zero-copy read path. 256 KiB
#: matches the pipe capacity Linux grows to under load, so one read drains it.
READ_BUFFER_BYTES = 256 * KiB

#: Background requests (prompts and mcp/*) running at once per connection
#: (R08). 32 is the contract's default; the 33rd is refused, not queued.
MAX_BACKGROUND = 32

#: Incoming messages parsed but not yet dispatched. Reading from stdin is
#: paused when this many wait, so a client that floods control traffic is
#: slowed by the pipe instead of growing our memory.
MAX_INBOX = 1024

#: Requests this side has sent and not yet seen answered (permission, fs,
#: terminal, mcp). A further one fails at once instead of piling up.
MAX_PENDING_OUTGOING = 1024

#: Tasks started with ``Connection.spawn`` alive at once. Session-start
#: callbacks (R22) take at most half; later ones wait in order for a slot.
MAX_SPAWNED = 1024

#: Sessions one connection may hold. Ten thousand idle sessions cost a few MiB.
#: Also the most new sessions whose start callback may wait for a slot.
MAX_SESSIONS = 10_000

#: Open MCP-over-ACP connections per ACP connection (R17).
MAX_MCP_CONNECTIONS = 256

#: Request-scoped MCP-over-ACP requests in flight per ACP connection and
#: direction (R17): served for the peer, and awaiting the peer's outcome. The
#: next one fails at once (-33000) instead of piling up; 64 per server is the
#: TypeScript SDK's default, this is the bound for all servers together.
MAX_MCP_REQUESTS = 256

#: Bytes buffered for stdout above which producers wait for the pipe (R26).
#: Every answer queues behind what is buffered, so this bounds how long a
#: cancel's answer can wait behind other sessions' updates. 64 KiB (the Linux
#: pipe size, and uvloop's own default) kept the busy cancel p99 at 0.55-0.66
#: ms in two bench runs, against 0.45-4.5 ms with 1 MiB, with no loss of
#: update throughput beyond run-to-run noise.
WRITE_HIGH_WATER = 64 * KiB

#: Producers resume once the buffer drains below this.
WRITE_LOW_WATER = 16 * KiB

#: Seconds background tasks get to finish after EOF or a transport failure
#: before they are aborted (R14).
SHUTDOWN_GRACE_S = 5.0

#: After aborting tasks that outlived the grace period, seconds to wait for
#: them to unwind. A task that swallows cancellation cannot be forced in
#: asyncio; after this it is abandoned (logged) and the process exits anyway.
ABORT_JOIN_S = 1.0

#: Seconds the last flush of stdout may take at shutdown (R14). A client that
#: stopped reading would otherwise keep the process alive for ever; past this,
#: what is still unwritten is dropped and one stderr line says how much. 2 s
#: is long enough for any reader that is still reading to take the last answers.
FLUSH_TIMEOUT_S = 2.0

#: Seconds a cancelled turn's body gets to end before the runtime answers it
#: ``cancelled`` itself (R30). A cooperative body unwinds in microseconds; 2 s
#: leaves room for cleanup that makes one network round trip (saving history,
#: reporting usage) while a stop button still visibly works. It is below
#: ``shutdown_grace_s``, so at EOF a stuck turn is answered before the abort.
CANCEL_GRACE_S = 2.0

#: Seconds a turn may run before it is cancelled as a timeout (R30); 0, the
#: default, never times a turn out: how long a turn may take is the agent's call.
MAX_TURN_S = 0.0

#: Seconds a session may sit idle before it is evicted (R16); 0 disables.
IDLE_SESSION_TIMEOUT_S = 0.0

# -- hosting: one process serving many connections over WebSocket (R27-R29) ----------------

#: Open WebSocket connections per process; the next upgrade is answered 503.
#: An idle initialized connection costs tens of KiB, so 10,000 fit in well
#: under 1 GiB.
MAX_CONNECTIONS = 10_000

#: Sessions open across every connection of the process (R28). Each
#: connection keeps its own ``max_sessions`` bound as well.
MAX_SESSIONS_TOTAL = 100_000

#: Seconds a hosted session outlives its dropped socket, so ``session/load``
#: (or ``session/resume``) on a new connection can re-attach it. Parked
#: sessions count against ``max_sessions_total``; 0 ends them with the socket.
DETACHED_SESSION_TIMEOUT_S = 60.0

#: Prompts running at once across every connection of the process (R28); the
#: next is refused with -32000, like the 33rd of one connection (R08).
MAX_RUNNING_PROMPTS = 10_000

#: Output bytes one connection may have queued for a client that does not
#: read. Producers already wait above ``write_high_water`` (R26); this is the
#: hard cap for what is written regardless (answers, control traffic): past it
#: the socket is closed with 1008 instead of growing the process's memory.
MAX_BUFFERED_OUTPUT_BYTES = 4 * MiB

#: Negotiate permessage-deflate (RFC 7692) when a client offers it. Off by
#: default: every message then costs a compression (and each compressed one a
#: decompression), and the small messages ACP streams gain little without
#: context takeover, which acp_fast never agrees to (it would hold zlib state
#: per connection); worth it for clients on slow links.
WS_DEFLATE = False

#: Initial read buffer of a WebSocket connection. picows grows it for larger
#: frames; 2 KiB instead of its 16 KiB default halved the RSS of an idle
#: connection (13.9 vs 27.9 KiB, benchmarks/ws_libraries.py).
WS_READ_BUFFER_BYTES = 2 * KiB

#: A connection with no incoming traffic for this long is pinged.
PING_INTERVAL_S = 20.0

#: A ping unanswered for this long closes the connection.
PING_TIMEOUT_S = 20.0

#: Seconds a client gets to send a complete request head: the first from
#: connecting (the upgrade, or an HTTP request), each later one on a keep-alive
#: socket from its first byte, so a head trickled a byte at a time cannot hold
#: the socket (nginx's ``client_header_timeout`` bounds the same; its 60 s
#: serves slow links, and a head here is at most 16 KiB).
HANDSHAKE_TIMEOUT_S = 5.0

#: Longest HTTP request head (request line and headers) read before the socket
#: is handed to the WebSocket or HTTP side; past it the answer is 431. 16 KiB
#: is what picows itself accepts for an upgrade request.
MAX_REQUEST_HEAD_BYTES = 16 * KiB

#: On drain (R29), seconds beyond the shutdown's own bound (grace plus abort
#: join) for the last answers and close frames to leave; then the sockets
#: still open are dropped and the process exits.
DRAIN_FLUSH_S = 2.0

#: Seconds a browser may cache the answer to a CORS preflight on ``/acp``
#: (``Access-Control-Max-Age``; hosting/cors.py), so a page's requests do not
#: each cost an ``OPTIONS`` round trip. 600 s is what Chromium capped it at
#: before v76 (it now caps at 7200, Firefox at 86400): a changed
#: ``--allow-origin`` reaches open pages within ten minutes. 0: never cached.
CORS_MAX_AGE_S = 600

# Session store (hosting/store.py): how big and how slow parking may be.

#: Largest parked session a shared store (SQLite, Redis) accepts, encoded: the
#: framework's session plus what ``detach_session`` returned. A parked session
#: is a conversation's state, not its files; 1 MiB holds a long history, and
#: ``max_sessions_total`` times this bounds what one process can put in the store.
MAX_PARKED_SESSION_BYTES = 1 * MiB

#: Seconds one store call (park, re-attach) may take before it counts as failed
#: and is logged: a session is then not parked (or not found), and the host
#: carries on. Loopback calls take well under a millisecond; 2 s rides out a
#: Redis failover without letting a dead store stall a drain.
SESSION_STORE_TIMEOUT_S = 2.0

#: Events each Streamable HTTP event stream keeps for a client that reconnects
#: with ``Last-Event-ID`` (transports/routing.py). 0, the default, sends no
#: event ids and keeps nothing: resumption is not in the protocol's HTTP
#: transport yet (it is left to a later version), so it is opt-in.
SSE_REPLAY = 0

#: Bytes one stream's replay ring may hold, whatever ``sse_replay`` says: a
#: connection keeps at most ``(max_sessions + 1) * sse_replay_bytes`` for
#: replay. 256 KiB holds a few hundred ordinary updates.
SSE_REPLAY_BYTES = 256 * KiB
# -- WebSocket and live-connection admission ------------------------------------------------

#: Seconds a connection's output may stay above ``max_buffered_output_bytes``
#: without shrinking before its client is judged not reading and closed (1008
#: on a WebSocket, the stream's end on Streamable HTTP). The cap is judged over
#: time because one message up to ``max_line_bytes`` must pass to a client
#: that reads: a 24 MiB update is 24 MiB queued for an instant. 30 s is half
#: nginx's ``send_timeout`` (60 s between two successful writes): a public port
#: should free the memory of a client that stopped reading sooner.
OUTPUT_STALL_TIMEOUT_S = 30.0

#: Scrapes ``--metrics-listen`` serves at once; a connection beyond them is
#: closed unanswered. One Prometheus server holds one connection per target
#: (two or three while a slow scrape overlaps the next); 8 leaves room for a
#: second Prometheus and an ``acp-fast top`` without letting a flood of idle
#: sockets hold tasks (each also bounded by ``handshake_timeout_s``).
MAX_METRICS_CONNECTIONS = 8

#: Lines a process logs per minute about what clients did wrong (a WebSocket
#: protocol error, a message that is not UTF-8, no ``initialize`` in time).
#: They are the clients' faults, logged at INFO, and any client can commit as
#: many as it likes, so past this many in a minute they are only counted
#: (``acp_client_errors_total``); the next line logged says how many were not.
#: 0 logs none of them.
CLIENT_ERROR_LOGS_PER_MIN = 10

# -- HTTP front: the Streamable HTTP profile's sockets (hosting/http.py) ---------------------

#: Accepted sockets not (yet) serving an ACP connection: reading their first
#: request head, or HTTP sockets that never addressed a live connection. Past
#: it a new socket is answered 503 and closed before anything is read, so
#: sockets that send nothing useful cannot use up the process's descriptors.
#: nginx's ``limit_conn`` plays this part in front of a proxy; 1024 is the
#: common default descriptor limit (``ulimit -n``) of one process.
MAX_UNBOUND_SOCKETS = 1024

#: Seconds an HTTP request's body may take from its head's end to its last
#: byte; past it 408 and the socket closes (nginx's ``client_body_timeout``,
#: 60 s, bounds the time between two reads; this bounds the whole body).
HTTP_REQUEST_TIMEOUT_S = 60.0

#: Seconds a socket answered before its request body was read (a refusal on
#: the head: 401, 403, 413) keeps discarding what the client still sends before
#: it is dropped: closing with unread bytes resets the connection and can
#: destroy the answer (nginx's ``lingering_timeout`` is 5 s).
HTTP_LINGER_S = 2.0

#: ACP connections one keep-alive HTTP socket may open with ``initialize``
#: POSTs; the next gets 503 and the socket closes, so one socket cannot fill
#: ``max_connections`` at request rate. A client opens one connection per
#: socket, or a few when it reconnects; 16 leaves room for that.
MAX_INITIALIZE_PER_SOCKET = 16

#: Largest body of a POST without ``Acp-Connection-Id`` (only ``initialize``
#: may start a connection); 413 past it. An ``initialize`` is well under 1 KiB
#: (client info and capabilities); 64 KiB leaves room for ``_meta``, and an
#: unauthenticated client cannot make the host buffer ``max_line_bytes``.
MAX_INITIALIZE_BODY_BYTES = 64 * KiB

#: Longest chunk-size line of a chunked request body, extensions included;
#: 400 past it. Node.js bounds chunk extensions (16 KiB per body) since
#: CVE-2024-22019, where unbounded extensions let a client spend server CPU
#: and memory without sending data; a size line needs 18 bytes.
MAX_CHUNK_LINE_BYTES = 4 * KiB

# -- WebSocket (issue 27): slots held without ACP, per-client connections, read buffers --------------

#: Seconds an upgraded WebSocket may stay open without sending ``initialize``;
#: past it the socket closes with 1008 (counted: ``initialize_timeouts``).
#: Answering pings is not enough to hold a connection slot for ever. A client
#: sends ``initialize`` right after the upgrade; 10 s is the ``websockets``
#: library's ``open_timeout`` and leaves a slow link room, while a slot-holder
#: holds each slot seconds instead of indefinitely. The HTTP front may use the
#: same bound for a connection created by ``initialize``.
INITIALIZE_TIMEOUT_S = 10.0

#: Live ACP connections (WebSocket and Streamable HTTP together) one principal
#: may hold; with no auth hook, one peer address. The next upgrade is answered
#: 503 (an HTTP ``initialize`` likewise); counted as ``refused_per_principal``.
#: The anchor is nginx's ``limit_conn`` per address: 256 is far more than one
#: user's editor windows and still 1/40 of ``max_connections``, so one client
#: cannot take every slot of a public port. Behind a proxy every client shares
#: the proxy's address unless the proxy is trusted to name the client
#: (``--forwarded-allow-ips``); otherwise raise it there, or authenticate.
MAX_CONNECTIONS_PER_PRINCIPAL = 256

#: Seconds after a large read (64 KiB or more) before the unused pages of the
#: connection's read buffer are given back to the OS. picows grows that buffer
#: for a large message and never shrinks it (three idle connections that each
#: sent 48 MiB held +148 MB); waiting a moment keeps a stream of large messages
#: from paying for the pages again each time. 1 s is well inside the goal of an
#: idle connection back at its usual size ten seconds after any message.
WS_BUFFER_RELEASE_S = 1.0

# -- Client addresses behind proxies and the per-address share of the front (hosting/front.py) ---

#: Sockets without an ACP connection yet (as ``max_unbound_sockets`` counts
#: them) that one client address may hold; its next socket is answered 503
#: while other addresses are served. An eighth of ``max_unbound_sockets``: it
#: takes eight addresses to fill the front, and 128 sockets mid-handshake at
#: once is far more than a browser (six per host) or an editor opens. Behind a
#: proxy the address is the client's only with ``--forwarded-allow-ips``.
MAX_UNBOUND_PER_ADDRESS = 128

#: Sockets accepted past ``max_unbound_sockets`` only to answer health probes
#: (``GET /healthz``, ``/readyz``); any other request on them is answered 503.
#: A full front must still tell the orchestrator it is alive, and a socket has
#: to be read to know it is a probe. A kubelet and a load balancer probe a few
#: times a second; 16 leaves room for them without holding many descriptors.
HEALTH_RESERVE_SOCKETS = 16

#: Longest PROXY protocol header accepted from a trusted proxy (version 2 may
#: declare 64 KiB). HAProxy's header with every TLV it can send (ALPN,
#: authority, TLS details, unique id) stays under 1 KiB; 4 KiB leaves room for
#: cloud load balancers' TLVs. The header counts against ``handshake_timeout_s``.
MAX_PROXY_HEADER_BYTES = 4 * KiB


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one connection (and, for hosting, of the process); every field defaults to the constant above."""

    max_line_bytes: int = MAX_LINE_BYTES
    overlimit_head_bytes: int = OVERLIMIT_HEAD_BYTES
    read_buffer_bytes: int = READ_BUFFER_BYTES
    max_background: int = MAX_BACKGROUND
    max_inbox: int = MAX_INBOX
    max_pending_outgoing: int = MAX_PENDING_OUTGOING
    max_spawned: int = MAX_SPAWNED
    max_sessions: int = MAX_SESSIONS
    max_mcp_connections: int = MAX_MCP_CONNECTIONS
    max_mcp_requests: int = MAX_MCP_REQUESTS
    write_high_water: int = WRITE_HIGH_WATER
    write_low_water: int = WRITE_LOW_WATER
    shutdown_grace_s: float = SHUTDOWN_GRACE_S
    abort_join_s: float = ABORT_JOIN_S
    flush_timeout_s: float = FLUSH_TIMEOUT_S
    idle_session_timeout_s: float = IDLE_SESSION_TIMEOUT_S
    cancel_grace_s: float = CANCEL_GRACE_S
    max_turn_s: float = MAX_TURN_S
    max_connections: int = MAX_CONNECTIONS
    max_sessions_total: int = MAX_SESSIONS_TOTAL
    detached_session_timeout_s: float = DETACHED_SESSION_TIMEOUT_S
    max_running_prompts: int = MAX_RUNNING_PROMPTS
    max_buffered_output_bytes: int = MAX_BUFFERED_OUTPUT_BYTES
    ws_read_buffer_bytes: int = WS_READ_BUFFER_BYTES
    ws_deflate: bool = WS_DEFLATE
    ping_interval_s: float = PING_INTERVAL_S
    ping_timeout_s: float = PING_TIMEOUT_S
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S
    max_request_head_bytes: int = MAX_REQUEST_HEAD_BYTES
    drain_flush_s: float = DRAIN_FLUSH_S
    cors_max_age_s: int = CORS_MAX_AGE_S
    # Session store
    max_parked_session_bytes: int = MAX_PARKED_SESSION_BYTES
    session_store_timeout_s: float = SESSION_STORE_TIMEOUT_S
    # Streamable HTTP resumable streams
    sse_replay: int = SSE_REPLAY
    sse_replay_bytes: int = SSE_REPLAY_BYTES
    # WebSocket and live-connection admission
    output_stall_timeout_s: float = OUTPUT_STALL_TIMEOUT_S
    # Observability
    max_metrics_connections: int = MAX_METRICS_CONNECTIONS
    client_error_logs_per_min: int = CLIENT_ERROR_LOGS_PER_MIN
    # HTTP front
    max_unbound_sockets: int = MAX_UNBOUND_SOCKETS
    http_request_timeout_s: float = HTTP_REQUEST_TIMEOUT_S
    http_linger_s: float = HTTP_LINGER_S
    max_initialize_per_socket: int = MAX_INITIALIZE_PER_SOCKET
    max_initialize_body_bytes: int = MAX_INITIALIZE_BODY_BYTES
    max_chunk_line_bytes: int = MAX_CHUNK_LINE_BYTES
    # WebSocket
    initialize_timeout_s: float = INITIALIZE_TIMEOUT_S
    max_connections_per_principal: int = MAX_CONNECTIONS_PER_PRINCIPAL
    ws_buffer_release_s: float = WS_BUFFER_RELEASE_S
    # Client addresses and the per-address share of the front
    max_unbound_per_address: int = MAX_UNBOUND_PER_ADDRESS
    health_reserve_sockets: int = HEALTH_RESERVE_SOCKETS
    max_proxy_header_bytes: int = MAX_PROXY_HEADER_BYTES

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0 or (value == 0 and f.name not in _ZERO_OK):
                raise ValueError(f"Limits.{f.name} must be positive, got {value!r}")
        if self.write_low_water > self.write_high_water:
            raise ValueError(
                f"write_low_water ({self.write_low_water}) must not exceed "
                f"write_high_water ({self.write_high_water})"
            )
        _check_admission(self)


def _check_admission(limits: Limits) -> None:
    """Refuse combinations of the WebSocket and admission limits that cannot work, naming the fix."""
    if limits.max_buffered_output_bytes < limits.write_high_water:
        raise ValueError(
            f"max_buffered_output_bytes ({limits.max_buffered_output_bytes}) must be at least write_high_water "
            f"({limits.write_high_water}): producers must be paused before a client is judged not reading"
        )
    if limits.ping_timeout_s > limits.ping_interval_s:
        raise ValueError(
            f"ping_timeout_s ({limits.ping_timeout_s}) must not exceed ping_interval_s ({limits.ping_interval_s}): "
            "the WebSocket layer (picows) refuses every upgrade otherwise"
        )


_ZERO_OK = frozenset(
    {
        "shutdown_grace_s",
        "abort_join_s",
        "flush_timeout_s",
        "idle_session_timeout_s",
        "max_turn_s",
        "detached_session_timeout_s",
        "write_low_water",
        "drain_flush_s",
        "ws_deflate",
        "sse_replay",
        "cors_max_age_s",
        "health_reserve_sockets",
        "client_error_logs_per_min",
    }
)
