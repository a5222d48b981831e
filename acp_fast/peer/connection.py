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
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from ..wire import jsonrpc
from ..wire.errors import (
    AcpError,
    ConnectionClosed,
    InvalidRequest,
    ParseError,
    RequestCancelled,
    ServerBusy,
)
from ..wire.frames import Oversized, Truncated
from ..wire.jsonrpc import Notification
from ..wire.limits import Limits
from ..wire.routes import NOTIFICATION, REQUEST
from . import inline
from .dispatch import (
    DispatchLoop,
    Item,
    NotificationHandler,
    RequestHandler,
    SyncNotificationHandler,
    name_of,
)
from .dispatch_state import (
    DISPATCH_TRANSITIONS,
    INPUT_TRANSITIONS,
    TRANSITIONS,
    DispatchEvent,
    DispatchState,
    DispatchStateError,
    InputEvent,
    InputState,
    State,
    dispatch_next,
    input_next,
)
from .flow import ReadControl
from .incoming import BadLine, IncomingRequest
from .instrument import Instrument
from .pending import PendingRequest
from .shutdown import ShutdownHook, shut_down
from .writer import Writer

log = logging.getLogger(__name__)

_READING, _ENDED = InputState.READING, InputState.ENDED
_PARKED, _BATCH, _STRAY = DispatchState.PARKED, DispatchState.BATCH, DispatchState.STRAY
_E = DispatchEvent

class Connection(DispatchLoop):
    """A JSON-RPC peer over one line transport, agent or client side alike.

    No ``__slots__``: measured, they saved next to nothing per request, and the
    ``--validate`` mode wraps ``feed_line`` on the live connection. The
    attributes stay within CPython's shared-keys budget instead (a test
    guards it): new per-connection state goes on an object one attribute
    holds, as the instrument's does.
    """

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
        self.dispatch_state = DispatchState.RUNNING
        #: The read side's state; changed only through INPUT_TRANSITIONS.
        self.input_state = _READING
        self._handoff: inline.Resume | None = None  # HANDOFF's drain (STOPPING's, if stopped meanwhile)
        self.inline_dispatch = inline.AVAILABLE
        #: Send ``$/cancel_request`` for an outgoing request nobody awaits any more.
        self.cancel_abandoned_requests = True
        self._shutdown_hooks: list[ShutdownHook] = []
        self._inbox: deque[Item] = deque()
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
        #: What watches this connection (metrics, tracing: peer/instrument.py); None while nothing does.
        #: One attribute for every hook, read at the points where its events happen.
        self.instrument: Instrument | None = None
        writer.on_failure = self._writer_failed

    # -- registration ------------------------------------------------------------
    def on_receive_request(self, handler: RequestHandler, name: str | None = None) -> None:
        """Add an ordered request handler; return False from it to pass the request on."""
        self._request_handlers.append((name or name_of(handler), handler))

    def on_receive_notification(
        self, handler: NotificationHandler, name: str | None = None
    ) -> None:
        """Add an ordered notification handler; return False to pass it on."""
        self._notification_handlers.append((name or name_of(handler), handler))

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
            item: Item = jsonrpc.decode(line)
        except jsonrpc.InvalidMessage as exc:
            item = BadLine(exc, exc.id)
        except AcpError as exc:  # ParseError
            item = BadLine(exc, None)
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
            self.dispatch_state = dispatch_next(state, _E.QUEUE)
            self.loop.call_soon(self._end_batch)
        else:
            self._wake()

    def _end_batch(self) -> None:
        if self.dispatch_state is _BATCH:  # the transport never said where its read ended
            self.feed_end()

    def feed_end(self) -> None:
        """A read chunk is fully framed: dispatch it inline if the loop is parked, then flush."""
        instrument = self.instrument
        if instrument is not None:
            instrument.at = instrument.clock()
        state = self.dispatch_state
        if state is _BATCH:
            self.dispatch_state = dispatch_next(state, _E.FEED_END)
            if self._inbox:
                if self.inline_dispatch:
                    self._run_inline()
                else:  # switched off since the batch opened
                    self._wake()
            state = self.dispatch_state
        if state is _PARKED or state is _STRAY:  # nothing is left running: answers leave now, coalesced
            self.writer.flush()

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
            self._push(BadLine(err, rid))

    def feed_truncated(self, event: Truncated) -> None:
        rid = jsonrpc.recover_id(event.head)
        log.warning("input ended inside a line of %d bytes; id %r", event.size, rid)
        if rid is not None:
            self._push(BadLine(ParseError("Parse error: input ended inside this message"), rid))

    def feed_eof(self, exc: BaseException | None) -> None:
        if exc is not None:
            log.warning("read side failed: %r", exc)
        self.input_state = input_next(self.input_state, InputEvent.EOF)
        self._wake()
        self.writer.wake()  # a dispatch held for output stops holding (_hold_for_output)

    def _push(self, item: Item) -> None:
        """Queue an item (feed_line does the same inline for each decoded line)."""
        self._inbox.append(item)
        if len(self._inbox) >= self._max_inbox and self.input_state is _READING:
            self._pause_reader()
        state = self.dispatch_state
        if state is _BATCH:
            return
        if state is _PARKED and self.inline_dispatch:
            self.dispatch_state = dispatch_next(state, _E.QUEUE)
            self.loop.call_soon(self._end_batch)
        else:
            self._wake()

    def _pause_reader(self) -> None:
        """The inbox is full: no more lines until the dispatch loop took half of them."""
        self.input_state = input_next(self.input_state, InputEvent.PAUSE)
        if self._reader is not None:
            self._reader.pause_reading()

    # -- the dispatch loop ------------------------------------------------------------
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
            self.dispatch_state = dispatch_next(self.dispatch_state, _E.STOP)
            task.cancel()
            await asyncio.wait({task})
            raise

    async def _serve(self) -> None:
        self._loop_task = asyncio.current_task()  # already, if a task factory starts tasks eagerly
        try:
            await self._dispatch_loop()
        finally:
            self.dispatch_state = dispatch_next(self.dispatch_state, _E.END)
            await self._shutdown()

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
        if self.instrument is not None:
            params = self.instrument.outgoing(method, params)
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
        if new not in TRANSITIONS[self.state]:
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
        """The bounded shutdown sequence (peer/shutdown.py; R13, R14), between DRAINING and CLOSED."""
        self._set_state(State.DRAINING)
        await shut_down(
            self.loop, self.limits, self._shutdown_hooks, self._fail_pending, self._spawned,
            self._incoming.values(), self.writer,
        )  # fmt: skip
        self._set_state(State.CLOSED)

    # -- introspection for tests and leak checks ----------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        return {
            "inbox": len(self._inbox),
            "incoming": len(self._incoming),
            "pending": len(self._pending),
            "spawned": len(self._spawned),
        }


# The names the peer layer has always been imported by, from here (their homes are the modules above).
__all__ = [
    "DISPATCH_TRANSITIONS",
    "INPUT_TRANSITIONS",
    "Connection",
    "DispatchEvent",
    "DispatchState",
    "DispatchStateError",
    "IncomingRequest",
    "InputEvent",
    "InputState",
    "NotificationHandler",
    "PendingRequest",
    "RequestHandler",
    "ShutdownHook",
    "State",
    "SyncNotificationHandler",
]
