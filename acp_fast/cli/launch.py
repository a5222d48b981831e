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
from .options import limits_from


def launch(args: argparse.Namespace, agent: Callable[[], Agent], factory: Callable[[], Callable[[], Agent]]) -> None:
    """Serve ``agent()`` over stdio, or with ``--listen`` one agent per connection from ``factory()``."""
    logs.configure(args)
    limits = limits_from(args)
    _check(args)
    if args.listen:
        from .listen import serve_network

        serve_network(args, limits, factory)
        return
    _serve_stdio(args, limits, agent())


def _check(args: argparse.Namespace) -> None:
    """Flags that need an extra or another flag: one line and a non-zero exit, before anything starts."""
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
        require("metrics", "--metrics / --metrics-listen")
    if args.otel:
        require("otel", "--otel")
    if args.web_console and not args.listen:
        raise SystemExit("acp-fast: --web-console needs --listen (the console is served beside /acp)")


def _serve_stdio(args: argparse.Namespace, limits: Limits, agent: Agent) -> None:
    from ..agent.serve import run_agent

    on_server = None
    if args.metrics_listen or args.otel:
        from ..observability import stdio_hook

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


__all__ = ["launch"]
