"""What an operator sees from outside the process: Prometheus metrics (``metrics.py``), traces (``tracing.py``).

Nothing here is imported unless asked for (``--metrics``, ``--metrics-listen``,
``AcpHost(metrics=True)``), so a server without it pays nothing: no module, no
hook, no timer. When on, the hot path gains plain integer and float
arithmetic on objects the process already has; the ``prometheus_client``
objects are built from those at scrape time (``metrics.AcpCollector``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

from ..agent.server import AgentServer
from ..extras import require
from ..wire.limits import Limits


def stdio_hook(metrics_listen: str | None, otel: bool, limits: Limits) -> Callable[[AgentServer], Awaitable[None]]:
    """``run_agent(on_server=...)`` for a stdio agent: ``--metrics-listen HOST:PORT`` and/or ``--otel``."""
    host = port = ""
    if metrics_listen:
        require("metrics", "--metrics-listen")
        host, sep, port = metrics_listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"--metrics-listen: expected HOST:PORT, got {metrics_listen!r}")
    if otel:
        require("otel", "--otel")
    preload(bool(metrics_listen), otel)

    async def on_server(server: AgentServer) -> None:
        if metrics_listen:
            from .metrics import Metrics

            metrics = Metrics(transport="stdio")
            metrics.attach(server, server)
            metrics.start()
            bound = await metrics.listen(host.strip("[]") or None, int(port), limits)
            server.conn.on_shutdown(metrics.stop)
            # stderr: stdout carries nothing but ACP messages.
            print(f"acp-fast: metrics at http://{host or '*'}:{bound}/metrics", file=sys.stderr, flush=True)
        if otel:
            from .tracing import Tracing

            Tracing().attach(server, "stdio")

    return on_server


def preload(metrics: bool, otel: bool) -> None:
    """Import what will be used now, before ``run_agent``/``run_host`` freeze the start-up heap (``gc.freeze``).

    Imported later, prometheus_client's and opentelemetry's objects would stay
    in the collector's sight for the whole life of the process, and every full
    collection would walk them again.
    """
    if metrics:
        from . import metrics as _metrics  # noqa: F401
    if otel:
        from . import tracing as _tracing  # noqa: F401


__all__ = ["preload", "stdio_hook"]
