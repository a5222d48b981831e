"""A request from the peer, answered exactly once, and the inbox's item for a line that gets an error.

``IncomingRequest`` is what handlers receive. While an instrument watches the
connection (peer/instrument.py) the connection makes ``InstrumentedRequest``
instead, which carries its arrival time; the answer paths below call the
instrument themselves, so an answer costs no extra call while nothing watches.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..wire import jsonrpc
from ..wire.errors import AcpError, InternalError, from_exception
from ..wire.jsonrpc import JsonId
from ..wire.routes import ANSWER, ERROR
from .instrument import Instrument
from .writer import Writer

log = logging.getLogger("acp_fast.peer.connection")


class Owner(Protocol):
    """What an incoming request needs of its connection (the Connection)."""

    writer: Writer
    instrument: Instrument | None
    _incoming: dict[str | int, IncomingRequest]


class IncomingRequest:
    """A request from the peer; answer it exactly once with respond/respond_error."""

    __slots__ = ("_conn", "answered", "id", "method", "params")

    def __init__(self, conn: Owner, id: str | int, method: str, params: Any) -> None:
        self._conn = conn
        self.id = id
        self.method = method
        self.params = params
        self.answered = False

    def respond(self, result: Any) -> None:
        try:
            data = jsonrpc.encode_result(self.id, result)
        except TypeError as exc:  # orjson.JSONEncodeError: a set, an int past 64 bits, an object
            log.error("the result of %s (id %r) cannot be encoded as JSON", self.method, self.id, exc_info=exc)
            self.respond_error(unencodable(self.method, "result", exc))
            return
        # _settle, inline: this runs once per answered request.
        if self.answered:
            log.warning("second answer to request %r (%s) dropped", self.id, self.method)
            return
        self.answered = True
        conn = self._conn
        conn._incoming.pop(self.id, None)
        writer = conn.writer
        if writer.routed:
            writer.route(ANSWER, self.id, None)
        writer.write(data)
        if conn.instrument is not None:  # then this is an InstrumentedRequest
            instrument = conn.instrument
            timer = instrument.timer
            if timer is None or timer(self.method, self.arrived):  # type: ignore[attr-defined]
                instrument.answered(self, result)  # type: ignore[arg-type]

    def respond_error(self, exc: BaseException) -> None:
        error = from_exception(exc)
        try:
            data = jsonrpc.encode_error(self.id, error)
        except TypeError as enc:  # the error's ``data`` is not JSON
            log.error("the error data of %s (id %r) cannot be encoded as JSON", self.method, self.id, exc_info=enc)
            data = jsonrpc.encode_error(self.id, unencodable(self.method, "error data", enc))
        if self._settle():
            writer = self._conn.writer
            if writer.routed:
                writer.route(ERROR, self.id, None)
            writer.write(data)
            if self._conn.instrument is not None:
                self._conn.instrument.failed(self, exc)  # type: ignore[arg-type]

    def cancel_received(self) -> None:
        """A cancel of this request's job arrived (an ``InstrumentedRequest`` tells its instrument)."""

    @property
    def instrument(self) -> Instrument | None:
        """What watches this request's connection (peer/instrument.py), if anything: a turn runs through it."""
        return self._conn.instrument

    def flush(self) -> None:
        """Send the answer now instead of at the end of the loop turn."""
        self._conn.writer.flush()

    def _settle(self) -> bool:
        if self.answered:
            log.warning("second answer to request %r (%s) dropped", self.id, self.method)
            return False
        self.answered = True
        self._conn._incoming.pop(self.id, None)
        return True

    def __repr__(self) -> str:
        return f"IncomingRequest(id={self.id!r}, method={self.method!r})"


class InstrumentedRequest(IncomingRequest):
    """An incoming request on a watched connection: it knows when it arrived and when its first cancel came."""

    __slots__ = ("arrived", "cancelled_at")

    def __init__(self, conn: Owner, id: str | int, method: str, params: Any) -> None:
        self._conn = conn  # IncomingRequest.__init__, inline: one frame less per request
        self.id = id
        self.method = method
        self.params = params
        self.answered = False
        self.cancelled_at = 0.0
        self.arrived = conn.instrument.at  # type: ignore[union-attr]  # the connection checked it

    def cancel_received(self) -> None:
        instrument: Instrument = self._conn.instrument  # type: ignore[assignment]
        if not self.cancelled_at:
            self.cancelled_at = instrument.clock()
        instrument.cancelled(self)


class AnnouncedRequest(InstrumentedRequest):
    """An instrumented request whose arrival is also told to the instrument (``sees_arrivals``: tracing)."""

    __slots__ = ()

    def __init__(self, conn: Owner, id: str | int, method: str, params: Any) -> None:
        InstrumentedRequest.__init__(self, conn, id, method, params)
        conn.instrument.request_in(self)  # type: ignore[union-attr]


class BadLine:
    """An inbox item for a line that gets an error instead of dispatch."""

    __slots__ = ("error", "id")

    def __init__(self, error: AcpError, id: JsonId) -> None:
        # Only the message and code are answered. The traceback would hold the
        # frame that caught the error, and that frame this item: a reference
        # cycle per bad line, left for the cyclic collector. The chained error
        # (the pure-Python decoder's JSON error) holds the decoder's frame, and
        # through it the line and the read chunk it is a view of.
        self.error = error.with_traceback(None)
        self.error.__context__ = None
        self.id = id


def unencodable(method: str, what: str, exc: TypeError) -> InternalError:
    """-32603 for a value orjson refused; its message names the offending type (R04, R24)."""
    err = InternalError(
        f"Internal error: the {what} of {method} cannot be encoded as JSON ({exc})",
        {"error": type(exc).__name__},
    )
    err.__cause__ = exc
    return err


__all__ = ["AnnouncedRequest", "BadLine", "IncomingRequest", "InstrumentedRequest", "Owner"]
