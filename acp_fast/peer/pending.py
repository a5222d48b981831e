"""Requests this side sent and is waiting on (R20, R21).

A PendingRequest is consumed one of two ways. Awaiting it suspends only the
awaiting task; doing so from the dispatch loop (inside an ordered handler)
could never return, because the response would be routed by that same loop,
so it raises DeadlockError at once. Or an ordered result callback: registered
before the response is routed, it runs *on* the dispatch loop when the
response arrives, holding the loop until it returns (an ordering barrier).
Outcomes that arrive without a response (connection closed) and callbacks
registered after the response was routed run in a spawned task, without a
barrier.

Every awaiter waits on a future of its own, so cancelling one awaiting task
touches neither the outcome nor the other awaiters. When the last awaiter
gives up before the answer (its turn was cancelled) and no result callback
wants the outcome, the owner is told, so it can ask the peer to stop
(``$/cancel_request``). The peer still answers exactly once; that late
answer settles the request and is dropped quietly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol

from ..wire.errors import AcpError, DeadlockError, from_error_obj

ResultCallback = Callable[[Any, AcpError | None], Coroutine[Any, Any, None]]

_UNSETTLED: Any = object()


class Owner(Protocol):
    """What a PendingRequest needs of the connection that sent it (the Connection)."""

    loop: asyncio.AbstractEventLoop

    def in_dispatch_loop(self) -> bool: ...
    def current_handler_name(self) -> str: ...
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]: ...
    def abandoned(self, pending: PendingRequest) -> None: ...


class PendingRequest:
    """One outgoing request; await it, or give it an ordered result callback."""

    __slots__ = ("_callback", "_conn", "_error", "_result", "_waiters", "id", "method")

    def __init__(self, conn: Owner, id: int, method: str) -> None:
        self._conn = conn
        self.id = id
        self.method = method
        self._result: Any = _UNSETTLED
        self._error: AcpError | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._callback: ResultCallback | None = None

    def __await__(self) -> Generator[Any, None, Any]:
        if self._conn.in_dispatch_loop():
            raise DeadlockError(
                f"awaiting the response to {self.method!r} inside ordered handler "
                f"{self._conn.current_handler_name()} would deadlock: the response is "
                "routed by the loop this handler is holding. Use conn.spawn() for the "
                "waiting part, or pending.on_result(callback)."
            )
        return self._wait().__await__()

    async def _wait(self) -> Any:
        if not self.done:
            waiter: asyncio.Future[None] = self._conn.loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                self._give_up(waiter)
                raise
        if self._error is not None:
            raise self._error
        return self._result

    def _give_up(self, waiter: asyncio.Future[None]) -> None:
        """An awaiter was cancelled; the last one to leave an open request tells the owner."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        if not self.done and not self._waiters and self._callback is None:
            self._conn.abandoned(self)

    @property
    def done(self) -> bool:
        return self._result is not _UNSETTLED

    def on_result(self, callback: ResultCallback) -> None:
        """Run ``callback(result, error)`` when the outcome is known (see module doc)."""
        if self._callback is not None:
            raise RuntimeError(f"request {self.id} ({self.method}) already has a result callback")
        if self.done:
            result = None if self._error is not None else self._result
            self._conn.spawn(callback(result, self._error), name=f"acp.result:{self.method}:{self.id}")
            return
        self._callback = callback

    def _settle(self, result: Any, error: AcpError | None) -> None:
        self._result = result
        self._error = error
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- called by the Connection ----------------------------------------------
    async def _route(self, result: Any, error_obj: Any) -> None:
        """A response arrived: settle, then run the callback as a barrier."""
        if self.done:
            return
        error = from_error_obj(error_obj) if error_obj is not None else None
        self._settle(None if error is not None else result, error)
        callback = self._callback
        if callback is not None:
            await callback(self._result, error)

    def _fail(self, error: AcpError) -> None:
        """Settled without a response (EOF, close): no barrier."""
        if self.done:
            return
        self._settle(None, error)
        callback = self._callback
        if callback is not None:
            self._conn.spawn(callback(None, error), name=f"acp.result:{self.method}:{self.id}")
