"""Cancellation tokens for prompt turns and background requests (R10-R12).

A token is reserved for a prompt when it is admitted, before its task runs a
step, so a cancel that arrives right behind the prompt still reaches it
(R10). Cancelling a session swaps in a fresh token for later turns while the
running turn keeps its own, cancelled one (R11). Prompt code sees
cancellation both ways: by polling or awaiting the token (cooperative code)
and as ``asyncio`` task cancellation at its next await (ordinary code).
"""

from __future__ import annotations

import asyncio


class CancelToken:
    """Set once, never reset; cheap to create (one per turn)."""

    __slots__ = ("_cancelled", "_waiter", "reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._waiter: asyncio.Future[None] | None = None
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str = "cancelled") -> bool:
        """Cancel; returns False if it already was."""
        if self._cancelled:
            return False
        self._cancelled = True
        self.reason = reason
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
        return True

    async def wait(self) -> None:
        """Return once cancelled (race it against work with asyncio.wait)."""
        if self._cancelled:
            return
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._waiter)

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise asyncio.CancelledError(self.reason)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._cancelled})"
