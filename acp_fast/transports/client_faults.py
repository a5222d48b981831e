"""What clients do wrong, counted by reason and logged at a bounded rate.

A frame RFC 6455 forbids, a text message that is not UTF-8, a first message
that is not ``initialize``: each is the client's fault, not the server's, so it
is no ERROR line (ERROR is what an operator is paged for). And since any
client can commit as many as it likes, the lines are rate-limited
(``client_error_logs_per_min``); the counts, by reason, are what metrics
report (``acp_client_errors_total``), so none goes unseen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..wire.limits import CLIENT_ERROR_LOGS_PER_MIN

log = logging.getLogger(__name__)

#: The reasons counted, the metric's label values: a bounded set; any other is counted as ``other``.
REASONS = frozenset(
    {
        "ws_protocol",  # a frame RFC 6455 forbids (closed 1002)
        "ws_invalid_text",  # a text message or close reason that is not UTF-8 (1007)
        "ws_too_big",  # a frame past the size limit (1009)
        "ws_first_message",  # a first message other than initialize (1002)
        "ws_initialize_timeout",  # no initialize within initialize_timeout_s (1008)
        "ws_close_timeout",  # our close frame not answered within drain_flush_s
        "other",
    }
)

_WINDOW_S = 60.0  # the rate's unit: client_error_logs_per_min


class ClientFaults:
    """The counts of one host, and the rate its lines are logged at (one window shared by every client)."""

    def __init__(self, per_min: int = CLIENT_ERROR_LOGS_PER_MIN, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_min = per_min
        self.counts: dict[str, int] = {}
        self._clock = clock
        self._window_end = float("-inf")
        self._logged = 0
        self._unlogged = 0

    def report(self, reason: str, what: str, connection: str = "") -> None:
        """Count one fault under ``reason``; log ``what`` at INFO unless this minute's lines are spent."""
        reason = reason if reason in REASONS else "other"
        self.counts[reason] = self.counts.get(reason, 0) + 1
        now = self._clock()
        if now >= self._window_end:
            self._window_end = now + _WINDOW_S
            self._logged = 0
        if self._logged >= self.per_min:
            self._unlogged += 1
            return
        self._logged += 1
        unlogged, self._unlogged = self._unlogged, 0
        log.info(
            "client error (%s)%s: %s%s",
            reason,
            f" on connection {connection}" if connection else "",
            what,
            f" ({unlogged} earlier one(s) not logged: over client_error_logs_per_min)" if unlogged else "",
        )


__all__ = ["REASONS", "ClientFaults"]
