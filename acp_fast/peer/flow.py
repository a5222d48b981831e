"""Why a peer's input is not being read: one set of reasons, one call to the transport per edge.

Several parties stop a socket from being read, each for its own reason: the
Connection when its inbox is full (R26), the output side when what the client
has not read is above the high-water mark (R26), a drain that takes nothing
new (R29), a request held unanswered on HTTP. Reading resumes only when none
of them holds it. ``ReadPauses`` keeps those reasons and tells its transport
on the edges only; it is also the ``ReadControl`` a socket transport hands the
Connection, whose pause is the inbox reason.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol


class ReadControl(Protocol):
    """What the Connection pauses, resumes and closes: the read side of whatever feeds it."""

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...


class Pause(enum.IntFlag):
    """A reason reading is paused."""

    INBOX = 1  # the Connection's inbox is full (R26)
    OUTPUT = 2  # output above the high-water mark: producers wait, and so does input (R26)
    DRAIN = 4  # the host is draining: what the client sends now stays unread (R29)
    HELD = 8  # a request waits unanswered: its socket is not read meanwhile (HTTP)
    BACKLOG = 16  # answers are owed and pipelined requests wait behind them: read no further (HTTP)


class ReadPauses:
    """The reasons reading is paused; ``on_edge(paused)`` runs when the first is added or the last removed."""

    __slots__ = ("_close", "_on_edge", "reasons")

    def __init__(self, on_edge: Callable[[bool], None], close: Callable[[], None]) -> None:
        self.reasons = Pause(0)
        self._on_edge = on_edge
        self._close = close

    @property
    def paused(self) -> bool:
        return bool(self.reasons)

    def hold(self, reason: Pause) -> None:
        before = self.reasons
        self.reasons = before | reason
        if not before:
            self._on_edge(True)

    def release(self, reason: Pause) -> None:
        before = self.reasons
        if not before & reason:
            return
        self.reasons = before & ~reason
        if not self.reasons:
            self._on_edge(False)

    def set(self, reason: Pause, on: bool) -> None:
        if on:
            self.hold(reason)
        else:
            self.release(reason)

    # -- ReadControl, for the Connection ------------------------------------------------------------
    def pause_reading(self) -> None:
        self.hold(Pause.INBOX)

    def resume_reading(self) -> None:
        self.release(Pause.INBOX)

    def close(self) -> None:
        self._close()
