"""Process-wide budgets shared by every connection of a host (R28).

Each connection keeps its own session table and 32-slot pool, unchanged
(R27); the subclasses here additionally reserve from one process-wide count
at the same moment, and give back on every path the per-connection object
already covers (removal, completion, cancellation, abort, connection end).
The checks run before work is admitted, so a full process refuses instead of
queueing, with the same -32000 answer a full connection gives.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..agent.pool import BackgroundPool, Job
from ..agent.sessions import Session, SessionTable
from ..peer.connection import IncomingRequest
from ..wire.errors import ServerBusy
from ..wire.limits import Limits


class ProcessBudget:
    """The counts every connection of one process draws from.

    ``sessions`` are attached to a live connection, ``detached`` wait for a
    reconnect (hosting/detached.py); both count against ``max_sessions_total``.
    """

    __slots__ = ("detached", "limits", "running_prompts", "sessions")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.sessions = 0
        self.detached = 0
        self.running_prompts = 0


class HostedSessionTable(SessionTable):
    """A connection's session table that also counts against the process's sessions."""

    def __init__(self, capacity: int, budget: ProcessBudget) -> None:
        super().__init__(capacity)
        self._budget = budget

    def check_capacity(self) -> None:
        super().check_capacity()
        budget = self._budget
        if budget.sessions + budget.detached >= budget.limits.max_sessions_total:
            raise ServerBusy(
                f"server busy: {budget.sessions + budget.detached} sessions open or parked in this process "
                f"(limit {budget.limits.max_sessions_total}); retry later",
                {"limit": budget.limits.max_sessions_total},
            )

    def add(self, session: Session) -> Session:
        super().add(session)
        self._budget.sessions += 1
        return session

    def remove(self, session_id: str) -> Session | None:
        session = super().remove(session_id)
        if session is not None:
            self._budget.sessions -= 1
        return session


class HostedPool(BackgroundPool):
    """A connection's background pool whose prompts also count against the process's."""

    def __init__(self, loop: asyncio.AbstractEventLoop, capacity: int, budget: ProcessBudget) -> None:
        super().__init__(loop, capacity)
        self._budget = budget

    def admit(self, request: IncomingRequest, session: Session | None = None) -> Job:
        budget = self._budget
        if session is not None and budget.running_prompts >= budget.limits.max_running_prompts:
            raise ServerBusy(
                f"server busy: {budget.running_prompts} prompts running in this process "
                f"(limit {budget.limits.max_running_prompts}); retry when one finishes",
                {"limit": budget.limits.max_running_prompts},
            )
        job = super().admit(request, session)
        if job.is_prompt:
            budget.running_prompts += 1
        return job

    def _release(self, job: Job, *args: Any, **kwargs: Any) -> None:
        if not job.released and job.is_prompt:
            self._budget.running_prompts -= 1
        super()._release(job, *args, **kwargs)
