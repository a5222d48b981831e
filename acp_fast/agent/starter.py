"""A session's start in two phases (R22): the framework's setup, then the agent's ``on_session_start``.

Phase one (``open``) runs on the loop before the answer: the table entry,
its cwd, MCP servers and mode. For phase two, ``session/new`` and
``session/fork`` answer first; the callbacks of the
sessions they opened then run in starter tasks, at most ``max_running`` at
once, the rest queued in order. A client pipelining ``session/new`` would
otherwise fill the spawn limit with callbacks parked behind a full pipe
(answers never wait, so that pipe stays full while the client keeps asking).
``session/load`` and ``session/resume`` run the callback first and answer
when it ends (``answer_after``): the answer marks the end of the replay.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from ..peer import inline
from ..peer.connection import State
from ..wire.errors import ServerBusy

if TYPE_CHECKING:
    from ..peer.connection import Connection, IncomingRequest
    from .base import Agent
    from .sessions import Session, SessionTable

log = logging.getLogger(__name__)


class AnswerAfterStart:
    """A load or resume answer that waits for the session's start callback (R22)."""

    __slots__ = ("result", "session_id")

    def __init__(self, session_id: str, result: dict[str, Any]) -> None:
        self.session_id = session_id
        self.result = result


class SessionStarter:
    """One connection's sessions being opened, and the queue of those whose start callback has not run yet."""

    __slots__ = (
        "_agent",
        "_conn",
        "_running",
        "_sessions",
        "hook",
        "max_running",
        "max_waiting",
        "scheduled",
        "waiting",
    )

    def __init__(
        self,
        conn: Connection,
        agent: Agent,
        sessions: SessionTable,
        hook: bool,
        max_waiting: int,
        max_running: int,
    ) -> None:
        """``sessions``: the connection's table (a queued session closed meanwhile is not
        started); ``hook``: the agent overrides ``on_session_start`` (the base one does
        nothing, so there is no phase two to schedule); ``max_waiting``: queued sessions past
        which opening one is refused."""
        self._conn = conn
        self._agent = agent
        self._sessions = sessions
        self.hook = hook
        self.max_waiting = max_waiting
        self.max_running = max(1, max_running)
        #: Session ids whose callback is not spawned yet, in order.
        self.waiting: deque[str] = deque()
        #: A start of the queue is due (on the next loop turn, or once the output has room).
        self.scheduled = False
        self._running = 0

    def check_room(self) -> None:
        """Refuse to open a session while ``max_waiting`` of them wait for their start callback."""
        if len(self.waiting) >= self.max_waiting:
            raise ServerBusy(
                f"{len(self.waiting)} new sessions are waiting for on_session_start "
                f"(limit {self.max_waiting}); retry later"
            )

    def open(self, session_id: str, kw: dict[str, Any], result: dict[str, Any], start: bool = True) -> Session:
        """Phase one: the framework-owned setup of a session, before the answer; ``start`` queues
        its callback behind the answer (new, fork). A session already open here is re-opened:
        the cwd and MCP servers of this request replace the earlier ones."""
        cwd, servers = kw["cwd"], kw.get("mcp_servers")
        session = self._sessions.open(session_id, cwd, servers)
        if session.mcp_servers is not servers and (session.cwd != cwd or session.mcp_servers != (servers or [])):
            session.cwd = cwd
            session.mcp_servers = servers or []
        modes = result.get("modes")
        if isinstance(modes, dict):
            mode_id = modes.get("currentModeId")
            if isinstance(mode_id, str):
                session.mode_id = mode_id
        if start and self.hook:
            self.waiting.append(session_id)
            if not self.scheduled:  # one call per loop turn starts the sessions opened in it
                self.scheduled = True
                self._conn.loop.call_soon(self._start)
        return session

    def _start(self) -> None:
        """Spawn a starter task for the queue, unless ``max_running`` of them run already."""
        self.scheduled = False
        queue = self.waiting
        if not queue or self._running >= self.max_running:
            return
        if self._conn.state is not State.OPEN:
            queue.clear()
            return
        self._running += 1
        try:
            self._conn.spawn(self._run(), name="acp.session_start", on_done=self._done)
        except ServerBusy as exc:  # other spawned work fills the limit
            self._running -= 1
            if self._running == 0:  # no starter will come back for them
                for session_id in queue:
                    log.warning("on_session_start(%r) not run: %s", session_id, exc.message)
                queue.clear()

    async def _run(self) -> None:
        """Run queued start callbacks, in order, each in a context of its own, in this task.

        Each is stepped by the dispatch's own primitive (``inline.first_step``,
        then its ``Resume``). A callback that finishes without suspending (an announcement written
        to an unblocked pipe) costs no task of its own: a task per session
        was a fifth of a pipelined session/new. One that suspends keeps this
        task for the rest of its run, exactly as if it had been spawned alone
        (``current_task``, timeouts and task groups see one task throughout),
        and another starter takes the rest of the queue meanwhile; while the
        transport is paused above its high-water mark, only once it resumes
        (the next callbacks would only queue their output and wait too: with
        a client pipelining session/new, that was a task and a wait per
        session). A paused transport always resumes or is lost, and either
        releases the writer's flow waiters, so the queue cannot stall there.
        """
        queue = self.waiting
        opened = self._sessions.by_id
        conn = self._conn
        hook = self._agent.on_session_start
        copy_context = contextvars.copy_context
        first_step = inline.first_step
        open_state = State.OPEN
        while queue and conn.state is open_state:
            session_id = queue.popleft()
            if session_id not in opened:
                continue
            coro = hook(session_id)
            try:
                resume = first_step(coro, copy_context())
            except BaseException as exc:
                _start_failed(session_id, exc)
                continue
            if resume is None:  # finished without suspending
                continue
            if queue and not self.scheduled:  # the next sessions start beside this one
                self.scheduled = True
                if conn.writer.paused:  # it waits for room in the output, and so would they: start them
                    conn.writer.on_flow(self._start)  # when the transport resumes, not now
                else:
                    conn.loop.call_soon(self._start)
            try:
                await resume
            except BaseException as exc:
                _start_failed(session_id, exc)

    def _done(self, _task: asyncio.Task[Any]) -> None:
        self._running -= 1
        if self.waiting and not self.scheduled:
            self._start()

    def answer_after(self, req: IncomingRequest, pending: AnswerAfterStart) -> None:
        """Run the start callback of a loaded or resumed session, then answer (R22).

        In a spawned task, so that the callback may await the client (R21); the
        answer is written however the callback ends, also when shutdown cancels it.
        """
        hook = self._agent.on_session_start

        async def start_then_answer() -> None:
            try:
                await hook(pending.session_id)
            except BaseException as exc:
                _start_failed(pending.session_id, exc)  # the starters' rule: logged; shutdown's cancel ends it
            finally:
                req.respond(pending.result)

        try:
            self._conn.spawn(start_then_answer(), name=f"acp.session_start:{pending.session_id}")
        except ServerBusy as exc:  # the spawn limit is full: answer now, start callback skipped
            log.warning("on_session_start(%r) not run: %s", pending.session_id, exc.message)
            req.respond(pending.result)


def _start_failed(session_id: str, exc: BaseException) -> None:
    """A start callback raised: logged as a spawned task's failure is; the starter goes on.

    A cancellation of the starter task itself ends it (shutdown).
    """
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise exc
        return
    if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
        raise exc
    log.error("on_session_start(%r) failed", session_id, exc_info=exc)
