"""Command line: ``acp-fast demo``, ``acp-fast serve module:Class`` and ``acp-fast bench``.

Logs go to stderr only (stdout carries nothing but ACP messages). Every
limit in ``limits.Limits`` has a flag. A target ``serve`` cannot use is
reported in one line with exit status 2: a traceback into importlib tells a
person less than what was tried and from where.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NoReturn

from ._version import __version__
from .agent import validate
from .agent.base import Agent
from .extras import MissingExtra, install_hint
from .wire.framing import IMPLEMENTATION as FRAMER_IMPLEMENTATION
from .wire.limits import Limits

if TYPE_CHECKING:
    from .hosting.forwarded import TrustedProxies

#: Methods whose presence marks an object as an agent written on the official SDK.
_SDK_AGENT_MARKERS = ("initialize", "new_session", "prompt")

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


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


class _Version(argparse.Action):
    """``--version``: built when asked, since naming the --validate schema reads files."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(
            f"acp-fast {__version__} (framer: {FRAMER_IMPLEMENTATION})\n--validate schema: {validate.describe()}\n"
        )
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-fast",
        description="Serve an Agent Client Protocol agent over stdio (JSON-RPC, one message per line).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version, and the --validate schema")
    common = argparse.ArgumentParser(add_help=False)
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
    group = common.add_argument_group("limits")
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
    net = common.add_argument_group("hosting (needs the server extra)")
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
    common.add_argument(
        "--otel",
        action="store_true",
        help="OpenTelemetry spans per request and per prompt turn, parented by _meta.traceparent, through the "
        "globally configured tracer provider (e.g. opentelemetry-instrument); needs the otel extra",
    )
    net.add_argument(
        "--access-log",
        choices=["text", "json"],
        help="with --listen: one stderr line per HTTP request and per WebSocket connection (method, path, status, "
        "duration, principal, connection id); off by default",
    )
    _proxy_flags(net)
    net.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="require 'Authorization: Bearer $VAR' on every upgrade (401 otherwise)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", parents=[common], help="run the embedded demo agent")
    demo.add_argument("--pace-ms", type=float, default=20.0, help="delay between streamed words")
    serve = sub.add_parser("serve", parents=[common], help="run your agent: package.module:AgentClass")
    serve.add_argument("target", help="import path of an acp_fast.Agent subclass, module:Class")
    serve.add_argument(
        "--unstable",
        action="store_true",
        help="for agents written on the official SDK: serve its unstable methods "
        "(session/close, fork, resume), as its use_unstable_protocol=True does",
    )
    serve.add_argument(
        "--strict",
        action="store_true",
        help="for agents written on the official SDK: keep acp_fast's stricter answers (-32600 before "
        "initialize, -32602 for unknown sessions) instead of the SDK's leniency",
    )
    # Parsed by acp_fast.client.console itself (see main); listed here for --help.
    sub.add_parser("client", add_help=False, help="talk to an agent: client -- CMD ARGS, or client URL (client --help)")
    # Parsed by acp_fast.observability.top itself (see main); listed here for --help.
    sub.add_parser("top", add_help=False, help="a live terminal view of a host's /metrics: top URL (top --help)")
    # Parsed by acp_fast.bench itself (see main); listed here for --help.
    sub.add_parser(
        "bench", add_help=False, help="benchmark acp_fast, the official SDK, a floor and any ACP agent (bench --help)"
    )
    return parser


def _proxy_flags(net: argparse._ArgumentGroup) -> None:
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


def _trusted_proxies(args: argparse.Namespace) -> TrustedProxies:
    from .hosting.forwarded import TrustedProxies

    try:
        return TrustedProxies.parse(args.forwarded_allow_ips, proxy_protocol=args.proxy_protocol)
    except ValueError as exc:
        raise SystemExit(f"acp-fast: --forwarded-allow-ips: {exc}") from None


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"acp-fast serve: {message}\n")
    raise SystemExit(2)


def _import_failure(module_name: str, exc: ImportError) -> str:
    path = os.environ.get("PYTHONPATH")
    where = f"cwd {os.getcwd()}, PYTHONPATH={path if path else '(unset)'}"
    if exc.name is not None and exc.name != module_name and not module_name.startswith(exc.name + "."):
        return f"importing {module_name!r} failed: it needs {exc.name!r}, which is not installed ({where})"
    return f"cannot import module {module_name!r}: {exc} ({where})"


def _is_sdk_agent(obj: object) -> bool:
    return any(callable(getattr(obj, name, None)) for name in _SDK_AGENT_MARKERS)


def _load_agent(target: str, unstable: bool = False, strict: bool = False) -> Agent:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        _fail(f"expected package.module:AgentClass, got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except MissingExtra as exc:  # the agent's module imports a part of acp_fast whose extra is missing
        _fail(str(exc))
    except ImportError as exc:
        _fail(_import_failure(module_name, exc))
    try:
        obj = getattr(module, attr)
    except AttributeError:
        _fail(f"module {module_name!r} ({getattr(module, '__file__', None) or 'no file'}) has no attribute {attr!r}")
    if isinstance(obj, type) and issubclass(obj, Agent):
        return obj()
    if isinstance(obj, Agent):
        return obj
    # An SDK agent: a class or instance with its methods, or a factory function ``conn -> agent``.
    if not (_is_sdk_agent(obj) or inspect.isfunction(obj)):
        _fail(
            f"{target} is not an acp_fast Agent or an SDK agent (it is {type(obj).__name__} {obj!r:.80}); "
            "name a subclass of acp_fast.Agent, or a class defining the official SDK's agent methods"
        )
    try:
        from .compat import wrap_sdk_agent  # an agent written on the official SDK
    except ImportError:
        _fail(f"{target} looks like an agent written on the official SDK; serving it needs the 'compat' extra: "
              f"{install_hint('compat')}")
    sdk_agent = obj() if isinstance(obj, type) else obj
    wrapped: Agent = wrap_sdk_agent(sdk_agent, use_unstable_protocol=unstable, strict=strict)
    return wrapped


def _agent_factory(target: str, unstable: bool, strict: bool) -> Callable[[], Agent]:
    """One agent instance per connection: ``target`` must name a class."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise SystemExit(f"acp-fast: expected module:Class, got {target!r}")
    if not isinstance(getattr(importlib.import_module(module_name), attr), type):
        raise SystemExit(f"acp-fast: --listen needs a class (one instance per connection); {target!r} is not one")
    return lambda: _load_agent(target, unstable=unstable, strict=strict)


def _serve_network(args: argparse.Namespace, limits: Limits) -> None:
    from .agent.serve import warn_if_fallback
    from .hosting import HostConfig, ListenAddress, bearer_token, run_host

    warn_if_fallback()

    if args.command == "demo":
        from .demo import DemoAgent

        pace_ms = args.pace_ms
        factory: Callable[[], Agent] = lambda: DemoAgent(pace_ms=pace_ms, unique_ids=True)  # noqa: E731
    else:
        sys.path.insert(0, "")
        factory = _agent_factory(args.target, args.unstable, args.strict)
    authorize = None
    if args.auth_token_env:
        token = os.environ.get(args.auth_token_env, "")
        if not token:
            raise SystemExit(f"acp-fast: --auth-token-env {args.auth_token_env}: the variable is empty or unset")
        authorize = bearer_token(token)
    from .hosting.cors import check_origins

    try:
        check_origins(args.allow_origin, auth=authorize is not None)
    except ValueError as exc:
        raise SystemExit(f"acp-fast: --allow-origin: {exc}") from None
    try:
        address = ListenAddress.parse(args.listen)
    except ValueError as exc:
        raise SystemExit(f"acp-fast: --listen: {exc}") from None
    if args.metrics_listen:
        try:
            if ListenAddress.parse(args.metrics_listen).unix_path:
                raise ValueError("a unix socket is not served")
        except ValueError as exc:
            raise SystemExit(f"acp-fast: --metrics-listen: {exc}") from None
    proxies = _trusted_proxies(args)
    from .hosting.store import check_spec

    store: str | None = args.session_store
    if store is not None:
        try:
            check_spec(store)
        except ValueError as exc:
            raise SystemExit(f"acp-fast: --session-store: {exc}") from None

    group: str | None = None  # --workers N --metrics: where the workers read each other's metrics

    def serve(reuse_port: bool = False) -> int:
        config = HostConfig(
            limits=limits,
            listen=address,
            use_uvloop=not args.no_uvloop,
            authorize=authorize,
            allowed_origins=args.allow_origin,
            reuse_port=reuse_port,
            web_console=args.web_console,
            session_store=store,
            freeze_gc=args.gc_freeze,
            metrics=args.metrics,
            metrics_listen=args.metrics_listen,
            otel=args.otel,
            access_log=args.access_log,
            metrics_group=group,
            proxies=proxies,
        )
        return run_host(factory, config)

    if args.workers <= 1:
        status = serve()
        if status:
            raise SystemExit(status)
        return
    if not address.port:
        raise SystemExit("acp-fast: --workers needs an explicit port (each worker would pick its own otherwise)")
    if args.metrics_listen:
        raise SystemExit("acp-fast: --metrics-listen with --workers is not supported yet (one port per process); "
                         "use --metrics: the worker a scrape reaches answers for all of them")
    from .hosting.workers import run_workers, shared_session_store

    # The drain's bound, then abort_join_s more for the default executor's threads (agent/executor.py).
    bound = limits.shutdown_grace_s + 2 * limits.abort_join_s + limits.drain_flush_s
    with contextlib.ExitStack() as stack:
        if args.metrics:  # one scrape of the shared port answers for every worker (observability/group.py)
            from .observability.group import metrics_group

            group = stack.enter_context(metrics_group())
        if store is None:  # the workers share parking out of the box
            store = stack.enter_context(shared_session_store())
        raise SystemExit(run_workers(args.workers, lambda: serve(reuse_port=True), bound))


def main(argv: Sequence[str] | None = None) -> None:
    try:
        _main(argv)
    except MissingExtra as exc:
        sys.stderr.write(f"acp-fast: {exc}\n")
        raise SystemExit(2) from None


def _main(argv: Sequence[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["client"]:
        from .client.console import main as client_main

        raise SystemExit(client_main(argv[1:]))
    if argv[:1] == ["top"]:
        from .extras import require

        require("metrics", "acp-fast top")
        from .observability.top import main as top_main

        raise SystemExit(top_main(argv[1:]))
    if argv[:1] == ["bench"]:
        from .bench.driver import main as bench_main

        raise SystemExit(bench_main(argv[1:]))
    args = _parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    if args.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    limits = Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})
    if args.validate_schema:
        os.environ[validate.SCHEMA_ENV_VAR] = args.validate_schema
    if args.validate or args.validate_schema:
        os.environ[validate.ENV_VAR] = "1"  # read where the server is built, as for library users
    if validate.enabled():
        problem = validate.unavailable()
        if problem:
            sys.stderr.write(f"acp-fast: --validate: {problem}\n")
            raise SystemExit(2)
    if args.metrics and not args.listen:
        raise SystemExit("acp-fast: --metrics needs --listen (over stdio use --metrics-listen HOST:PORT)")
    if args.metrics or args.metrics_listen:
        from .extras import require

        require("metrics", "--metrics / --metrics-listen")
    if args.otel:
        from .extras import require

        require("otel", "--otel")
    if args.web_console and not args.listen:
        raise SystemExit("acp-fast: --web-console needs --listen (the console is served beside /acp)")
    if args.listen:
        _serve_network(args, limits)
        return
    if args.command == "demo":
        from .demo import DemoAgent

        agent: Agent = DemoAgent(pace_ms=args.pace_ms)
    else:
        sys.path.insert(0, "")
        agent = _load_agent(args.target, unstable=args.unstable, strict=args.strict)
    from .agent.serve import run_agent

    on_server = None
    if args.metrics_listen or args.otel:
        from .observability import stdio_hook

        try:
            on_server = stdio_hook(args.metrics_listen, args.otel, limits)
        except ValueError as exc:
            raise SystemExit(f"acp-fast: {exc}") from None
    status = run_agent(agent, limits, use_uvloop=not args.no_uvloop, freeze_gc=args.gc_freeze, on_server=on_server)
    if status:
        # Tasks were abandoned (R14): one may hold a thread the interpreter's exit would join.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


__all__ = ["main"]
