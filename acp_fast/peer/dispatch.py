"""The dispatch loop: one task takes inbox items one at a time and offers each to the handlers (R18-R20, R24).

``DispatchLoop`` is the half of the Connection that consumes the inbox the
read side fills (peer/connection.py): drains it on the loop task, or inline
from the read callback while the loop is parked (``_run_inline``, inline.py),
answers what a handler raises, and routes responses to their outgoing
requests. It is a base class rather than an object the Connection holds
because every message passes through it: one attribute lookup on the
connection is what each of them costs, not a second object's.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..wire import jsonrpc
from ..wire.errors import AcpError, InvalidRequest, MethodNotFound, RequestCancelled
from ..wire.jsonrpc import Notification, Request, Response
from ..wire.limits import Limits
from ..wire.routes import ERROR
from . import inline
from .dispatch_state import DispatchEvent, DispatchState, InputEvent, InputState, State, dispatch_next, input_next
from .flow import ReadControl
from .incoming import AnnouncedRequest, BadLine, IncomingRequest, InstrumentedRequest
from .instrument import Instrument
from .pending import PendingRequest
from .writer import Writer

log = logging.getLogger("acp_fast.peer.connection")  # the connection's own records keep their logger

# The hot path reads these as module globals.
_RUNNING, _PARKED, _BATCH, _INLINE, _HANDOFF, _STRAY, _STOPPING, _DONE = DispatchState
_READING, _PAUSED, _ENDED = InputState
_E = DispatchEvent

RequestHandler = Callable[[IncomingRequest], Awaitable[bool | None]]
NotificationHandler = Callable[[Notification], Awaitable[bool | None]]
SyncNotificationHandler = Callable[[Notification], None]

Item = Request | Notification | Response | BadLine

#: Exceptions a handler may raise that end the process instead of being answered (R24).
FATAL = (KeyboardInterrupt, SystemExit, GeneratorExit)


def session_of(params: Any) -> str | None:
    """The session a message is about, for a transport that sorts output by session (``Writer.route``)."""
    session = params.get("sessionId") if type(params) is dict else None
    return session if type(session) is str else None


class DispatchLoop:
    """Takes the inbox's items in order and dispatches them; the Connection sets every attribute below."""

    loop: asyncio.AbstractEventLoop
    writer: Writer
    limits: Limits
    state: State
    dispatch_state: DispatchState
    input_state: InputState
    inline_dispatch: bool
    instrument: Instrument | None
    _inbox: deque[Item]
    _wakeup: asyncio.Future[None] | None
    _handoff: inline.Resume | None
    _reader: ReadControl | None
    _loop_task: asyncio.Task[Any] | None
    _context: contextvars.Context
    _current_handler: str | None
    _incoming: dict[str | int, IncomingRequest]
    _pending: dict[int, PendingRequest]
    _request_handlers: list[tuple[str, RequestHandler]]
    _notification_handlers: list[tuple[str, NotificationHandler]]
    _sync_notifications: dict[str, SyncNotificationHandler]

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
        self.dispatch_state = dispatch_next(self.dispatch_state, _E.INLINE)
        try:
            resume = inline.first_step(self._drain_inbox(), self._context, self._loop_task, self.loop)
        except inline.Reentered:  # fed from inside the dispatch context itself: the loop takes it
            self.dispatch_state = dispatch_next(self.dispatch_state, _E.RETURN)
            self._wake()
            return
        except BaseException:  # only the fatal ones pass a handler (R24); the loop stays usable
            self.dispatch_state = dispatch_next(self.dispatch_state, _E.RETURN)
            raise
        if resume is None:
            self.dispatch_state = dispatch_next(
                self.dispatch_state, _E.RETURN_STRAY if wakeup.cancelled() else _E.RETURN
            )
            return
        self._handoff = resume
        self.dispatch_state = dispatch_next(self.dispatch_state, _E.SUSPEND)
        self._wake()

    def _run_sync_notification(self, handler: SyncNotificationHandler, note: Notification) -> None:
        try:
            handler(note)
        except FATAL:
            raise
        except BaseException as exc:  # never answered (R06)
            log_handler_failure(name_of(handler), note.method, exc)

    def _wake(self) -> None:
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    def in_dispatch_loop(self) -> bool:
        task = self._loop_task
        return task is not None and asyncio.current_task() is task

    def current_handler_name(self) -> str:
        return repr(self._current_handler or "<none>")

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
                self.dispatch_state = dispatch_next(
                    self.dispatch_state, _E.PARK_STRAY if task.cancelling() else _E.PARK
                )
                cancelled: asyncio.CancelledError | None = None
                try:
                    await self._wakeup
                except asyncio.CancelledError as exc:
                    cancelled = exc
                finally:
                    woke_from = self.dispatch_state
                    self.dispatch_state = dispatch_next(woke_from, _E.WAKE)
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
        instrument = self.instrument
        if instrument is None:
            make_request: type[IncomingRequest] = IncomingRequest
        else:
            make_request = AnnouncedRequest if instrument.sees_arrivals else InstrumentedRequest
        while inbox:
            if writer.paused and self.input_state is not _ENDED:
                await self._hold_for_output()
                continue
            item = inbox.popleft()
            if self.input_state is _PAUSED and len(inbox) <= resume_at:
                self.input_state = input_next(_PAUSED, InputEvent.RESUME)
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
                    except FATAL:
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
                bad: BadLine = item  # type: ignore[assignment]
                self._write(jsonrpc.encode_error(bad.id, bad.error), ERROR, bad.id)
                if self.instrument is not None:
                    self.instrument.bad_line(bad.error.code)

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
            writer.route(kind, rid, session_of(params))
        writer.write(data)

    def _handler_failed(self, name: str, incoming: IncomingRequest, exc: BaseException) -> None:
        """A request handler raised: answered with what it raised, logged (R24)."""
        error = self._absorb(exc)
        log_handler_failure(name, incoming.method, error)
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
            except FATAL:
                raise
            except BaseException as exc:  # never answered (R06); logged with traceback
                log_handler_failure(name, note.method, self._absorb(exc))
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
        except FATAL:
            raise
        except BaseException as exc:
            log_handler_failure(self._current_handler, pending.method, self._absorb(exc))
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


def name_of(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def log_handler_failure(handler: str | None, method: str, exc: BaseException) -> None:
    if isinstance(exc, AcpError):
        log.debug("handler %s answered %s with %r", handler, method, exc)
    else:
        log.error("handler %s failed on %s", handler, method, exc_info=exc)
