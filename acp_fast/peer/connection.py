"""The generic JSON-RPC peer: one dispatch loop, ordered handlers, spawn (R18-R21, R24).

Theory of operation
-------------------
Bytes arrive through ``ReadProtocol`` and are framed into lines, which the
Connection decodes immediately (the read buffer is reused afterwards) and
appends to a bounded inbox. Bad lines become error items in the same inbox,
so every answer leaves in arrival order. When the inbox is full, reading from
the transport pauses: a flooding peer is slowed by its own pipe.

One task, the dispatch loop, takes inbox items one at a time (R18):

- a request or notification is offered to the registered handlers in order
  until one claims it; an ordered handler holds the loop until it returns
  (R19). A request no handler claims gets -32601; a notification is ignored.
- a response is routed to its PendingRequest; a result callback registered
  before that moment runs on the loop as a barrier (R20).

Work that must not hold the loop is started with ``spawn`` (R21), or by the
ACP layer's background pool. Awaiting a PendingRequest from the loop raises
DeadlockError instead of hanging.

Whatever a handler raises is answered once and the loop goes on (R24); only
KeyboardInterrupt, SystemExit and GeneratorExit pass through. Handlers run as
the dispatch task, in its context, inline or not: a cancel asked of that task
while a handler runs is the handler's (-32800); cancelling ``run`` itself, or
the dispatch task while it waits for input, stops the connection.

What the loop is doing is one ``DispatchState`` (what the read side is doing,
one ``InputState``), changed only through the transition tables below; an
illegal change raises ``DispatchStateError`` (docs/ARCHITECTURE.md, "Dispatch
states").

Lifecycle is OPEN -> DRAINING -> CLOSED. EOF on the read side (or a failed
write side) ends the loop after the inbox is drained; then the shutdown hooks
run (the ACP layer cancels prompts and applies the grace period, R13-R14),
pending outgoing requests fail with ConnectionClosed, spawned tasks are
cancelled after the grace period and joined, any request still unanswered
gets an error (every request gets exactly one response), and the writer
flushes and closes.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..wire import jsonrpc
from ..wire.errors import (
    AcpError,
    ConnectionClosed,
    InternalError,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    ServerBusy,
    from_exception,
)
from ..wire.frames import Oversized, Truncated
from ..wire.jsonrpc import JsonId, Notification, Request, Response
from ..wire.limits import Limits
from ..wire.routes import ANSWER, ERROR, NOTIFICATION, REQUEST
from . import inline
from .flow import ReadControl
from .pending import PendingRequest
from .writer import Writer

log = logging.getLogger(__name__)


class State(enum.Enum):
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"


_TRANSITIONS = {
    State.OPEN: {State.DRAINING},
    State.DRAINING: {State.CLOSED},
    State.CLOSED: set[State](),
}


# -- the dispatch states ------------------------------------------------------------------
# Two small machines in the manner of h11's ``_state.py``: what the dispatch loop
# is doing, and what the read side is doing. They change independently (an
# inbox fills or the input ends whatever the loop is doing), so one enum of
# their product would only spell the same table out eight times. Every change
# goes through ``_dispatch_next``/``_input_next``, which raise on a (state,
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


def _dispatch_next(state: DispatchState, event: DispatchEvent) -> DispatchState:
    new = DISPATCH_TRANSITIONS[state].get(event)
    if new is None:
        raise DispatchStateError(f"illegal dispatch transition: {event.name} in {state.name}")
    return new


def _input_next(state: InputState, event: InputEvent) -> InputState:
    new = INPUT_TRANSITIONS[state].get(event)
    if new is None:
        raise DispatchStateError(f"illegal input transition: {event.name} in {state.name}")
    return new


class IncomingRequest:
    """A request from the peer; answer it exactly once with respond/respond_error."""

    __slots__ = ("_conn", "answered", "id", "method", "params")

    def __init__(self, conn: Connection, id: str | int, method: str, params: Any) -> None:
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
            self.respond_error(_unencodable(self.method, "result", exc))
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

    def respond_error(self, exc: BaseException) -> None:
        error = from_exception(exc)
        try:
            data = jsonrpc.encode_error(self.id, error)
        except TypeError as enc:  # the error's ``data`` is not JSON
            log.error("the error data of %s (id %r) cannot be encoded as JSON", self.method, self.id, exc_info=enc)
            data = jsonrpc.encode_error(self.id, _unencodable(self.method, "error data", enc))
        if self._settle():
            self._conn._write(data, ERROR, self.id)

    def cancel_received(self) -> None:
        """The first cancel of this request's job arrived; a metrics subclass notes the time (observability/)."""

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


RequestHandler = Callable[[IncomingRequest], Awaitable[bool | None]]
NotificationHandler = Callable[[Notification], Awaitable[bool | None]]
SyncNotificationHandler = Callable[[Notification], None]
ShutdownHook = Callable[[], Awaitable[None]]


class _BadLine:
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


_Item = Request | Notification | Response | _BadLine

#: Exceptions a handler may raise that end the process instead of being answered (R24).
_FATAL = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _session_of(params: Any) -> str | None:
    """The session a message is about, for a transport that sorts output by session (``Writer.route``)."""
    session = params.get("sessionId") if type(params) is dict else None
    return session if type(session) is str else None


def _unencodable(method: str, what: str, exc: TypeError) -> InternalError:
    """-32603 for a value orjson refused; its message names the offending type (R04, R24)."""
    err = InternalError(
        f"Internal error: the {what} of {method} cannot be encoded as JSON ({exc})",
        {"error": type(exc).__name__},
    )
    err.__cause__ = exc
    return err

class Meter:
    """What metrics hang on a connection (observability/metrics.py); None while they are off.

    ``at`` is when the latest read was framed: ``feed_end`` reads ``clock``
    once per read, and the requests that read delivered are timed from it, so
    one clock read serves a whole pipelined chunk and a request that waited
    in the inbox behind another is timed with its wait. ``bad_input`` is
    called with the code of each bad line answered (-32700, -32600, ...).
    """

    __slots__ = ("at", "bad_input", "clock")

    def __init__(self, clock: Callable[[], float], bad_input: Callable[[int], None]) -> None:
        self.clock = clock
        self.at = clock()
        self.bad_input = bad_input


class Connection:
    """A JSON-RPC peer over one line transport, agent or client side alike."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: Writer,
        limits: Limits | None = None,
        name: str = "acp",
    ) -> None:
        self.loop = loop
        self.writer = writer
        self.limits = limits or Limits()
        self.name = name
        self.state = State.OPEN
        self._request_handlers: list[tuple[str, RequestHandler]] = []
        self._notification_handlers: list[tuple[str, NotificationHandler]] = []
        self._sync_notifications: dict[str, SyncNotificationHandler] = {}
        #: The dispatch loop's state; changed only through DISPATCH_TRANSITIONS.
        self.dispatch_state = _RUNNING
        #: The read side's state; changed only through INPUT_TRANSITIONS.
        self.input_state = _READING
        self._handoff: inline.Resume | None = None  # HANDOFF's drain (STOPPING's, if stopped meanwhile)
        self.inline_dispatch = inline.AVAILABLE
        #: Send ``$/cancel_request`` for an outgoing request nobody awaits any more.
        self.cancel_abandoned_requests = True
        self._shutdown_hooks: list[ShutdownHook] = []
        self._inbox: deque[_Item] = deque()
        self._max_inbox = self.limits.max_inbox  # Limits is frozen; read once per line
        self._wakeup: asyncio.Future[None] | None = None
        self._reader: ReadControl | None = None
        self._incoming: dict[str | int, IncomingRequest] = {}
        self._pending: dict[int, PendingRequest] = {}
        self._next_id = 0
        # Each spawned task, with the callback to run when it ends (spawn's on_done).
        self._spawned: dict[asyncio.Task[Any], Callable[[asyncio.Task[Any]], None] | None] = {}
        self._loop_task: asyncio.Task[Any] | None = None
        # The dispatch task's own context: every handler runs in it, inline or not.
        self._context = contextvars.copy_context()
        self._current_handler: str | None = None
        #: Set while some running code must not reach the peer any more (a body answered for, R30):
        #: called on every outgoing message, which is dropped (and counted) when it returns True.
        self.drop_if: Callable[[], bool] | None = None
        #: Messages dropped by ``drop_if``.
        self.dropped_late = 0
        #: What incoming requests are made as: metrics swap in a timing subclass (observability/), else this.
        self.request_type: type[IncomingRequest] = IncomingRequest
        #: Set while metrics are on. One attribute for all of their hooks: on CPython 3.11 each
        #: further attribute on this object slows every request, metrics on or off.
        self.meter: Meter | None = None
        writer.on_failure = self._writer_failed

    # -- registration ------------------------------------------------------------
    def on_receive_request(self, handler: RequestHandler, name: str | None = None) -> None:
        """Add an ordered request handler; return False from it to pass the request on."""
        self._request_handlers.append((name or _name_of(handler), handler))

    def on_receive_notification(
        self, handler: NotificationHandler, name: str | None = None
    ) -> None:
        """Add an ordered notification handler; return False to pass it on."""
        self._notification_handlers.append((name or _name_of(handler), handler))

    def on_receive_notification_sync(self, method: str, handler: SyncNotificationHandler) -> None:
        """Claim every ``method`` notification with a synchronous ordered handler.

        It keeps its place in the order (R01) like any handler, but when the
        loop is parked with an empty inbox it runs straight from the read
        callback, a loop turn sooner. That is the path of ``session/cancel``:
        the cancel reaches the prompt task in the same turn its line arrived.
        """
        self._sync_notifications[method] = handler

    def on_shutdown(self, hook: ShutdownHook) -> None:
        """Run ``hook`` after the read side ended, before pending work is failed."""
        self._shutdown_hooks.append(hook)

    # -- LineSink (called synchronously by ReadProtocol) ---------------------------
    def reader_attached(self, reader: ReadControl) -> None:
        self._reader = reader

    def feed_line(self, line: bytes | memoryview) -> None:
        try:
            item: _Item = jsonrpc.decode(line)
        except jsonrpc.InvalidMessage as exc:
            item = _BadLine(exc, exc.id)
        except AcpError as exc:  # ParseError
            item = _BadLine(exc, None)
        inbox = self._inbox
        state = self.dispatch_state
        if state is _PARKED and not inbox and type(item) is Notification:
            handler = self._sync_notifications.get(item.method)
            if handler is not None:
                self._run_sync_notification(handler, item)
                return
        # _push, inline: this runs once per incoming line.
        inbox.append(item)
        if len(inbox) >= self._max_inbox and self.input_state is _READING:
            self._pause_reader()
        if state is _BATCH:
            return
        if state is _PARKED and self.inline_dispatch:  # feed_end dispatches it, or _end_batch a turn later
            self.dispatch_state = _dispatch_next(state, _E.QUEUE)
            self.loop.call_soon(self._end_batch)
        else:
            self._wake()

    def _end_batch(self) -> None:
        if self.dispatch_state is _BATCH:  # the transport never said where its read ended
            self.feed_end()

    def feed_end(self) -> None:
        """A read chunk is fully framed: dispatch it inline if the loop is parked, then flush."""
        meter = self.meter
        if meter is not None:
            meter.at = meter.clock()
        state = self.dispatch_state
        if state is _BATCH:
            self.dispatch_state = _dispatch_next(state, _E.FEED_END)
            if self._inbox:
                if self.inline_dispatch:
                    self._run_inline()
                else:  # switched off since the batch opened
                    self._wake()
            state = self.dispatch_state
        if state is _PARKED or state is _STRAY:  # nothing is left running: answers leave now, coalesced
            self.writer.flush()

    def _run_inline(self) -> None:
        """Drain the inbox right here, in the read callback, as the dispatch task.

        Only when the loop is parked, so the order is exactly what the loop
        would have produced (R18, R19), a loop turn sooner (see inline.py). If
        a handler suspends, the dispatch task resumes the drain where it
        stopped; later lines wait in the inbox meanwhile.
        """
        wakeup = self._wakeup
        assert self._loop_task is not None and wakeup is not None
        if wakeup.cancelled():  # a cancel is on its way to the loop task: it lands first
            return
        self.dispatch_state = _dispatch_next(self.dispatch_state, _E.INLINE)
        try:
            resume = inline.first_step(self._drain_inbox(), self._context, self._loop_task, self.loop)
        except inline.Reentered:  # fed from inside the dispatch context itself: the loop takes it
            self.dispatch_state = _dispatch_next(self.dispatch_state, _E.RETURN)
            self._wake()
            return
        except BaseException:  # only the fatal ones pass a handler (R24); the loop stays usable
            self.dispatch_state = _dispatch_next(self.dispatch_state, _E.RETURN)
            raise
        if resume is None:
            self.dispatch_state = _dispatch_next(
                self.dispatch_state, _E.RETURN_STRAY if wakeup.cancelled() else _E.RETURN
            )
            return
        self._handoff = resume
        self.dispatch_state = _dispatch_next(self.dispatch_state, _E.SUSPEND)
        self._wake()

    def _run_sync_notification(self, handler: SyncNotificationHandler, note: Notification) -> None:
        try:
            handler(note)
        except _FATAL:
            raise
        except BaseException as exc:  # never answered (R06)
            _log_handler_failure(_name_of(handler), note.method, exc)

    def feed_oversized(self, event: Oversized) -> None:
        rid = jsonrpc.recover_id(event.head)
        log.warning(
            "discarded a line of %d bytes (limit %d); id %r",
            event.size,
            self.limits.max_line_bytes,
            rid,
        )
        if rid is not None:
            err = InvalidRequest(
                f"Invalid request: line of {event.size} bytes exceeds the limit of "
                f"{self.limits.max_line_bytes} bytes"
            )
            self._push(_BadLine(err, rid))

    def feed_truncated(self, event: Truncated) -> None:
        rid = jsonrpc.recover_id(event.head)
        log.warning("input ended inside a line of %d bytes; id %r", event.size, rid)
        if rid is not None:
            self._push(_BadLine(ParseError("Parse error: input ended inside this message"), rid))

    def feed_eof(self, exc: BaseException | None) -> None:
        if exc is not None:
            log.warning("read side failed: %r", exc)
        self.input_state = _input_next(self.input_state, InputEvent.EOF)
        self._wake()
        self.writer.wake()  # a dispatch held for output stops holding (_hold_for_output)

    def _push(self, item: _Item) -> None:
        """Queue an item (feed_line does the same inline for each decoded line)."""
        self._inbox.append(item)
        if len(self._inbox) >= self._max_inbox and self.input_state is _READING:
            self._pause_reader()
        state = self.dispatch_state
        if state is _BATCH:
            return
        if state is _PARKED and self.inline_dispatch:
            self.dispatch_state = _dispatch_next(state, _E.QUEUE)
            self.loop.call_soon(self._end_batch)
        else:
            self._wake()

    def _pause_reader(self) -> None:
        """The inbox is full: no more lines until the dispatch loop took half of them."""
        self.input_state = _input_next(self.input_state, InputEvent.PAUSE)
        if self._reader is not None:
            self._reader.pause_reading()

    def _wake(self) -> None:
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    # -- the dispatch loop ------------------------------------------------------------
    def in_dispatch_loop(self) -> bool:
        task = self._loop_task
        return task is not None and asyncio.current_task() is task

    def current_handler_name(self) -> str:
        return repr(self._current_handler or "<none>")

    async def run(self) -> None:
        """Serve until EOF or transport failure, then shut down in order.

        The dispatch loop is a task of its own, created with the connection's
        context, so the inline path can run handlers in that very context
        (asyncio offers no way to reach a running task's context before 3.12).
        Cancelling ``run`` itself stops the connection: the dispatch task is
        cancelled in turn, and that cancel is not taken for the running
        handler's (see ``_absorb``); the shutdown sequence still runs.
        """
        task = self.loop.create_task(self._serve(), name=f"{self.name}.dispatch", context=self._context)
        self._loop_task = task
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            self.dispatch_state = _dispatch_next(self.dispatch_state, _E.STOP)
            task.cancel()
            await asyncio.wait({task})
            raise

    async def _serve(self) -> None:
        self._loop_task = asyncio.current_task()  # already, if a task factory starts tasks eagerly
        try:
            await self._dispatch_loop()
        finally:
            self.dispatch_state = _dispatch_next(self.dispatch_state, _E.END)
            await self._shutdown()

    async def _dispatch_loop(self) -> None:
        inbox = self._inbox
        task = self._loop_task
        assert task is not None
        while True:
            if not inbox:
                if self.input_state is _ENDED:
                    return
                # The batch is done: answers leave now, not a loop turn later.
                self.writer.flush()
                self._wakeup = self.loop.create_future()
                # A cancel asked while a handler ran on this task and left unused lands here: STRAY.
                self.dispatch_state = _dispatch_next(
                    self.dispatch_state, _E.PARK_STRAY if task.cancelling() else _E.PARK
                )
                cancelled: asyncio.CancelledError | None = None
                try:
                    await self._wakeup
                except asyncio.CancelledError as exc:
                    cancelled = exc
                finally:
                    woke_from = self.dispatch_state
                    self.dispatch_state = _dispatch_next(woke_from, _E.WAKE)
                    self._wakeup = None
                handoff = self._handoff
                if handoff is not None:
                    # A cancel that lands while a handler started inline is suspended
                    # was aimed at that handler (asyncio.timeout, current_task().cancel()):
                    # it gets it at its await, as it would have on the queued path.
                    self._handoff = None
                    handoff.cancelled = cancelled
                    await handoff
                elif cancelled is not None:
                    if woke_from is not _STRAY:
                        raise cancelled  # cancelled from outside while parked (or stopping): stop
                    self._stray_cancel()
                continue
            await self._drain_inbox()

    async def _drain_inbox(self) -> None:
        """Dispatch queued items in order until none is left (R18)."""
        inbox = self._inbox
        writer = self.writer
        in_flight = self._incoming
        handlers = self._request_handlers
        resume_at = self.limits.max_inbox // 2
        make_request = self.request_type
        while inbox:
            if writer.paused and self.input_state is not _ENDED:
                await self._hold_for_output()
                continue
            item = inbox.popleft()
            if self.input_state is _PAUSED and len(inbox) <= resume_at:
                self.input_state = _input_next(_PAUSED, InputEvent.RESUME)
                if self._reader is not None:
                    self._reader.resume_reading()
            kind = type(item)
            if kind is Request:
                # _dispatch_request, inline: one coroutine less per request.
                req: Request = item  # type: ignore[assignment]
                rid = req.id
                if rid in in_flight:
                    self._duplicate_id(rid)
                    continue
                incoming = in_flight[rid] = make_request(self, rid, req.method, req.params)
                for name, handler in handlers:
                    self._current_handler = name
                    try:
                        claimed = await handler(incoming)
                    except _FATAL:
                        raise
                    except BaseException as exc:  # any other: answered, and the loop keeps serving (R24)
                        self._handler_failed(name, incoming, exc)
                        break
                    finally:
                        self._current_handler = None
                    if claimed is not False:
                        break
                else:
                    incoming.respond_error(MethodNotFound(f"Method not found: {req.method}", {"method": req.method}))
            elif kind is Notification:
                await self._dispatch_notification(item)  # type: ignore[arg-type]
            elif kind is Response:
                await self._route_response(item)  # type: ignore[arg-type]
            else:
                bad: _BadLine = item  # type: ignore[assignment]
                self._write(jsonrpc.encode_error(bad.id, bad.error), ERROR, bad.id)
                if self.meter is not None:
                    self.meter.bad_input(bad.error.code)

    async def _hold_for_output(self) -> None:
        """Dispatch nothing while stdout is above its high-water mark (R26).

        Answers and errors are output too, and only streaming producers wait
        in ``drain``: holding the dispatch here lets the inbox fill, and a full
        inbox pauses reading, so a client that sends without reading is
        slowed by its own pipe. Reading itself keeps going until then, so an
        EOF behind a streaming prompt is still seen; EOF ends the hold (the
        shutdown's flush has its own bound).
        """
        writer = self.writer
        log.debug("stdout is backed up: dispatch waits until the client reads")
        while writer.paused and self.input_state is not _ENDED:
            await writer.wait_flow()

    def _duplicate_id(self, rid: str | int) -> None:
        """A request reusing the id of one still in flight: answered -32600, the first one stands (R04)."""
        err = InvalidRequest(f"Invalid request: id {rid!r} is already in flight")
        self._write(jsonrpc.encode_error(rid, err), ERROR, rid)

    def _write(self, data: bytes, kind: int, rid: Any = None, params: Any = None) -> None:
        """Queue one encoded message with its route (``Writer.route``; the session is read from ``params``
        only for a routed writer). The per-message hot paths (an answer, a session update) inline this.
        """
        writer = self.writer
        if writer.routed:
            writer.route(kind, rid, _session_of(params))
        writer.write(data)

    def _handler_failed(self, name: str, incoming: IncomingRequest, exc: BaseException) -> None:
        """A request handler raised: answered with what it raised, logged (R24)."""
        error = self._absorb(exc)
        _log_handler_failure(name, incoming.method, error)
        incoming.respond_error(error)

    async def _dispatch_notification(self, note: Notification) -> None:
        sync_handler = self._sync_notifications.get(note.method)
        if sync_handler is not None:
            self._run_sync_notification(sync_handler, note)
            return
        for name, handler in self._notification_handlers:
            self._current_handler = name
            try:
                claimed = await handler(note)
            except _FATAL:
                raise
            except BaseException as exc:  # never answered (R06); logged with traceback
                _log_handler_failure(name, note.method, self._absorb(exc))
                return
            finally:
                self._current_handler = None
            if claimed is not False:
                return
        log.debug("ignored unknown notification %s", note.method)

    async def _route_response(self, resp: Response) -> None:
        pending = self._pending.pop(resp.id, None) if type(resp.id) is int else None
        if pending is None:
            log.warning("dropped a response for unknown request id %r", resp.id)
            return
        self._current_handler = f"result callback of {pending.method}"
        try:
            await pending._route(resp.result, resp.error)
        except _FATAL:
            raise
        except BaseException as exc:
            _log_handler_failure(self._current_handler, pending.method, self._absorb(exc))
        finally:
            self._current_handler = None

    def _absorb(self, exc: BaseException) -> BaseException:
        """What a handler's exception is answered with; a cancel asked of it stays with it.

        A handler runs as the dispatch task, so ``task.cancel()`` aimed at it
        (a timeout, a caller giving up) is counted on the dispatch task: that
        request is cancelled (-32800) and the count is taken back, so the loop
        keeps serving. A CancelledError nobody asked for is a bug like any
        other exception (-32603). Once ``run`` itself was cancelled, a
        cancellation is the connection's: it is raised on, and the shutdown
        answers the request like every other one left open.
        """
        if isinstance(exc, asyncio.CancelledError):
            if self.dispatch_state is _STOPPING:
                raise exc
            task = self._loop_task
            if task is not None and task.cancelling():
                task.uncancel()
                cancelled = RequestCancelled("Request cancelled: its handler was cancelled")
                cancelled.__cause__ = exc
                return cancelled
        return exc

    def _stray_cancel(self) -> None:
        """A cancel asked by a handler that returned before its next await reached the parked loop.

        (``current_task().cancel()`` with nothing after it.) No handler is
        left to take it, so the loop takes it back and keeps serving (R24). A
        cancel asked while the loop was already parked came from outside and
        stops the connection instead.
        """
        task = self._loop_task
        if task is not None and task.cancelling():
            task.uncancel()
        log.warning("a handler cancelled the dispatch task and returned; the cancel is dropped")

    # -- outgoing ---------------------------------------------------------------------
    def send_request(self, method: str, params: Any = None) -> PendingRequest:
        """Send a request now; consume the answer by awaiting or ``on_result``."""
        if self.input_state is _ENDED or self.state is not State.OPEN:
            raise ConnectionClosed(f"cannot send {method!r}: the connection is closed")
        if self.drop_if is not None and self.dropping():
            muted = PendingRequest(self, 0, method)
            muted._settle(None, RequestCancelled(f"{method!r} not sent: its turn was already answered"))
            return muted
        if len(self._pending) >= self.limits.max_pending_outgoing:
            raise ServerBusy(
                f"{len(self._pending)} outgoing requests are awaiting answers "
                f"(limit {self.limits.max_pending_outgoing})"
            )
        data = jsonrpc.encode_request(self._next_id + 1, method, params)  # raises before anything is held
        self._next_id += 1
        pending = PendingRequest(self, self._next_id, method)
        self._pending[pending.id] = pending
        self._write(data, REQUEST, pending.id, params)
        return pending

    def abandoned(self, pending: PendingRequest) -> None:
        """Every awaiter of ``pending`` was cancelled: ask the peer to stop working on it.

        ``$/cancel_request`` needs no capability (a peer that does not honour
        it ignores it) and the peer still answers once; that answer is dropped
        quietly when it comes. Off when ``cancel_abandoned_requests`` is False.
        """
        if self.cancel_abandoned_requests and self.state is State.OPEN and self.input_state is not _ENDED:
            self._write(jsonrpc.encode_notification("$/cancel_request", {"requestId": pending.id}), NOTIFICATION)

    def dropping(self) -> bool:
        """Whether the running code's output is to be dropped (``drop_if``); counts the drop."""
        gate = self.drop_if
        if gate is None or not gate():
            return False
        self.dropped_late += 1
        return True

    def send_notification(self, method: str, params: Any = None) -> None:
        """Queue a notification; it leaves with this loop turn's write.

        Never blocks, so it is usable from synchronous handlers (a cancel).
        A producer that streams follows it with ``await drain()`` (R26).
        """
        if self.drop_if is not None and self.dropping():
            return
        self._write(jsonrpc.encode_notification(method, params), NOTIFICATION, None, params)

    async def drain(self) -> None:
        """Wait while output is backed up above the high-water mark (R26); else return at once."""
        writer = self.writer
        if writer.must_wait:
            await writer.drain()

    def spawn(
        self,
        coro: Coroutine[Any, Any, Any],
        name: str | None = None,
        on_done: Callable[[asyncio.Task[Any]], None] | None = None,
    ) -> asyncio.Task[Any]:
        """Run work off the dispatch loop; owned, logged on failure, joined on shutdown.

        ``on_done(task)`` runs when it ends, after the failure is logged. It is
        the connection's own done callback that calls it: each done callback
        costs a loop turn's handle, and a session start per session/new
        made the second one about a tenth of that request.
        """
        if len(self._spawned) >= self.limits.max_spawned:
            coro.close()
            raise ServerBusy(
                f"{len(self._spawned)} spawned tasks are running (limit {self.limits.max_spawned})"
            )
        task = self.loop.create_task(coro, name=name or f"{self.name}.spawn")
        self._spawned[task] = on_done
        task.add_done_callback(self._spawned_done)
        return task

    def _spawned_done(self, task: asyncio.Task[Any]) -> None:
        on_done = self._spawned.pop(task, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("spawned task %s failed", task.get_name(), exc_info=exc)
        if on_done is not None:
            on_done(task)

    # -- shutdown -----------------------------------------------------------------------
    def _set_state(self, new: State) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise RuntimeError(f"illegal connection state change {self.state} -> {new}")
        self.state = new

    def _writer_failed(self, exc: BaseException | None) -> None:
        if self.writer.peer_gone:  # the client closed its end: a disconnect, not a fault
            log.debug("stdout closed by the peer (%r); shutting down", exc)
        else:
            log.warning("write side failed (%r); shutting down", exc)
        if self._reader is not None:
            self._reader.close()
        self._inbox.clear()
        self.feed_eof(None)

    def _fail_pending(self) -> None:
        """Settle every outgoing request as failed; a result callback that cannot be spawned is
        logged and skipped, never raised into the shutdown (R14)."""
        pending, self._pending = self._pending, {}
        for p in pending.values():
            try:
                p._fail(ConnectionClosed(f"connection closed before {p.method!r} was answered"))
            except Exception as exc:
                log.warning("result callback of %r (id %s) not run at shutdown: %s", p.method, p.id, exc)

    async def _shutdown(self) -> None:
        """Cancel, grace, abort, join, then a bounded flush (R13, R14).

        Spawned tasks share the hooks' deadline rather than getting a grace of
        their own after them, so the whole sequence takes at most grace +
        abort join + flush timeout.
        """
        self._set_state(State.DRAINING)
        limits = self.limits
        grace_end = self.loop.time() + limits.shutdown_grace_s
        join_end = grace_end + limits.abort_join_s
        # A hook that never returns must not hold the connection open: hooks get the
        # spawned tasks' deadline plus one more abort join, then are cut short.
        hooks_end = join_end + limits.abort_join_s
        # Nothing more will be read: no response can arrive for what we asked.
        self._fail_pending()
        for hook in self._shutdown_hooks:
            await self._run_shutdown_hook(hook, hooks_end)
        self._fail_pending()
        try:
            await self._join_spawned(grace_end, join_end)
        except Exception:
            log.exception("joining spawned tasks at shutdown failed")
        for incoming in list(self._incoming.values()):
            try:
                incoming.respond_error(ConnectionClosed("the agent shut down before answering"))
            except Exception:
                log.exception("answering %r at shutdown failed", incoming)
        try:
            await self.writer.close()
        except Exception:
            log.exception("closing the writer at shutdown failed")
        self._set_state(State.CLOSED)

    async def _join_spawned(self, grace_end: float, join_end: float) -> None:
        if self._spawned:
            _, alive = await asyncio.wait(set(self._spawned), timeout=_left(self.loop, grace_end))
            for task in alive:
                task.cancel()
            if alive:
                await asyncio.wait(alive, timeout=_left(self.loop, join_end))

    async def _run_shutdown_hook(self, hook: ShutdownHook, deadline: float) -> None:
        """One hook, bounded; whatever it raises is logged and the shutdown goes on.

        The hook runs in this task, so its first step (the agent's cancel of every
        turn) happens before anything woken by ``_fail_pending`` runs. Past the
        deadline a hook still gets that first step, so the hooks after a stuck
        one still do their quick work.
        """
        try:
            async with asyncio.timeout_at(deadline):
                await hook()
        except TimeoutError:
            log.error("shutdown hook %s did not finish by the shutdown deadline; cut short", _name_of(hook))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the shutdown itself is being cancelled
            log.error("shutdown hook %s was cancelled from inside", _name_of(hook))
        except Exception:
            log.exception("shutdown hook %s failed", _name_of(hook))

    # -- introspection for tests and leak checks ----------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        return {
            "inbox": len(self._inbox),
            "incoming": len(self._incoming),
            "pending": len(self._pending),
            "spawned": len(self._spawned),
        }


def _left(loop: asyncio.AbstractEventLoop, deadline: float) -> float:
    """Seconds until ``deadline``; 0 once past (a wait of 0 still lets a cancelled task unwind one step)."""
    return max(0.0, deadline - loop.time())


def _name_of(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _log_handler_failure(handler: str | None, method: str, exc: BaseException) -> None:
    if isinstance(exc, AcpError):
        log.debug("handler %s answered %s with %r", handler, method, exc)
    else:
        log.error("handler %s failed on %s", handler, method, exc_info=exc)
