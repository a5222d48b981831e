"""The logger each WebSocket's picows protocol gets: what a client did wrong is counted, not logged as ERROR.

picows logs a frame it refuses ("WS parser error": unmasked, a reserved
opcode, an oversized control frame, a close code RFC 6455 forbids) at ERROR,
and again for each further bad frame that arrives before the socket closes,
so any client could write to the operator's error log at will. Here that
record becomes one report per connection to the host's ``ClientFaults``
(counted by reason, logged at INFO at a bounded rate). picows' wire dumps
(level 9, below DEBUG) are dropped: they print request heads whole,
``Authorization`` and the ``acp.bearer`` subprotocol (hosting/subprotocol.py)
with them. Everything else goes to the ``acp_fast.hosting.ws`` logger as is.
"""

from __future__ import annotations

import logging
from typing import Any

from picows import WSCloseCode

from ..transports.client_faults import ClientFaults

_LOG = logging.getLogger("acp_fast.hosting.ws")
#: The format string of picows' record for a frame it refused (its arguments: the close code and reason).
_REFUSED_FRAME = "WS parser error: %s, initiate disconnect"
_REASONS = {
    WSCloseCode.PROTOCOL_ERROR.value: "ws_protocol",
    WSCloseCode.INVALID_TEXT.value: "ws_invalid_text",
    WSCloseCode.MESSAGE_TOO_BIG.value: "ws_too_big",
}


class PicowsLog:
    """Quacks like the ``logging.Logger`` picows calls; one per connection, so its client is reported once."""

    __slots__ = ("_faults", "_reported")

    def __init__(self, faults: ClientFaults) -> None:
        self._faults = faults
        self._reported = False

    def isEnabledFor(self, level: int) -> bool:  # the Logger method picows calls
        return level >= logging.DEBUG and _LOG.isEnabledFor(level)

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level < logging.DEBUG:
            return
        if msg == _REFUSED_FRAME:
            if not self._reported:
                self._reported = True
                code, reason = _code_and_reason(args)
                self._faults.report(_REASONS.get(code, "ws_protocol"), f"{reason}; closing {code}")
            return
        _LOG.log(level, msg, *args, **kwargs)

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(logging.DEBUG, msg, *args, **kwargs)

    def info(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(logging.INFO, msg, *args, **kwargs)

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(logging.WARNING, msg, *args, **kwargs)

    def error(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(logging.ERROR, msg, *args, **kwargs)

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        self.log(logging.ERROR, msg, *args, exc_info=exc_info, **kwargs)


def _code_and_reason(args: tuple[Any, ...]) -> tuple[int, str]:
    """picows passes the exception's args, ``(close code, reason)``; anything else still counts as a 1002."""
    exc_args = args[0] if args and isinstance(args[0], tuple) else ()
    if len(exc_args) >= 2 and isinstance(exc_args[0], int):  # picows' close codes are ints (an IntEnum)
        return int(exc_args[0]), str(exc_args[1])
    return WSCloseCode.PROTOCOL_ERROR.value, "a frame the WebSocket layer refused"


__all__ = ["PicowsLog"]
