"""Process-wide budgets shared by every connection of a host (R28).

Each connection keeps its own session table and 32-slot pool, unchanged
(R27); both additionally draw on one process-wide ``ProcessBudget`` at the
same moment, and give back on every path the per-connection object already
covers (removal, completion, cancellation, abort, connection end). The pool
takes the budget as its ``budget`` (agent/seams.py ``PromptBudget``); the
session table extends the public methods of the agent's one. The checks run
before work is admitted, so a full process refuses instead of queueing, with
the same -32000 answer a full connection gives.
"""

from __future__ import annotations

from ..agent.pool import BackgroundPool
from ..agent.sessions import Session, SessionTable
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

    def check_session(self) -> None:
        """Raise ServerBusy when the process holds ``max_sessions_total`` sessions, open or parked."""
        if self.sessions + self.detached >= self.limits.max_sessions_total:
            raise ServerBusy(
                f"server busy: {self.sessions + self.detached} sessions open or parked in this process "
                f"(limit {self.limits.max_sessions_total}); retry later",
                {"limit": self.limits.max_sessions_total},
            )

    def check_prompt(self) -> None:
        """Raise ServerBusy when ``max_running_prompts`` prompts run in the process."""
        if self.running_prompts >= self.limits.max_running_prompts:
            raise ServerBusy(
                f"server busy: {self.running_prompts} prompts running in this process "
                f"(limit {self.limits.max_running_prompts}); retry when one finishes",
                {"limit": self.limits.max_running_prompts},
            )

    def prompt_started(self) -> None:
        self.running_prompts += 1

    def prompt_ended(self) -> None:
        self.running_prompts -= 1


class HostedSessionTable(SessionTable):
    """A connection's session table that also counts against the process's sessions."""

    def __init__(self, capacity: int, budget: ProcessBudget) -> None:
        super().__init__(capacity)
        self._budget = budget

    def check_capacity(self) -> None:
        super().check_capacity()
        self._budget.check_session()

    def add(self, session: Session) -> Session:
        super().add(session)
        self._budget.sessions += 1
        return session

    def remove(self, session_id: str) -> Session | None:
        session = super().remove(session_id)
        if session is not None:
            self._budget.sessions -= 1
        return session


#: A connection's background pool whose prompts also count against the process's: the
#: agent's pool given the ``ProcessBudget`` as its third argument, ``budget``.
HostedPool = BackgroundPool
