"""The bounded background pool: the only place background tasks are created (R08, R13-R15).

Admission reserves everything a job needs *before* its task exists: a pool
slot (the 33rd request is refused at once, not queued, R08), the session's
prompt slot and its cancellation token (R07, R10). A done-callback releases
both on every path: completion, exception, cancellation and abort (R15).

Every job answers its request exactly once. A job cancelled through its
token or by task cancellation answers ``{"stopReason": "cancelled"}`` for a
prompt and -32800 otherwise (R12); a cancelled prompt whose body catches the
cancellation and returns is answered with what it returned, stop reason
``cancelled`` (R10). If the task is gone without an answer (aborted after the
grace period, R14), the pool answers for it.

A job whose token is cancelled before its task ran a step never calls its
body (R10): only its ``not_started`` hook runs (a prompt's end-of-turn hook),
then it answers as cancelled. The body never starts on the admitting
dispatch step either: under an eager task factory (3.12+) the task's first
step happens inside ``create_task``, so the job hands that step back before
anything else. With either factory a cancel in the same read as its prompt
therefore finds the turn not yet started, and a prompt body never holds the
control lane (R03).

A cancelled job whose body has not ended ``cancel_grace_s`` later is
answered for (R30): the watchdog, one timer armed by the first cancel and
cancelled when the body ends, answers the request, logs where the body is
stuck, and mutes the body (what it still sends is dropped and counted by the
connection). Its slots stay taken until the body really exits (R08, R07).
Shutdown's abort takes the same path, so an aborted body's ``finally`` can
no longer write behind its answer (R05).

An adapter whose agents stop their own turns (compat: the SDK's runtime only
calls the agent's ``cancel``) names the cancel reasons it leaves to them
(``left_to_agent``): the token is cancelled and the watchdog armed, but the
task is not, so it gets no ``CancelledError`` beside the one its own agent
sends. A later cancel for another reason, or the watchdog, cancels the task
then, once, unless someone already has.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..peer.connection import IncomingRequest
from ..wire.errors import InternalError, RequestCancelled, ServerBusy
from ..wire.limits import CANCEL_GRACE_S, MAX_TURN_S
from .cancel import CancelToken
from .context import turn_var
from .sessions import Session

if TYPE_CHECKING:
    from ..peer.connection import Connection
    from .seams import PromptBudget

log = logging.getLogger(__name__)

CANCELLED_PROMPT: dict[str, Any] = {"stopReason": "cancelled"}
_UNSET: Any = object()


def _cancelled_answer(job: Job, result_of: Callable[[Job, Any], Any], value: Any) -> Any:
    """A cancelled prompt that returned: its own answer (``usage``, ``_meta``, ...) with the
    ``cancelled`` stop reason; ``{"stopReason": "cancelled"}`` when what it returned is not a turn's
    answer (R10-R12)."""
    try:
        answer = result_of(job, value)
    except Exception:
        return CANCELLED_PROMPT
    if not isinstance(answer, dict):
        return CANCELLED_PROMPT
    return {**answer, "stopReason": "cancelled"}


class Job:
    """One admitted background request and what it holds."""

    __slots__ = (
        "abandoned",
        "aborted",
        "deferred",
        "orphaned",
        "pool",
        "released",
        "request",
        "session",
        "started",
        "task",
        "timer",
        "token",
    )

    def __init__(self, pool: BackgroundPool, request: IncomingRequest, session: Session | None) -> None:
        """A prompt takes its session's turn and its token (PromptInProgress when busy, R07); others get a token."""
        self.pool = pool
        self.request = request
        self.session = session
        self.token = CancelToken() if session is None else session.begin_turn(self)
        self.task: asyncio.Task[None] | None = None
        self.started = False
        self.released = False
        self.aborted = False
        self.abandoned = False
        #: Answered for by the runtime while its body still runs (R30): what it sends is dropped.
        self.orphaned = False
        #: Cancelled for a reason left to the agent (``BackgroundPool.left_to_agent``): its task is not, yet.
        self.deferred = False
        #: The turn timeout before a cancel (``max_turn_s``), the cancel watchdog after it.
        self.timer: asyncio.TimerHandle | None = None

    @property
    def is_prompt(self) -> bool:
        return self.session is not None

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel via the token and, once the task runs, as task cancellation.

        Only the first cancel acts: a second one (session/cancel, then
        $/cancel_request or shutdown) would interrupt the finaliser the first
        one started, which must run to its end (R13); shutdown's grace and
        abort handle a job that never finishes (R14). The exception: a first
        cancel whose reason is left to the agent leaves the task alone, and
        the next cancel for a reason that is not cancels it (``cancel_task``).
        """
        if not self.token.cancel(reason):
            if self.deferred and reason not in self.pool.left_to_agent:
                self.cancel_task(reason)
            return
        self.request.cancel_received()
        if reason in self.pool.left_to_agent:
            self.deferred = True
        else:
            self.cancel_task(reason)
        if not self.released:
            self.pool._arm_watchdog(self)

    def cancel_task(self, reason: str) -> None:
        """Cancel the running task, once: not if its own agent already has (a deferred cancel, R30)."""
        deferred, self.deferred = self.deferred, False
        task = self.task
        if task is None or not self.started or task.done():
            return
        if deferred and task.cancelling():
            return  # the agent cancelled its own turn: a second CancelledError would land in its cleanup
        task.cancel(reason)

    def __repr__(self) -> str:
        return f"Job({self.request.method} id={self.request.id!r})"


JobBody = Callable[[Job], Awaitable[Any]]


def _where(task: asyncio.Task[Any]) -> str:
    """The chain of coroutines ``task`` is suspended in, outermost first, and what the innermost awaits.

    ``Task.get_stack`` gives one frame for a suspended coroutine; the agent's
    frame, the one worth naming, is further down the ``cr_await`` chain.
    """
    lines: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(lines) < _WHERE_DEPTH:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            break
        lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    if awaited is not None:
        lines.append(f"  awaiting {awaited!r}")
    return "\n".join(lines)


_WHERE_DEPTH = 64  # frames named at most: the warning stays one readable record


class BackgroundPool:
    """At most ``capacity`` background jobs per connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop, capacity: int, budget: PromptBudget | None = None) -> None:
        """``budget``: a count of prompts shared beyond this pool (a host's, R28), checked
        before a prompt is admitted here and given back when it lets go of its slots."""
        self._loop = loop
        self.capacity = capacity
        self.budget = budget
        self._jobs: dict[str | int, Job] = {}
        self.cancel_grace_s = CANCEL_GRACE_S
        self.max_turn_s = MAX_TURN_S
        #: Where an orphaned body's writes are dropped and counted; set by ``bind``.
        self._conn: Connection | None = None
        #: How a turn past ``max_turn_s`` is cancelled (the server's session/cancel path).
        self.on_timeout: Callable[[Job], None] = lambda job: job.cancel("max_turn_s")
        #: Shown in the watchdog's warning: whose ``prompt`` it is.
        self.agent_name = "Agent"
        #: Cancel reasons whose task cancellation is left to the agent's own ``cancel`` (see Job.cancel).
        self.left_to_agent: frozenset[str] = frozenset()
        # Orphaned jobs by task and by turn token, for the connection's drop test (R30).
        self._orphans: dict[asyncio.Task[None], Job] = {}
        self._orphan_tokens: set[CancelToken] = set()

    def bind(self, conn: Connection, agent_name: str, on_timeout: Callable[[Job], None]) -> None:
        """Take the connection's cancel limits, and where orphaned bodies' writes are dropped (R30)."""
        self._conn = conn
        self.cancel_grace_s = conn.limits.cancel_grace_s
        self.max_turn_s = conn.limits.max_turn_s
        self.agent_name = agent_name
        self.on_timeout = on_timeout

    @property
    def in_flight(self) -> int:
        return len(self._jobs)

    def get(self, request_id: str | int) -> Job | None:
        return self._jobs.get(request_id)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def admit(self, request: IncomingRequest, session: Session | None = None) -> Job:
        """Reserve a slot (and the session's turn); raise instead of queueing."""
        budget = self.budget
        if budget is not None and session is not None:  # the process's refusal comes first (R28)
            budget.check_prompt()
        if len(self._jobs) >= self.capacity:
            if session is not None:  # a busy session's refusal says more than the pool's (R07, R30)
                session.check_free()
            raise ServerBusy(
                f"server busy: {len(self._jobs)} background requests in flight "
                f"(limit {self.capacity}); retry when one finishes",
                {"limit": self.capacity, "inFlight": len(self._jobs)},
            )
        job = Job(self, request, session)
        self._jobs[request.id] = job
        if budget is not None and session is not None:
            budget.prompt_started()
        return job

    def start(
        self,
        job: Job,
        body: JobBody,
        result_of: Callable[[Job, Any], Any],
        not_started: JobBody | None = None,
    ) -> None:
        """Create the job's task; ``result_of`` maps the body's return to the wire result.

        ``not_started`` runs instead of ``body`` when the job was cancelled
        before its task ran a step (R10).
        """
        method = job.request.method
        label = job.session.id if job.session is not None else "-"
        task = self._loop.create_task(
            self._run(job, body, result_of, not_started), name=f"acp.{method}:{label}:{job.request.id}"
        )
        job.task = task
        task.add_done_callback(lambda _t: self._release(job))
        if self.max_turn_s > 0 and job.is_prompt:
            job.timer = self._loop.call_later(self.max_turn_s, self._timed_out, job)

    def _timed_out(self, job: Job) -> None:
        job.timer = None
        if job.released or job.token.cancelled:
            return
        log.warning("%s ran past max_turn_s (%.3g s): cancelling it as a timeout", self._describe(job), self.max_turn_s)
        self.on_timeout(job)

    def _arm_watchdog(self, job: Job) -> None:
        """The job was just cancelled: answer for it if its body has not ended ``cancel_grace_s`` from now."""
        if job.timer is not None:
            job.timer.cancel()
        job.timer = self._loop.call_later(self.cancel_grace_s, self._overdue, job)

    def _overdue(self, job: Job) -> None:
        job.timer = None
        task = job.task
        if job.released or job.orphaned or task is None or task.done():
            return
        log.warning(
            "%s ignored its cancellation (%s) for cancel_grace_s=%.3g s: answered for it; what it still "
            "sends is dropped and its slot stays taken until it returns. It is stuck at:\n%s",
            self._describe(job),
            job.token.reason,
            self.cancel_grace_s,
            _where(task),
        )
        self._orphan(job)
        if job.deferred:  # the agent's cancel did not stop it: the task cancellation it was spared
            job.cancel_task(job.token.reason or "cancelled")

    def _describe(self, job: Job) -> str:
        request = job.request
        if job.is_prompt:
            assert job.session is not None
            return f"{self.agent_name}.prompt (session/prompt id={request.id!r}, session {job.session.id!r})"
        return f"{request.method} (id={request.id!r})"

    def _orphan(self, job: Job) -> None:
        """Answer ``job`` as cancelled now and mute its body; its slots stay taken until the task ends."""
        if job.orphaned or job.released:
            return
        job.orphaned = True
        if job.task is not None:
            self._orphans[job.task] = job
        self._orphan_tokens.add(job.token)
        conn = self._conn
        if conn is not None:
            conn.drop_if = self._from_orphan
        self._answer(job)

    def _from_orphan(self) -> bool:
        """Whether the running code is an orphaned body (its task, a task it started in its turn, or
        subagent work it started: a child's turn names the prompt turn it came from)."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: not a body
            return False
        if task is not None and task in self._orphans:
            return True
        turn = turn_var.get()
        if turn is None:
            return False
        tokens = self._orphan_tokens
        return turn.token in tokens or getattr(turn, "origin", None) in tokens

    async def _run(
        self, job: Job, body: JobBody, result_of: Callable[[Job, Any], Any], not_started: JobBody | None
    ) -> None:
        task = asyncio.current_task()
        try:
            if job.task is None:  # started eagerly, inside create_task: hand the dispatch step back
                await asyncio.sleep(0)
            job.started = True
            if job.token.cancelled:  # cancelled before this task ran a step (R10): no body
                if not_started is not None:
                    await not_started(job)
                self._release(job)
                return
            value = await body(job)
            if job.token.cancelled and job.is_prompt:
                outcome = _cancelled_answer(job, result_of, value)  # the agent's own answer, once cancelled
            else:
                outcome = result_of(job, value)
        except asyncio.CancelledError as exc:
            if task is not None and task.cancelling():
                task.uncancel()
            elif not (job.token.cancelled or job.aborted):  # raised with no cancel asked: a bug (R24)
                log.error("%s raised CancelledError without being cancelled", job, exc_info=exc)
                self._release(job, error=exc)
                return
            self._release(job)
            return
        except Exception as exc:
            if job.abandoned:  # its coroutine is being closed, outside any loop: not a failure of the job
                log.debug("%s raised while closed after it was abandoned: %r", job, exc)
                return
            log.error("%s failed", job, exc_info=exc)
            self._release(job, error=exc)
            return
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # neither Exception nor cancellation: still one answer (R24)
            log.error("%s failed", job, exc_info=exc)
            self._release(job, error=InternalError(data={"error": type(exc).__name__}))
            return
        self._release(job, result=outcome)

    def _release(self, job: Job, result: Any = _UNSET, error: BaseException | None = None) -> None:
        """Free the job's slots, then answer (if nothing has yet): in this order,
        so a client that reacts to the answer at once finds the session free.

        Without a result or an error the job was cancelled (or aborted after the
        grace period, or never started): a prompt answers ``cancelled``, any other
        request -32800 (R12, R14).
        """
        if job.released:
            return
        job.released = True
        if self.budget is not None and job.is_prompt:
            self.budget.prompt_ended()
        if job.timer is not None:
            job.timer.cancel()
            job.timer = None
        request = job.request
        self._jobs.pop(request.id, None)
        session = job.session
        if session is not None:
            session.end_turn(job)
        if job.orphaned:
            if job.task is not None:
                self._orphans.pop(job.task, None)
            self._orphan_tokens.discard(job.token)
            if not self._orphans and self._conn is not None:
                self._conn.drop_if = None
        self._answer(job, result, error)

    def _answer(self, job: Job, result: Any = _UNSET, error: BaseException | None = None) -> None:
        request = job.request
        session = job.session
        if not request.answered:
            if error is not None:
                request.respond_error(error)
            elif result is not _UNSET:
                request.respond(result)
            elif session is not None:  # a prompt
                request.respond(CANCELLED_PROMPT)
            else:
                request.respond_error(RequestCancelled())
            request.flush()  # one answer per job: send it now, behind its updates (R05)

    async def shutdown(self, grace_s: float, abort_join_s: float) -> None:
        """Cancel every job, give them ``grace_s`` to finish, then abort the rest (R13, R14)."""
        jobs = self.jobs()
        for job in jobs:
            job.cancel("shutdown")
        tasks = {j.task for j in jobs if j.task is not None and not j.task.done()}
        if not tasks:
            return
        _, alive = await asyncio.wait(tasks, timeout=grace_s)
        if not alive:
            return
        for job in jobs:
            if job.task in alive:
                job.aborted = True
                log.warning("%s ignored cancellation for %.1f s; aborting it", job, grace_s)
                self._orphan(job)  # answered and muted before the abort reaches its finally (R05)
                assert job.task is not None
                job.task.cancel("abort")
        _, stuck = await asyncio.wait(alive, timeout=abort_join_s)
        for job in jobs:
            task = job.task
            if task is not None and task in stuck:
                job.abandoned = True
                log.error("task %s did not stop after abort; abandoning it", task.get_name())
                self._release(job)
