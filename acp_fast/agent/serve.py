"""Serving an Agent over stdio: ``serve_stdio`` (async) and ``run_agent`` (the process entry)."""

from __future__ import annotations

import asyncio
import dis
import functools
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from types import FrameType
from typing import Any

from ..peer.connection import Connection
from ..peer.reader import ReadProtocol
from ..peer.writer import Writer
from ..transports.loop import event_loop_factory
from ..transports.stdio import connect_stdio
from ..wire.framing import FALLBACK_REASON, new_framer
from ..wire.framing import IMPLEMENTATION as FRAMER_IMPLEMENTATION
from ..wire.limits import ABORT_JOIN_S, Limits
from .base import Agent
from .executor import DaemonThreadPool
from .server import AgentServer

log = logging.getLogger(__name__)

#: Allocations between two collections of the youngest generation when ``freeze_gc``
#: is on (CPython's default is 700). A request allocates a dozen tracked objects
#: (decoded dicts, messages, coroutines), so 700 meant a young collection every ~60
#: requests: 3% of a pipelined session/set_mode and 12% of a session/new (in-process,
#: benchmarks/per_request.py). Only cyclic garbage waits longer; the rest is freed by
#: reference counting as before.
YOUNG_GC_THRESHOLD = 10_000


async def serve_stdio(
    agent: Agent,
    limits: Limits | None = None,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    on_server: Callable[[AgentServer], Awaitable[None]] | None = None,
) -> AgentServer:
    """Serve ``agent`` over stdin/stdout until EOF; returns after the shutdown completed.

    ``on_server`` runs once the server exists, before anything is read (``--metrics-listen`` instruments it).
    """
    limits = limits or Limits()
    loop = asyncio.get_running_loop()
    writer = Writer(loop, limits)
    conn = Connection(loop, writer, limits)
    server = AgentServer(agent, conn)
    if on_server is not None:
        await on_server(server)
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


@functools.cache
def warn_if_fallback() -> None:
    """Say once per process that the slow path is live: pip prints its own warning only with ``-v``."""
    if FALLBACK_REASON is not None:
        log.warning(
            "running on the pure-Python framer and decoder: %s; reinstall with a C compiler for full speed",
            FALLBACK_REASON,
        )


def run_agent(
    agent: Agent,
    limits: Limits | None = None,
    use_uvloop: bool = True,
    freeze_gc: bool = False,
    on_server: Callable[[AgentServer], Awaitable[None]] | None = None,
) -> int:
    """Run ``agent`` on stdio until EOF or SIGTERM/SIGINT; return the exit status.

    This is the blocking process entry: it runs its own event loop and
    returns when the session is over (in async code, ``await
    serve_stdio(agent)`` instead). The status is 0, or 1 when the shutdown
    had to abandon tasks that ignored cancellation, or threads of the default
    executor still busy ``abort_join_s`` after the session (R14): those are
    left behind rather than awaited, since ``asyncio.run`` would wait for
    them for ever.

    ``freeze_gc`` moves everything alive at start-up out of the cyclic
    collector's sight (``gc.freeze``), so a full collection scans only what
    the session made (a multi-millisecond pause otherwise). It is
    process-wide and a cycle frozen at start-up is never collected, so it is
    off unless asked for; ``acp-fast`` asks for it. It also collects the
    youngest generation every ``YOUNG_GC_THRESHOLD`` allocations instead of
    every 700 (see there).
    """
    _refuse_misuse(sys._getframe(1))
    factory, kind = event_loop_factory(use_uvloop)
    if freeze_gc:
        # No collection first: it costs 4-7 ms of start-up to free a few dozen
        # objects of import garbage, which stay frozen instead.
        gc.freeze()
        gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    log.info("event loop: %s; framer: %s", kind, FRAMER_IMPLEMENTATION)
    warn_if_fallback()
    runner = asyncio.Runner(loop_factory=factory)
    threads_join_s = (limits or Limits()).abort_join_s
    return run_to_exit(runner, serve_stdio(agent, limits, on_server=on_server), threads_join_s=threads_join_s)


def run_to_exit(
    runner: asyncio.Runner,
    main: Coroutine[Any, Any, Any],
    join_s: float = 0.0,
    logger: logging.Logger = log,
    *,
    threads_join_s: float = ABORT_JOIN_S,
) -> int:
    """Run ``main`` on ``runner``, then close it; the exit status: 0, or 1 when tasks or threads are left behind.

    Tasks still pending once ``main`` returned were abandoned by its shutdown
    (they ignored their cancellation): they are left, not awaited, since
    ``Runner.close`` would wait for ever. With ``join_s``, they are first
    cancelled and given that long, for tasks ``main`` never cancelled itself
    (a library's, say), as ``Runner.close`` would. The loop's default
    executor is a :class:`DaemonThreadPool`: its threads get
    ``threads_join_s`` once ``main`` returned, and one still busy then is
    named with its stack and left behind, where asyncio's own would hold the
    exit for ever.
    """
    threads = DaemonThreadPool(threads_join_s)
    try:
        runner.get_loop().set_default_executor(threads)
        runner.run(main)
        loop = runner.get_loop()
        leftovers = {t for t in asyncio.all_tasks(loop) if not t.done()}
        if leftovers and join_s > 0:
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.wait(leftovers, timeout=join_s))
            leftovers = {t for t in leftovers if not t.done()}
    except BaseException:
        runner.close()
        raise
    if not leftovers:
        runner.close()  # shuts the default executor down: bounded, see DaemonThreadPool
        return 1 if threads.stuck else 0
    logger.error("%d task(s) ignored cancellation; exiting without them", len(leftovers))
    threads.shutdown()
    _abandon(loop, leftovers)
    return 1


def _abandon(loop: asyncio.AbstractEventLoop, tasks: set[asyncio.Task[Any]]) -> None:
    """Close ``loop`` without waiting for ``tasks`` (``Runner.close`` would wait for ever).

    When they are collected later, asyncio reports each as destroyed while
    pending; they were already reported as abandoned, so that is not repeated.
    """
    default = loop.default_exception_handler

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("task") not in tasks:
            default(context)

    loop.set_exception_handler(handler)
    loop.close()


def _refuse_misuse(caller: FrameType) -> None:
    """Fail at once on the two ways SDK users call an async ``run_agent``.

    The official SDK's ``run_agent`` is a coroutine. This one blocks, so
    inside a running loop it cannot work, and ``asyncio.run(run_agent(a))``
    would serve the whole session before ``asyncio.run`` refused the None it
    got. Both are refused before anything is served, naming the right call.
    """
    right = "in async code use `await acp_fast.serve_stdio(agent)`; at top level call `run_agent(agent)` alone"
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(f"run_agent() runs its own event loop and cannot run inside one: {right}")
    runner = _runner_receiving_result(caller)
    if runner is not None:
        raise TypeError(
            f"run_agent() is not a coroutine: it serves the session itself and returns its exit status, "
            f"so {runner}(run_agent(...)) has nothing to run: {right}"
        )


_RUNNERS = frozenset({"run", "run_until_complete", "ensure_future", "create_task", "gather", "wait_for"})


def _runner_receiving_result(frame: FrameType) -> str | None:
    """The name of the call ``frame`` passes our result to, if it is one that runs coroutines.

    Read from the caller's bytecode: the instruction after the current call
    consumes the result; when it is another call, the names loaded at that
    call's start position spell its callee (``asyncio.run``). None when the
    result is used any other way, or positions are not recorded.
    """
    instructions = list(dis.get_instructions(frame.f_code))
    # f_lasti is the call, or (3.11) one of the inline cache entries that follow it.
    here = max((i for i, ins in enumerate(instructions) if ins.offset <= frame.f_lasti), default=None)
    if here is None or not instructions[here].opname.startswith("CALL"):
        return None
    after = instructions[here + 1 : here + 3]
    outer = next((ins for ins in after if ins.opname.startswith("CALL")), None)
    if outer is None or after[0].opname not in ("CALL", "PRECALL") or outer.positions is None:
        return None
    start = (outer.positions.lineno, outer.positions.col_offset)
    names = [
        ins.argval
        for ins in instructions[:here]
        if ins.opname.startswith("LOAD")
        and isinstance(ins.argval, str)
        and ins.positions is not None
        and (ins.positions.lineno, ins.positions.col_offset) == start
    ]
    if names and names[-1] in _RUNNERS:
        return ".".join(names)
    return None
