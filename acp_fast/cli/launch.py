"""What ``demo`` and ``serve`` share once they know their agent: logging, the flag checks, stdio or --listen."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from ..agent import validate
from ..agent.base import Agent
from ..extras import require
from ..wire.limits import Limits
from . import logs
from .checks import StartupMistake, check_address, check_needs_listen, checked_limits, one_line
from .probes import check_binds


def launch(args: argparse.Namespace, agent: Callable[[], Agent], factory: Callable[[], Callable[[], Agent]]) -> None:
    """Serve ``agent()`` over stdio, or with ``--listen`` one agent per connection from ``factory()``."""
    logs.configure(args)
    limits = checked_limits(args)
    _check(args)
    if args.listen:
        from .listen import serve_network

        serve_network(args, limits, factory)
        return
    served = agent()
    if args.metrics_listen:
        check_address("--metrics-listen", args.metrics_listen, unix=False)
        check_binds("--metrics-listen", args.metrics_listen)
    _serve_stdio(args, limits, served)


def _check(args: argparse.Namespace) -> None:
    """Flags that need an extra or another flag: one line and exit status 2, before anything starts."""
    if args.validate_schema:
        os.environ[validate.SCHEMA_ENV_VAR] = args.validate_schema
    if args.validate or args.validate_schema:
        os.environ[validate.ENV_VAR] = "1"  # read where the server is built, as for library users
    if validate.enabled():
        problem = validate.unavailable()
        if problem:
            sys.stderr.write(f"acp-fast: --validate: {problem}\n")
            raise SystemExit(2)
    check_needs_listen(args)
    if args.metrics or args.metrics_listen:
        require("metrics", "--metrics / --metrics-listen")
    if args.otel:
        require("otel", "--otel")


def _serve_stdio(args: argparse.Namespace, limits: Limits, agent: Agent) -> None:
    from ..agent.serve import run_agent

    on_server = None
    if args.metrics_listen or args.otel:
        from ..observability import stdio_hook

        try:
            on_server = stdio_hook(args.metrics_listen, args.otel, limits)
        except ValueError as exc:
            raise StartupMistake(one_line(exc)) from None
    status = run_agent(agent, limits, use_uvloop=not args.no_uvloop, freeze_gc=args.gc_freeze, on_server=on_server)
    if status:
        # Tasks were abandoned (R14): one may hold a thread the interpreter's exit would join.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


__all__ = ["launch"]
