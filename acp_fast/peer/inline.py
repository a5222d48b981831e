"""The inline fast path: dispatch from the read callback, as the dispatch task (R18, R19).

When the dispatch loop is parked on an empty inbox, the lines of a read chunk
are dispatched inside the read callback instead of waking the loop task: with
31 prompts streaming, the skipped loop turn is most of a control request's
latency. To keep every guarantee of the loop, the drain runs *as* the dispatch
task: asyncio's running-task bookkeeping is switched to it for the step, so
``current_task()``, deadlock detection and ``asyncio.timeout`` see exactly
what they would on the loop. It also runs in the dispatch task's context, so
a context variable a handler sets before its first await is still set after
it, and the read callback's own context is left alone.

A handler that suspends mid-drain hands its coroutine over: the dispatch task
wakes, awaits ``Resume`` and so finishes the drain as if it had been awaiting
it from the start. A cancellation of the dispatch task that lands before it
took the drain over is thrown into the drain, at the handler's await, exactly
where the queued path would have delivered it.

The session start callbacks use the same primitive (``first_step`` without a
task, then ``Resume``): a callback that never suspends costs no task.

This uses asyncio's private ``_enter_task``/``_leave_task`` (stable since
3.7). Where they are missing, ``AVAILABLE`` is false and every message takes
the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from asyncio import tasks as _tasks
from collections.abc import Callable, Coroutine, Generator
from typing import Any

_TaskHook = Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None]
_enter_task: _TaskHook | None = getattr(_tasks, "_enter_task", None)
_leave_task: _TaskHook | None = getattr(_tasks, "_leave_task", None)

#: Whether this interpreter lets the read callback act as the dispatch task.
AVAILABLE = _enter_task is not None and _leave_task is not None


class Reentered(Exception):
    """``first_step`` was asked to enter a context that is already entered: nothing ran."""


def first_step(
    coro: Coroutine[Any, Any, Any],
    context: contextvars.Context,
    task: asyncio.Task[Any] | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Resume | None:
    """Run ``coro`` up to its first suspension, in ``context``; None if it finished, else its ``Resume``.

    The one way this package steps a coroutine by hand: the dispatch drain
    from a read callback, and the session start callbacks from their
    starter task. What ``coro`` raises is raised here. With ``task`` (and
    its ``loop``), the step runs *as* that task: the caller's own task, if
    any (in-process use feeds lines from one), is stepped out for the
    duration and back in after. Raises ``Reentered``, with ``coro`` closed
    unstarted, when ``context`` is already entered (a callback running in
    the dispatch context fed the line): the caller then leaves the work to
    the task.
    """
    if task is None:
        try:
            first = context.run(coro.send, None)
        except StopIteration:
            return None
        return Resume(coro, first, context=context)
    assert _enter_task is not None and _leave_task is not None and loop is not None
    outer = asyncio.current_task(loop)
    if outer is not None:
        _leave_task(loop, outer)
    _enter_task(loop, task)
    try:
        first = context.run(coro.send, None)
    except StopIteration:
        return None
    except RuntimeError:
        if inspect.getcoroutinestate(coro) != inspect.CORO_CREATED:
            raise
        coro.close()
        raise Reentered from None
    finally:
        _leave_task(loop, task)
        if outer is not None:
            _enter_task(loop, outer)
    return Resume(coro, first)


class Resume:
    """Finish, on the dispatch task, a drain that suspended while it ran inline.

    The coroutine already yielded ``first`` (a future, or None for a bare
    yield); the task takes it from there exactly as if it had been awaiting
    the coroutine all along: results are sent in, exceptions (task
    cancellation included) are thrown in. ``cancelled`` (settable until it is
    awaited): the task was cancelled before it took over; ``first`` is
    cancelled and the error thrown in at once, as ``Task.cancel`` would have
    done. ``context``: every later step runs in it too (the one the first
    step ran in), so the coroutine keeps its own context variables inside
    the awaiting task. The dispatch drain needs none: its task already runs
    in the dispatch context.
    """

    __slots__ = ("cancelled", "context", "coro", "first")

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        first: Any,
        cancelled: BaseException | None = None,
        context: contextvars.Context | None = None,
    ) -> None:
        self.coro = coro
        self.first = first
        self.cancelled = cancelled
        self.context = context

    def __await__(self) -> Generator[Any, Any, None]:
        coro, value, context = self.coro, self.first, self.context
        if self.cancelled is not None:
            if asyncio.isfuture(value):
                value.cancel()
            try:
                value = coro.throw(self.cancelled) if context is None else context.run(coro.throw, self.cancelled)
            except StopIteration:
                return
        while True:
            try:
                sent = yield value
            except BaseException as exc:
                try:
                    value = coro.throw(exc) if context is None else context.run(coro.throw, exc)
                except StopIteration:
                    return
            else:
                try:
                    value = coro.send(sent) if context is None else context.run(coro.send, sent)
                except StopIteration:
                    return
