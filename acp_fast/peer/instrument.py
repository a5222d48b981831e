"""The one seam through which a connection is watched: metrics, tracing, or both chained.

A Connection holds one ``Instrument`` in ``Connection.instrument``, None while
nothing watches it; then none of this costs anything beyond that attribute's
test at the points below. While one is set, the connection makes its incoming
requests as ``InstrumentedRequest`` (peer/incoming.py) and calls it where the
events happen, never by replacing a method on a live object:

- a read was framed: ``at = clock()``, once per read. That is the arrival time
  of every request the read delivered, so one clock read serves a pipelined
  chunk, and a request that waited in the inbox behind another is timed with
  its wait;
- a request came in: ``request_in(req)``, only when ``sees_arrivals`` (tracing
  opens a span; metrics need no call, the arrival time is on the request);
- its answer was written: ``answered(req, result)``, or ``failed(req, exc)``
  for an error answer (a refusal is a ``ServerBusy`` with its typed ``reason``).
  An instrument with a ``timer`` has each result's ``(method, arrived)`` given
  to it first, and ``answered`` called only when it returns True: the metrics'
  compiled timer records an answer with no Python call on the way;
- the first cancel of its job arrived: ``cancelled(req)`` (and after it, every
  further one);
- a bad line was answered: ``bad_line(code)``;
- a prompt turn runs: ``turn(prompt)`` wraps the agent's ``prompt`` for that
  turn (``run_turn`` is what the agent layer calls);
- a request is sent to the peer: ``outgoing(method, params)`` gives the params
  to send (tracing adds its context to ``_meta``).

Every hook runs on the event loop, inside the answer's or the read's call, so
it must be quick and must not raise.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

#: An agent's ``prompt``: keyword arguments in, the turn's result out.
Prompt = Callable[..., Awaitable[Any]]
#: ``Instrument.timer``: ``(method, arrived)`` of an answered request in, whether to call ``answered`` out.
Timer = Callable[[str, float], bool]


class Watched(Protocol):
    """What an instrument reads of an incoming request (``InstrumentedRequest``)."""

    id: str | int
    method: str
    params: Any
    #: When the read that delivered it was framed (the instrument's clock).
    arrived: float
    #: When its first cancel arrived; 0.0 until then.
    cancelled_at: float


class Holder(Protocol):
    """What holds an instrument: a Connection."""

    instrument: Instrument | None


class Instrument:
    """Watches one connection. Every hook does nothing here: an instrument overrides the ones it needs."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        sees_arrivals: bool = False,
        timer: Timer | None = None,
    ) -> None:
        #: The clock of ``at`` and of ``Watched.cancelled_at``; one per process for every start and end.
        self.clock = clock
        #: When the connection's latest read was framed.
        self.at = clock()
        #: Whether ``request_in`` is called for each request (a call per request saved when not). An
        #: instance attribute, not a class one: read per request, it is found without a class lookup.
        self.sees_arrivals = sees_arrivals
        #: Called with each result's ``(method, arrived)`` instead of ``answered``, which follows only
        #: when it returns True. A compiled one (the metrics' ``Timings.since``) records an answer
        #: without a Python call; None: every result goes to ``answered``.
        self.timer = timer

    def request_in(self, req: Watched) -> None:
        """A request came in (its ``arrived`` is set); called only when ``sees_arrivals``."""

    def answered(self, req: Watched, result: Any) -> None:
        """Its result was written (and ``timer``, if there is one, asked for this call)."""

    def failed(self, req: Watched, exc: BaseException) -> None:
        """Its error answer was written; ``exc`` is what was answered (``from_exception`` gives the code)."""

    def cancelled(self, req: Watched) -> None:
        """A cancel of its job arrived (``cancelled_at`` holds the first one's time)."""

    def bad_line(self, code: int) -> None:
        """A line that was no request was answered with the error ``code`` (-32700, -32600, ...)."""

    def turn(self, prompt: Prompt) -> Prompt:
        """What runs a prompt turn instead of ``prompt``: its start and its end are the wrapper's."""
        return prompt

    def outgoing(self, method: str, params: Any) -> Any:
        """The params of a request about to be sent to the peer."""
        return params


class Chain(Instrument):
    """Two instruments on one connection (metrics, then tracing): each hook calls both, in that order."""

    def __init__(self, first: Instrument, second: Instrument) -> None:
        super().__init__(first.clock, first.sees_arrivals or second.sees_arrivals)
        self.first = first
        self.second = second
        self.both = (first, second)

    def request_in(self, req: Watched) -> None:
        if self.first.sees_arrivals:
            self.first.request_in(req)
        if self.second.sees_arrivals:
            self.second.request_in(req)

    def answered(self, req: Watched, result: Any) -> None:
        for each in self.both:
            timer = each.timer
            if timer is None or timer(req.method, req.arrived):
                each.answered(req, result)

    def failed(self, req: Watched, exc: BaseException) -> None:
        self.first.failed(req, exc)
        self.second.failed(req, exc)

    def cancelled(self, req: Watched) -> None:
        self.first.cancelled(req)
        self.second.cancelled(req)

    def bad_line(self, code: int) -> None:
        self.first.bad_line(code)
        self.second.bad_line(code)

    def turn(self, prompt: Prompt) -> Prompt:
        return self.second.turn(self.first.turn(prompt))

    def outgoing(self, method: str, params: Any) -> Any:
        return self.second.outgoing(method, self.first.outgoing(method, params))


def attach(holder: Holder, instrument: Instrument) -> None:
    """Watch ``holder`` with ``instrument`` too (before it reads anything): chained after any already there."""
    present = holder.instrument
    holder.instrument = instrument if present is None else Chain(present, instrument)


def run_turn(instrument: Instrument | None, prompt: Prompt, kwargs: dict[str, Any]) -> Awaitable[Any]:
    """Start a prompt turn's body: ``prompt(**kwargs)``, through ``instrument.turn`` when one watches."""
    if instrument is None:
        return prompt(**kwargs)
    return instrument.turn(prompt)(**kwargs)


__all__ = ["Chain", "Holder", "Instrument", "Prompt", "Timer", "Watched", "attach", "run_turn"]
