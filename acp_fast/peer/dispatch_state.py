"""The connection's state machines: its lifecycle, what the dispatch loop does, what the read side does.

Every change of the dispatch loop's state goes through ``dispatch_next`` and
every change of the read side's through ``input_next``; both raise
``DispatchStateError`` on a (state, event) pair their table does not allow
(docs/ARCHITECTURE.md, "Dispatch states"). Kept apart from the Connection so
the tables read as one page.
"""

from __future__ import annotations

import enum


class State(enum.Enum):
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"


#: The lifecycle: OPEN -> DRAINING -> CLOSED.
TRANSITIONS = {
    State.OPEN: {State.DRAINING},
    State.DRAINING: {State.CLOSED},
    State.CLOSED: set[State](),
}


# -- the dispatch states ------------------------------------------------------------------
# Two small machines in the manner of h11's ``_state.py``: what the dispatch loop
# is doing, and what the read side is doing. They change independently (an
# inbox fills or the input ends whatever the loop is doing), so one enum of
# their product would only spell the same table out eight times. Every change
# goes through ``dispatch_next``/``input_next``, which raise on a (state,
# event) pair the tables do not allow. Members hash by identity: the lookups
# stay C-level (Enum's own ``__hash__`` is Python code).


class DispatchState(enum.Enum):
    """What the dispatch loop is doing (docs/ARCHITECTURE.md, "Dispatch states")."""

    __hash__ = object.__hash__

    RUNNING = "running"  # the dispatch task runs: draining the inbox, or inside a handler
    PARKED = "parked"  # it awaits input with an empty inbox: a read may dispatch inline
    BATCH = "batch"  # still parked; lines of a read are queued for its feed_end (or _end_batch)
    INLINE = "inline"  # a read callback drains the inbox as the dispatch task (inline.first_step)
    HANDOFF = "handoff"  # that drain suspended in a handler: the dispatch task is woken to resume it
    STRAY = "stray"  # parked, with a cancel a handler asked of the dispatch task and left unused
    STOPPING = "stopping"  # run() was cancelled: every cancel is the connection's, not a handler's
    DONE = "done"  # the loop ended (EOF and an empty inbox, or stopped): the shutdown runs


class DispatchEvent(enum.Enum):
    __hash__ = object.__hash__

    PARK = "park"  # the loop waits for input
    PARK_STRAY = "park_stray"  # ... while a cancel of its task is outstanding
    WAKE = "wake"  # the loop task resumes from its wait
    QUEUE = "queue"  # the first line of a read is queued while parked
    FEED_END = "feed_end"  # that read is fully framed
    INLINE = "inline"  # the read callback starts the drain
    RETURN = "return"  # the inline drain finished (or could not start)
    RETURN_STRAY = "return_stray"  # ... and a handler in it cancelled the parked task
    SUSPEND = "suspend"  # the inline drain suspended in a handler
    STOP = "stop"  # run() was cancelled
    END = "end"  # the loop returned or raised


class InputState(enum.Enum):
    """What the read side is doing: reading, paused by a full inbox (R26), or ended (EOF)."""

    __hash__ = object.__hash__

    READING = "reading"
    PAUSED = "paused"
    ENDED = "ended"


class InputEvent(enum.Enum):
    __hash__ = object.__hash__

    PAUSE = "pause"  # the inbox is full
    RESUME = "resume"  # the loop took it down to half
    EOF = "eof"  # the read side ended or the write side failed


class DispatchStateError(RuntimeError):
    """A (state, event) pair the transition table does not allow: a bug in the dispatch loop."""


_RUNNING = DispatchState.RUNNING
_PARKED = DispatchState.PARKED
_BATCH = DispatchState.BATCH
_INLINE = DispatchState.INLINE
_HANDOFF = DispatchState.HANDOFF
_STRAY = DispatchState.STRAY
_STOPPING = DispatchState.STOPPING
_DONE = DispatchState.DONE
_E = DispatchEvent
_READING = InputState.READING
_PAUSED = InputState.PAUSED
_ENDED = InputState.ENDED

#: Every allowed dispatch change: (state, event) -> state. END is allowed from every live state.
DISPATCH_TRANSITIONS: dict[DispatchState, dict[DispatchEvent, DispatchState]] = {
    _RUNNING: {_E.PARK: _PARKED, _E.PARK_STRAY: _STRAY, _E.STOP: _STOPPING},
    _PARKED: {_E.QUEUE: _BATCH, _E.INLINE: _INLINE, _E.WAKE: _RUNNING, _E.STOP: _STOPPING},
    _BATCH: {_E.FEED_END: _PARKED, _E.WAKE: _RUNNING, _E.STOP: _STOPPING},
    _INLINE: {_E.RETURN: _PARKED, _E.RETURN_STRAY: _STRAY, _E.SUSPEND: _HANDOFF},
    _HANDOFF: {_E.WAKE: _RUNNING, _E.STOP: _STOPPING},
    _STRAY: {_E.WAKE: _RUNNING, _E.STOP: _STOPPING},
    # A handler that swallows the stop's cancel lets the loop go on serving; it stays stopping.
    _STOPPING: {_E.PARK: _STOPPING, _E.PARK_STRAY: _STOPPING, _E.WAKE: _STOPPING, _E.STOP: _STOPPING},
    _DONE: {},
}
for _state, _events in DISPATCH_TRANSITIONS.items():
    if _state is not _DONE:
        _events[_E.END] = _DONE

#: Every allowed input change: (state, event) -> state.
INPUT_TRANSITIONS: dict[InputState, dict[InputEvent, InputState]] = {
    _READING: {InputEvent.PAUSE: _PAUSED, InputEvent.EOF: _ENDED},
    _PAUSED: {InputEvent.RESUME: _READING, InputEvent.EOF: _ENDED},
    _ENDED: {InputEvent.EOF: _ENDED},  # the write side failing after EOF ends it again
}


def dispatch_next(state: DispatchState, event: DispatchEvent) -> DispatchState:
    new = DISPATCH_TRANSITIONS[state].get(event)
    if new is None:
        raise DispatchStateError(f"illegal dispatch transition: {event.name} in {state.name}")
    return new


def input_next(state: InputState, event: InputEvent) -> InputState:
    new = INPUT_TRANSITIONS[state].get(event)
    if new is None:
        raise DispatchStateError(f"illegal input transition: {event.name} in {state.name}")
    return new



__all__ = [
    "DISPATCH_TRANSITIONS",
    "INPUT_TRANSITIONS",
    "TRANSITIONS",
    "DispatchEvent",
    "DispatchState",
    "DispatchStateError",
    "InputEvent",
    "InputState",
    "State",
    "dispatch_next",
    "input_next",
]
