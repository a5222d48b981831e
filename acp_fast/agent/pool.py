"""The bounded background pool: the only place background tasks are created (R08, R13-R15).

Admission reserves everything a job needs *before* its task exists: a pool
slot (the 33rd request is refused at once, not queued, R08), the session's
prompt slot and its cancellation token (R07, R10). A done-callback releases
both on every path: completion, exception, cancellation and abort (R15).

Every job answers its request exactly once. A job cancelled through its
token or by task cancellation answers ``{"stopReason": "cancelled"}`` for a
prompt and -32800 otherwise (R12); if the task is gone without an answer
(aborted after the grace period, R14), the pool answers for it.

A job whose token is cancelled before its task ran a step never calls its
body (R10): only its ``not_started`` hook runs (a prompt's end-of-turn hook),
then it answers as cancelled. The body never starts on the admitting
dispatch step either: under an eager task factory (3.12+) the task's first
step happens inside ``create_task``, so the job hands that step back before
anything else. With either factory a cancel in the same read as its prompt
therefore finds the turn not yet started, and a prompt body never holds the
control lane (R03).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..peer.connection import IncomingRequest
from ..wire.errors import InternalError, RequestCancelled, ServerBusy
from .cancel import CancelToken
from .sessions import Session

log = logging.getLogger(__name__)

CANCELLED_PROMPT: dict[str, Any] = {"stopReason": "cancelled"}
_UNSET: Any = object()


class Job:
    """One admitted background request and what it holds."""

    __slots__ = ("abandoned", "aborted", "pool", "released", "request", "session", "started", "task", "token")

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

    @property
    def is_prompt(self) -> bool:
        return self.session is not None

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel via the token and, once the task runs, as task cancellation.

        Only the first cancel acts: a second one (session/cancel, then
        $/cancel_request or shutdown) would interrupt the finaliser the first
        one started, which must run to its end (R13); shutdown's grace and
        abort handle a job that never finishes (R14).
        """
        if not self.token.cancel(reason):
            return
        task = self.task
        if task is not None and self.started and not task.done():
            task.cancel(reason)

    def __repr__(self) -> str:
        return f"Job({self.request.method} id={self.request.id!r})"


JobBody = Callable[[Job], Awaitable[Any]]


class BackgroundPool:
    """At most ``capacity`` background jobs per connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop, capacity: int) -> None:
        self._loop = loop
        self.capacity = capacity
        self._jobs: dict[str | int, Job] = {}

    @property
    def in_flight(self) -> int:
        return len(self._jobs)

    def get(self, request_id: str | int) -> Job | None:
        return self._jobs.get(request_id)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def admit(self, request: IncomingRequest, session: Session | None = None) -> Job:
        """Reserve a slot (and the session's turn); raise instead of queueing."""
        if len(self._jobs) >= self.capacity:
            raise ServerBusy(
                f"server busy: {len(self._jobs)} background requests in flight "
                f"(limit {self.capacity}); retry when one finishes",
                {"limit": self.capacity, "inFlight": len(self._jobs)},
            )
        job = Job(self, request, session)
        self._jobs[request.id] = job
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
            outcome = CANCELLED_PROMPT if job.token.cancelled and job.is_prompt else result_of(job, value)
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
        request = job.request
        self._jobs.pop(request.id, None)
        session = job.session
        if session is not None:
            session.end_turn(job)
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
                assert job.task is not None
                job.task.cancel("abort")
                self._release(job)
        _, stuck = await asyncio.wait(alive, timeout=abort_join_s)
        for job in jobs:
            task = job.task
            if task is not None and task in stuck:
                job.abandoned = True
                log.error("task %s did not stop after abort; abandoning it", task.get_name())
