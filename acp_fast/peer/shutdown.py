"""A connection's shutdown sequence: hooks, spawned tasks and unanswered requests, each bounded (R13, R14).

The Connection runs it once its dispatch loop ended (``Connection._shutdown``):
every step has a deadline derived from ``Limits`` and whatever a step raises
is logged and the sequence goes on, so a stuck hook or task never holds the
connection open and every request still gets its one answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from ..wire.errors import ConnectionClosed
from ..wire.limits import Limits
from .dispatch import name_of
from .incoming import IncomingRequest
from .writer import Writer

log = logging.getLogger("acp_fast.peer.connection")  # the connection's own records keep their logger

ShutdownHook = Callable[[], Awaitable[None]]


async def shut_down(
    loop: asyncio.AbstractEventLoop,
    limits: Limits,
    hooks: Iterable[ShutdownHook],
    fail_pending: Callable[[], None],
    spawned: Collection[asyncio.Task[Any]],
    incoming: Collection[IncomingRequest],
    writer: Writer,
) -> None:
    """Cancel, grace, abort, join, then a bounded flush.

    Spawned tasks share the hooks' deadline rather than getting a grace of
    their own after them, so the whole sequence takes at most grace +
    abort join + flush timeout.
    """
    grace_end = loop.time() + limits.shutdown_grace_s
    join_end = grace_end + limits.abort_join_s
    # A hook that never returns must not hold the connection open: hooks get the
    # spawned tasks' deadline plus one more abort join, then are cut short.
    hooks_end = join_end + limits.abort_join_s
    # Nothing more will be read: no response can arrive for what we asked.
    fail_pending()
    for hook in hooks:
        await run_hook(hook, hooks_end)
    fail_pending()
    try:
        await join_spawned(loop, spawned, grace_end, join_end)
    except Exception:
        log.exception("joining spawned tasks at shutdown failed")
    for request in list(incoming):
        try:
            request.respond_error(ConnectionClosed("the agent shut down before answering"))
        except Exception:
            log.exception("answering %r at shutdown failed", request)
    try:
        await writer.close()
    except Exception:
        log.exception("closing the writer at shutdown failed")


async def join_spawned(
    loop: asyncio.AbstractEventLoop, spawned: Collection[asyncio.Task[Any]], grace_end: float, join_end: float
) -> None:
    """Wait for the spawned tasks until ``grace_end``, cancel those still alive, join them until ``join_end``."""
    if spawned:
        _, alive = await asyncio.wait(set(spawned), timeout=_left(loop, grace_end))
        for task in alive:
            task.cancel()
        if alive:
            await asyncio.wait(alive, timeout=_left(loop, join_end))


async def run_hook(hook: ShutdownHook, deadline: float) -> None:
    """One hook, bounded; whatever it raises is logged and the shutdown goes on.

    The hook runs in this task, so its first step (the agent's cancel of every
    turn) happens before anything woken by failing the pending requests runs.
    Past the deadline a hook still gets that first step, so the hooks after a
    stuck one still do their quick work.
    """
    try:
        async with asyncio.timeout_at(deadline):
            await hook()
    except TimeoutError:
        log.error("shutdown hook %s did not finish by the shutdown deadline; cut short", name_of(hook))
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the shutdown itself is being cancelled
        log.error("shutdown hook %s was cancelled from inside", name_of(hook))
    except Exception:
        log.exception("shutdown hook %s failed", name_of(hook))


def _left(loop: asyncio.AbstractEventLoop, deadline: float) -> float:
    """Seconds until ``deadline``; 0 once past (a wait of 0 still lets a cancelled task unwind one step)."""
    return max(0.0, deadline - loop.time())



__all__ = ["ShutdownHook", "join_spawned", "run_hook", "shut_down"]
