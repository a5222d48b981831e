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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol

from ..wire.errors import AcpError, DeadlockError, from_error_obj

ResultCallback = Callable[[Any, AcpError | None], Coroutine[Any, Any, None]]


class Owner(Protocol):
    """What a PendingRequest needs of the connection that sent it (the Connection)."""

    loop: asyncio.AbstractEventLoop

    def in_dispatch_loop(self) -> bool: ...
    def current_handler_name(self) -> str: ...
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]: ...


class PendingRequest:
    """One outgoing request; await it, or give it an ordered result callback."""

    __slots__ = ("_callback", "_conn", "_future", "id", "method")

    def __init__(self, conn: Owner, id: int, method: str) -> None:
        self._conn = conn
        self.id = id
        self.method = method
        self._future: asyncio.Future[Any] = conn.loop.create_future()
        self._callback: ResultCallback | None = None

    def __await__(self) -> Generator[Any, None, Any]:
        if self._conn.in_dispatch_loop():
            raise DeadlockError(
                f"awaiting the response to {self.method!r} inside ordered handler "
                f"{self._conn.current_handler_name()} would deadlock: the response is "
                "routed by the loop this handler is holding. Use conn.spawn() for the "
                "waiting part, or pending.on_result(callback)."
            )
        return self._future.__await__()

    @property
    def done(self) -> bool:
        return self._future.done()

    def on_result(self, callback: ResultCallback) -> None:
        """Run ``callback(result, error)`` when the outcome is known (see module doc)."""
        if self._callback is not None:
            raise RuntimeError(f"request {self.id} ({self.method}) already has a result callback")
        if self._future.done():
            result, error = self._outcome()
            self._conn.spawn(callback(result, error), name=f"acp.result:{self.method}:{self.id}")
            return
        self._callback = callback

    def _outcome(self) -> tuple[Any, AcpError | None]:
        exc = self._future.exception()
        if isinstance(exc, AcpError):
            return None, exc
        return self._future.result(), None

    # -- called by the Connection ----------------------------------------------
    async def _route(self, result: Any, error_obj: Any) -> None:
        """A response arrived: settle, then run the callback as a barrier."""
        error = from_error_obj(error_obj) if error_obj is not None else None
        if error is None:
            self._future.set_result(result)
        else:
            self._future.set_exception(error)
            self._future.exception()  # retrieved here; an awaiter still gets it raised
        callback = self._callback
        if callback is not None:
            await callback(result if error is None else None, error)

    def _fail(self, error: AcpError) -> None:
        """Settled without a response (EOF, close): no barrier."""
        if self._future.done():
            return
        self._future.set_exception(error)
        self._future.exception()  # fire-and-forget requests must not warn
        callback = self._callback
        if callback is not None:
            self._conn.spawn(callback(None, error), name=f"acp.result:{self.method}:{self.id}")
