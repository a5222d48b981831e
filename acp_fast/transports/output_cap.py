"""The output cap as "the client is not reading", shared by the WebSocket and Streamable HTTP transports.

Producers already wait above the Writer's high-water mark (R26); what is
still written regardless (answers, control traffic, one large message) sits
in a buffer the client empties by reading. Comparing that buffer with a cap
right after a write closed healthy clients: one 12 MiB update is 12 MiB
queued for an instant, however fast the client reads. So the cap is judged
over time and never below one message:

- above ``cap + max_line_bytes`` (more than any one message can explain):
  the client is closed at once;
- above ``cap``: the client must make progress (the buffer shrinks) within
  every ``stall_s``; a buffer that has not shrunk when the timer fires closes it.

A client that stops reading is thus closed within ``stall_s`` of its buffer
passing the cap, and memory stays below ``cap + max_line_bytes`` per connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class OutputCap:
    """Watches one connection's output buffer; ``on_stalled`` runs when its client is judged not reading."""

    __slots__ = ("_cap", "_ceiling", "_loop", "_mark", "_on_stalled", "_size", "_stall_s", "_timer")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        cap: int,
        max_message: int,
        stall_s: float,
        size: Callable[[], int],
        on_stalled: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._cap = cap
        self._ceiling = cap + max_message
        self._stall_s = stall_s
        self._size = size
        self._on_stalled = on_stalled
        self._timer: asyncio.TimerHandle | None = None
        self._mark = 0

    def over(self) -> bool:
        """After a write: True if the buffer is past anything one message explains (close now).

        Above the cap, starts the progress check if it is not running.
        """
        size = self._size()
        if size > self._ceiling:
            return True
        if size > self._cap and self._timer is None:
            self._mark = size
            self._timer = self._loop.call_later(self._stall_s, self._check)
        return False

    def _check(self) -> None:
        self._timer = None
        size = self._size()
        if size <= self._cap:
            return
        if size >= self._mark:  # nothing taken since the last look: the client is not reading
            self._on_stalled()
            return
        self._mark = size
        self._timer = self._loop.call_later(self._stall_s, self._check)

    def cancel(self) -> None:
        """The connection is closing: no more checks."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
