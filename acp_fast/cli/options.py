"""The flags ``acp-fast demo`` and ``acp-fast serve`` share: logging, checks, every limit, hosting.

They are built once, as the parent parser both sub-commands take, so a flag
added here reaches both and shows in both ``--help`` pages. Every limit in
``limits.Limits`` has a flag; its help is in ``_HELP``.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ..agent import validate
from ..wire.limits import Limits

_HELP = {
    "max_line_bytes": "longest accepted input line in bytes (R25)",
    "overlimit_head_bytes": "bytes of an over-limit line kept to recover its id",
    "read_buffer_bytes": "size of the stdin read buffer",
    "max_background": "background requests (prompts + mcp/*) at once (R08)",
    "max_inbox": "parsed messages waiting for dispatch before stdin reading pauses",
    "max_pending_outgoing": "agent->client requests awaiting answers at once",
    "max_spawned": "spawned tasks alive at once",
    "max_sessions": "sessions one connection may hold",
    "max_mcp_connections": "open MCP-over-ACP connections",
    "max_mcp_requests": "request-scoped MCP-over-ACP requests in flight, per direction",
    "write_high_water": "stdout bytes buffered before producers wait (R26)",
    "write_low_water": "stdout bytes below which producers resume",
    "shutdown_grace_s": "seconds background work gets after EOF before it is aborted (R14)",
    "abort_join_s": "seconds to wait for aborted tasks before abandoning them",
    "flush_timeout_s": "seconds the last flush of stdout may take at exit; the rest is dropped (R14)",
    "idle_session_timeout_s": "evict sessions idle this long; 0 disables (R16)",
    "cancel_grace_s": "seconds a cancelled turn may take to end before it is answered cancelled for it (R30)",
    "max_turn_s": "cancel a turn running longer than this, as a timeout; 0 disables (R30)",
    "max_connections": "--listen: open connections per process; the next upgrade gets 503",
    "max_sessions_total": "--listen: sessions across all connections of the process",
    "detached_session_timeout_s": "--listen: seconds a dropped socket's sessions wait for session/load; 0 disables",
    "max_running_prompts": "--listen: prompts running at once across all connections",
    "max_buffered_output_bytes": "--listen: output queued for one client above which it must keep reading (1008 else)",
    "ws_read_buffer_bytes": "--listen: initial read buffer of a connection",
    "ws_deflate": "--listen: accept permessage-deflate when a client offers it, without context takeover",
    "ping_interval_s": "--listen: ping a connection idle this long",
    "ping_timeout_s": "--listen: close a connection whose ping is unanswered this long",
    "handshake_timeout_s": "--listen: seconds to send a request head (from connecting, or from its first byte)",
    "max_request_head_bytes": "--listen: longest HTTP request head; longer ones get 431",
    "drain_flush_s": "--listen: seconds after a drain's shutdown for close frames to leave (R29)",
    "cors_max_age_s": "--listen: seconds a browser may cache a CORS preflight answer (--allow-origin); 0: never",
    "max_parked_session_bytes": "--listen: largest parked session a shared --session-store accepts, encoded",
    "session_store_timeout_s": "--listen: seconds one --session-store call may take before it counts as failed",
    "sse_replay": "--listen: events each Streamable HTTP stream keeps for a reconnect with Last-Event-ID; 0 is off",
    "sse_replay_bytes": "--listen: bytes one stream's replay ring may hold",
    # WebSocket and live-connection admission
    "output_stall_timeout_s": "--listen: close a client whose output stays above the cap this long without shrinking",
    "max_metrics_connections": "--metrics-listen: scrapes served at once; more are closed unanswered",
    "client_error_logs_per_min": "--listen: lines per minute about what clients did wrong; the rest are counted only",
    # HTTP front
    "max_unbound_sockets": "--listen: sockets not yet serving an ACP connection; the next gets 503",
    "http_request_timeout_s": "--listen: seconds an HTTP request body may take after its head (408 else)",
    "http_linger_s": "--listen: seconds a socket refused before its body was read keeps discarding input",
    "max_initialize_per_socket": "--listen: ACP connections one keep-alive HTTP socket may open (503 else)",
    "max_initialize_body_bytes": "--listen: largest body of a POST without Acp-Connection-Id (413 else)",
    "max_chunk_line_bytes": "--listen: longest chunk-size line of a chunked request body (400 else)",
    # WebSocket
    "initialize_timeout_s": "--listen: close an upgraded WebSocket that sent no initialize this long (1008)",
    "max_connections_per_principal": "--listen: live connections per principal (per address without auth); 503 past it",
    "ws_buffer_release_s": "--listen: seconds after a large read before its read-buffer pages are given back",
    # Client addresses and the per-address share of the front
    "max_unbound_per_address": "--listen: sockets without an ACP connection one client address may hold; 503 past it",
    "health_reserve_sockets": "--listen: sockets past max_unbound_sockets that only answer /healthz and /readyz",
    "max_proxy_header_bytes": "--listen: longest PROXY protocol header a trusted proxy may send (--proxy-protocol)",
}


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of ``demo`` and ``serve`` (its groups show in this order in their help)."""
    common = argparse.ArgumentParser(add_help=False)
    _add_run_flags(common)
    _add_limit_flags(common.add_argument_group("limits"))
    net = common.add_argument_group("hosting (needs the server extra)")
    _add_listen_flags(net)
    common.add_argument(
        "--otel",
        action="store_true",
        help="OpenTelemetry spans per request and per prompt turn, parented by _meta.traceparent, through the "
        "globally configured tracer provider (e.g. opentelemetry-instrument); needs the otel extra",
    )
    _add_access_flags(net)
    return common


def limits_from(args: argparse.Namespace) -> Limits:
    """The ``Limits`` the limit flags describe."""
    return Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})


def _add_run_flags(common: argparse.ArgumentParser) -> None:
    common.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    common.add_argument("--log-format", default="text", choices=["text", "json"], help="stderr log format")
    common.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    common.add_argument(
        "--validate",
        action="store_true",
        help=f"check every message the agent writes against the ACP JSON schema and log each violation "
        f"to stderr (a debug aid; needs the validate extra; same as {validate.ENV_VAR}=1)",
    )
    common.add_argument(
        "--validate-schema",
        metavar="PATH",
        help="the ACP schema file --validate checks against, or a folder that bundles one, such as an installed "
        f"@agentclientprotocol/sdk (implies --validate; same as {validate.SCHEMA_ENV_VAR}=PATH; "
        "default: the installed Python SDK's models)",
    )
    common.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="gc.freeze() what is alive at start-up, so full collections scan only what the session "
        "made, and collect the youngest generation every 10,000 allocations instead of 700 "
        "(on by default here; run_agent() leaves both off unless freeze_gc=True)",
    )


def _add_limit_flags(group: argparse._ArgumentGroup) -> None:
    for f in fields(Limits):
        default = getattr(Limits(), f.name)
        if isinstance(default, bool):  # a switch: --ws-deflate / --no-ws-deflate
            group.add_argument(
                "--" + f.name.replace("_", "-"),
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f"{_HELP[f.name]} (default {'on' if default else 'off'})",
            )
            continue
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            type=type(default),
            default=default,
            help=f"{_HELP[f.name]} (default {default})",
        )


def _add_listen_flags(net: argparse._ArgumentGroup) -> None:
    net.add_argument(
        "--listen",
        metavar="HOST:PORT|unix:PATH",
        help="serve many connections at /acp (WebSocket and Streamable HTTP), on a TCP port or a unix socket, "
        "instead of one over stdio",
    )
    net.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="with --listen: N processes share the port (SO_REUSEPORT); dead ones are restarted (default 1)",
    )
    net.add_argument(
        "--session-store",
        metavar="SPEC",
        help="with --listen: where parked sessions wait: memory, sqlite:PATH (the workers of one host) or "
        "redis://HOST:PORT/DB (replicas; the store extra); default memory, or with --workers N>1 a SQLite "
        "file in a temporary directory",
    )
    net.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of this origin (SCHEME://HOST[:PORT]) use /acp: upgrades and Streamable HTTP with CORS "
        "(repeatable; '*' for every origin, only without --auth-token-env); other browser origins get 403",
    )
    net.add_argument(
        "--web-console",
        action="store_true",
        help="with --listen: serve a browser console at GET / (its own loopback origin may use /acp; off by default)",
    )
    net.add_argument(
        "--metrics",
        action="store_true",
        help="with --listen: serve Prometheus metrics at GET /metrics on the same port (the auth hook applies; "
        "needs the metrics extra)",
    )
    net.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at GET /metrics on a port of their own (also for stdio agents; no auth: "
        "bind it to loopback or a private network; needs the metrics extra)",
    )


def _add_access_flags(net: argparse._ArgumentGroup) -> None:
    net.add_argument(
        "--access-log",
        choices=["text", "json"],
        help="with --listen: one stderr line per HTTP request and per WebSocket connection (method, path, status, "
        "duration, principal, connection id); off by default",
    )
    _add_proxy_flags(net)
    net.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="require 'Authorization: Bearer $VAR' on every upgrade (401 otherwise)",
    )


def _add_proxy_flags(net: argparse._ArgumentGroup) -> None:
    """Which peers may name the client's address (hosting/forwarded.py), and how."""
    net.add_argument(
        "--forwarded-allow-ips",
        action="append",
        default=[],
        metavar="ADDRESSES",
        help="with --listen: proxies (addresses or CIDRs, comma-separated or repeated; '*' every peer, 'unix' a "
        "unix-socket peer) whose X-Forwarded-For / Forwarded header names the client; default none",
    )
    net.add_argument(
        "--proxy-protocol",
        action="store_true",
        help="with --listen: sockets from the --forwarded-allow-ips proxies open with a PROXY protocol v1/v2 header "
        "(HAProxy's send-proxy / send-proxy-v2) naming the client; other peers' sockets never do",
    )


__all__ = ["common_parser", "limits_from"]
