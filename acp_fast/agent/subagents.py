"""Subagent work on child sessions, cancellable like a prompt turn (R10-R15).

A child is a row of the session table owned by its parent (``ChildSession``,
bounded by ``max_sessions``). Each piece of work on it is a ``SubagentRun``
that reserves the child's slot and token before its task exists, so a
``session/cancel`` naming the child, arriving as soon as the client has seen
the child announced, cancels the work even before it starts (R10); a cancel
swaps in a fresh token for the next run (R11). The work sees cancellation
both ways, on its token and as task cancellation. Cancelling the parent's
turn, closing the parent and EOF cancel it too (R13), and its completion path
always runs and reports the child idle on the parent, with the stop reason.
The slot is given back on every path, aborts included (R15).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..wire.errors import from_exception
from .cancel import CancelToken
from .context import Turn, enter_turn, turn_var
from .sessions import ChildSession

if TYPE_CHECKING:
    from .updates import SessionUpdates

log = logging.getLogger(__name__)

SubagentWork = Callable[["SubagentRun"], Awaitable[Any]]


class ChildTurn(Turn):
    """A child's turn, which remembers the prompt turn it was started from (``origin``, its token).

    When the runtime answers for that prompt because its body ignored a
    cancel (R30), the child's work is part of the body it stopped listening
    to: what the child still sends, its idle report included, is dropped as
    the prompt's own would be (agent/pool.py ``_from_orphan``).
    """

    __slots__ = ("origin",)

    def __init__(self, origin: CancelToken | None, *args: Any) -> None:
        super().__init__(*args)
        self.origin = origin


def _stop_reason_of(value: Any) -> str:
    """A prompt-style return value (None, a stop reason, ``{"stopReason": ...}``) as a stop reason."""
    if value is None:
        return "end_turn"
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("stopReason"), str):
        return str(value["stopReason"])
    return "end_turn"


class SubagentRun:
    """One piece of work on a child session: its token, its task and, once done, its outcome.

    ``outcome`` is the stop reason reported on the parent: what the work
    returned (as ``prompt`` returns one), ``"cancelled"``, or ``"error"``
    when it raised (``error`` holds the exception). ``value`` is what the
    work returned.
    """

    __slots__ = (
        "_client",
        "_done",
        "_work",
        "error",
        "outcome",
        "session",
        "started",
        "task",
        "token",
        "value",
    )

    def __init__(self, client: SessionUpdates, session: ChildSession, work: SubagentWork) -> None:
        self._client = client
        self._work = work
        self.session = session
        self.token = session.begin_child_turn(self)
        self.task: asyncio.Task[None] | None = None
        self.started = False
        self.outcome: str | None = None
        self.value: Any = None
        self.error: BaseException | None = None
        self._done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @property
    def session_id(self) -> str:
        """The child's own session id: the one its session updates carry."""
        return self.session.id

    @property
    def parent_id(self) -> str:
        return self.session.parent.id

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the token and, once the work runs, cancel its task; only the first cancel acts."""
        if not self.token.cancel(reason):
            return
        task = self.task
        if task is not None and self.started and not task.done():
            task.cancel(reason)

    async def wait(self) -> str:
        """The outcome, once the completion path has run.

        Cancelling the waiter cancels the work and still waits for its
        completion path, so a parent turn's answer follows the child's last
        update (R05); a second cancellation (an abort, R14) stops waiting.
        """
        try:
            return await asyncio.shield(self._done)
        except asyncio.CancelledError:
            self.cancel("waiter cancelled")
            await asyncio.shield(self._done)
            raise

    def __await__(self) -> Any:
        return self.wait().__await__()

    # -- the task -----------------------------------------------------------------------
    async def _body(self, turn: Turn) -> None:
        if self.task is None:  # started eagerly, inside create_task: hand the step back first
            await asyncio.sleep(0)
        self.started = True
        enter_turn(turn)
        if self.token.cancelled:  # cancelled before its first step (R10): the work is never called
            self._finish("cancelled")
            return
        try:
            value = await self._work(self)
        except asyncio.CancelledError:
            if not self.token.cancelled:
                raise  # not our cancel: the task's owner (shutdown) decides, _task_done reports
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()
            self._finish("cancelled")
            return
        except Exception as exc:
            log.error("subagent work on %r failed", self.session_id, exc_info=exc)
            self._finish("error", error=exc)
            return
        self._finish("cancelled" if self.token.cancelled else _stop_reason_of(value), value)

    def _task_done(self, _task: asyncio.Task[Any]) -> None:
        """Every path ends here, a task cancelled before its first step or aborted included (R15)."""
        self._finish("cancelled")

    def _finish(self, outcome: str, value: Any = None, error: BaseException | None = None) -> None:
        """Free the child's slot, then report it idle on the parent: in this order, so a
        client that reacts to the report finds the child free for its next run."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        self.value = value
        self.error = error
        self.session.end_turn(self)
        state: dict[str, Any] = {"state": "idle", "stopReason": outcome}
        if error is not None:
            state["error"] = from_exception(error).to_error_obj()
        client = self._client
        if client.supports_update("subagent_update"):
            client._send_update(
                self.parent_id, {"sessionUpdate": "subagent_update", "sessionId": self.session_id, "state": state}
            )
        self._done.set_result(outcome)

    def launch(self, context: Any) -> None:
        """Create the work's task, after the child was announced: the announcement leaves
        before the task's first step, so a cancel sent on seeing it finds the work not started.

        When no task can be made (the spawn limit), the run ends as ``error``,
        reported like any other end, and the error is raised.
        """
        parent_turn = turn_var.get()
        request_id = parent_turn.request_id if parent_turn is not None else self.session_id
        origin = None if parent_turn is None else getattr(parent_turn, "origin", None) or parent_turn.token
        turn = ChildTurn(origin, self.session, self.token, request_id, context)
        try:
            self.task = self._client._conn.spawn(
                self._body(turn), name=f"acp.subagent:{self.session_id}", on_done=self._task_done
            )
        except Exception as exc:
            self._finish("error", error=exc)
            raise

    def __repr__(self) -> str:
        return f"SubagentRun({self.session_id!r} of {self.parent_id!r}, outcome={self.outcome!r})"
