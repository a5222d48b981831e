"""The first message of a WebSocket must be ``initialize``, and it must come in time.

Its own room because it is a rule about one moment of a connection's life,
not about frames: until the first message that parses, that message's method
is checked (another method closes 1002), and a socket that sends nothing of
the kind within ``initialize_timeout_s`` holds a slot and serves nobody
(1008). Once the method came, the peer drops its gate, and the per-message
path pays one ``is None`` test for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..wire import jsonrpc
from ..wire.errors import AcpError
from ..wire.jsonrpc import Request


class FirstMessageGate:
    """Holds ``method`` (the first message's required method) and its deadline until that message came."""

    __slots__ = ("_timer", "method")

    def __init__(self, method: str) -> None:
        self.method = method
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop, timeout_s: float, on_overdue: Callable[[], None]) -> None:
        """The connection is up: ``on_overdue`` runs if ``method`` has not come within ``timeout_s``."""
        self._timer = loop.call_later(timeout_s, on_overdue)

    def admits(self, payload: bytes | bytearray | memoryview) -> bool | None:
        """True if ``payload`` is a ``method`` request, False if another message came first.

        None if it is no message at all: the Connection answers it -32700 or
        -32600, and the gate still waits for the first message.
        """
        try:
            message = jsonrpc.decode(payload)
        except (jsonrpc.InvalidMessage, AcpError):
            return None
        return type(message) is Request and message.method == self.method

    def stop(self) -> None:
        """The method came, or the connection ended: no deadline any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
