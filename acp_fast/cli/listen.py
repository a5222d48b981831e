"""``--listen``: many connections at /acp in this process, or in ``--workers N`` processes sharing the port.

Each flag is checked before anything binds, and what must answer (the
port, the metrics port, the session store) is probed: a mistake is one line
naming the flag and exit status 2 (``checks.StartupMistake``), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..agent.base import Agent
from ..wire.limits import Limits
from .checks import StartupMistake, check_address
from .probes import check_binds, check_store, check_unix_bind

if TYPE_CHECKING:
    from ..hosting import HostConfig, ListenAddress
    from ..hosting.forwarded import TrustedProxies
    from ..hosting.server import Authorize


def serve_network(args: argparse.Namespace, limits: Limits, factory: Callable[[], Callable[[], Agent]]) -> None:
    """Serve one agent from ``factory()`` per connection until drained; a non-zero status exits with it."""
    # Imported once --listen is given: hosting needs the server extra, refused here in one line.
    from ..agent.serve import warn_if_fallback
    from ..hosting import HostConfig, run_host

    warn_if_fallback()
    make_agent = factory()
    authorize = _authorize(args)
    address = _checked_address(args, authorize)
    proxies = _trusted_proxies(args)
    store = _checked_store(args, limits)
    if address.unix_path is None:
        check_binds("--listen", args.listen)
    else:
        check_unix_bind("--listen", address.unix_path)
    if args.metrics_listen:
        check_binds("--metrics-listen", args.metrics_listen)
    config = HostConfig(
        limits=limits,
        listen=address,
        use_uvloop=not args.no_uvloop,
        authorize=authorize,
        allowed_origins=args.allow_origin,
        web_console=args.web_console,
        session_store=store,
        freeze_gc=args.gc_freeze,
        metrics=args.metrics,
        metrics_listen=args.metrics_listen,
        otel=args.otel,
        access_log=args.access_log,
        proxies=proxies,
    )
    if args.workers <= 1:
        status = run_host(make_agent, config)
        if status:
            raise SystemExit(status)
        return
    _serve_workers(args, config, lambda worker_config: run_host(make_agent, worker_config))


def _serve_workers(args: argparse.Namespace, config: HostConfig, serve: Callable[[HostConfig], int]) -> None:
    """``--workers N``: processes on one port (``reuse_port``) sharing parked sessions and, with --metrics, a scrape."""
    if not config.listen.port:
        raise StartupMistake("--workers needs an explicit port (each worker would pick its own otherwise)")
    if args.metrics_listen:
        raise StartupMistake("--metrics-listen with --workers is not supported yet (one port per process); "
                             "use --metrics: the worker a scrape reaches answers for all of them")
    from ..hosting.workers import WorkerFailedToStart, run_workers, shared_session_store

    limits = config.limits
    # The drain's bound, then abort_join_s more for the default executor's threads (agent/executor.py).
    bound = limits.shutdown_grace_s + 2 * limits.abort_join_s + limits.drain_flush_s
    with contextlib.ExitStack() as stack:
        group: str | None = None  # --metrics: where the workers read each other's metrics
        if args.metrics:  # one scrape of the shared port answers for every worker (observability/group.py)
            from ..observability.group import metrics_group

            group = stack.enter_context(metrics_group())
        store = config.session_store
        if store is None:  # the workers share parking out of the box
            store = stack.enter_context(shared_session_store())
        worker_config = dataclasses.replace(config, reuse_port=True, metrics_group=group, session_store=store)
        try:
            status = run_workers(args.workers, lambda: serve(worker_config), bound)
        except WorkerFailedToStart as exc:
            raise StartupMistake(str(exc)) from None
        raise SystemExit(status)


def _authorize(args: argparse.Namespace) -> Authorize | None:
    from ..hosting import bearer_token

    if not args.auth_token_env:
        return None
    token = os.environ.get(args.auth_token_env, "")
    if not token:
        raise StartupMistake(f"--auth-token-env {args.auth_token_env}: the variable is empty or unset")
    return bearer_token(token)


def _checked_address(args: argparse.Namespace, authorize: Authorize | None) -> ListenAddress:
    """``--listen``, after ``--allow-origin`` and before ``--metrics-listen`` are checked."""
    from ..hosting import ListenAddress
    from ..hosting.cors import check_origins

    try:
        check_origins(args.allow_origin, auth=authorize is not None)
    except ValueError as exc:
        raise StartupMistake(f"--allow-origin: {exc}") from None
    check_address("--listen", args.listen)
    try:
        address = ListenAddress.parse(args.listen)
    except ValueError as exc:
        raise StartupMistake(f"--listen: {exc}") from None
    if args.metrics_listen:
        check_address("--metrics-listen", args.metrics_listen, unix=False)
    return address


def _trusted_proxies(args: argparse.Namespace) -> TrustedProxies:
    from ..hosting.forwarded import TrustedProxies

    try:
        return TrustedProxies.parse(args.forwarded_allow_ips, proxy_protocol=args.proxy_protocol)
    except ValueError as exc:
        raise StartupMistake(f"--forwarded-allow-ips: {exc}") from None


def _checked_store(args: argparse.Namespace, limits: Limits) -> str | None:
    """``--session-store``: its spec parses, its extra is installed, and it answers."""
    from ..hosting.store import check_spec

    store: str | None = args.session_store
    if store is not None:
        try:
            check_spec(store)
        except ValueError as exc:
            raise StartupMistake(f"--session-store: {exc}") from None
        check_store(store, limits.session_store_timeout_s)
    return store


__all__ = ["serve_network"]
