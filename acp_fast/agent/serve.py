"""Serving an Agent over stdio: ``serve_stdio`` (async) and ``run_agent`` (the process entry)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable

from ..peer.connection import Connection
from ..peer.reader import ReadProtocol
from ..peer.writer import Writer
from ..transports.loop import install_event_loop_policy
from ..transports.stdio import connect_stdio
from ..wire.framing import IMPLEMENTATION as FRAMER_IMPLEMENTATION
from ..wire.framing import new_framer
from ..wire.limits import Limits
from .base import Agent
from .server import AgentServer

log = logging.getLogger(__name__)


async def serve_stdio(
    agent: Agent,
    limits: Limits | None = None,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> AgentServer:
    """Serve ``agent`` over stdin/stdout until EOF; returns after the shutdown completed."""
    limits = limits or Limits()
    loop = asyncio.get_running_loop()
    writer = Writer(loop, limits)
    conn = Connection(loop, writer, limits)
    server = AgentServer(agent, conn)
    reader = ReadProtocol(conn, new_framer(limits), limits.read_buffer_bytes)
    await connect_stdio(loop, reader, writer, stdin_fd, stdout_fd)
    stop = _install_signal_handlers(loop, reader)
    try:
        await conn.run()
    finally:
        stop()
    return server


def _install_signal_handlers(
    loop: asyncio.AbstractEventLoop, reader: ReadProtocol
) -> Callable[[], None]:
    """SIGTERM/SIGINT end the read side: the same graceful path as EOF."""
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, _on_signal, reader, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def remove() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return remove


def _on_signal(reader: ReadProtocol, sig: signal.Signals) -> None:
    log.info("received %s: shutting down", sig.name)
    reader.close()
    reader.connection_lost(None)


def run_agent(agent: Agent, limits: Limits | None = None, use_uvloop: bool = True) -> None:
    """Run ``agent`` on stdio until EOF or SIGTERM/SIGINT, then exit cleanly.

    Not ``asyncio.run``: that waits for every task at exit, and a task that
    ignores cancellation would hang the process after the grace period
    (R14). Here such a task is abandoned once the shutdown is complete.
    """
    kind = install_event_loop_policy() if use_uvloop else "asyncio"
    # Everything imported so far lives as long as the process: move it out of
    # the collector's sight, so a full collection scans only what the session
    # created (a multi-millisecond pause otherwise, straight into cancel p99).
    # No collection first: it costs 4-7 ms of start-up to free a few dozen
    # objects of import garbage, which stay frozen instead.
    gc.freeze()
    log.info("event loop: %s; framer: %s", kind, FRAMER_IMPLEMENTATION)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(serve_stdio(agent, limits))
        leftovers = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if leftovers:
            log.error("%d task(s) ignored cancellation; exiting without them", len(leftovers))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
