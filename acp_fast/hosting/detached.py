"""Sessions that outlive their socket for ``detached_session_timeout_s`` (hosting).

When a connection ends (EOF, reset, ping timeout) its prompts are still
cancelled, given their grace, aborted and joined (R13-R15); only then are its
idle sessions moved here instead of being dropped: the framework's ``Session``
(cwd, mode, config options, ``data``) plus whatever the agent returned from
``Agent.detach_session``. A ``session/load`` or ``session/resume`` for that id
on any later connection of the process takes it back, calls the new agent
instance's ``attach_session`` with that state, then runs the agent's
``load_session``/``resume_session`` as usual.

The store is bounded by the process's session budget: a parked session keeps
counting against ``max_sessions_total`` until it is re-attached or expires.
With an auth hook, only the principal that owned the session may re-attach
it; anyone else is told the session is unknown, as if it did not exist.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from ..agent.base import Agent, implements
from ..agent.server import AgentServer, AnswerAfterStart, Kwargs
from ..agent.sessions import Session
from ..peer.connection import Connection
from ..wire.errors import AcpError, InvalidParams
from .budget import HostedPool, HostedSessionTable, ProcessBudget

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ParkedSession:
    """One detached session: the framework's state, the agent's, and who may claim it."""

    session: Session
    state: Any
    principal: str | None
    deadline: float
    timer: asyncio.TimerHandle | None = None


class DetachedSessions:
    """The process's parked sessions, keyed by session id, each with its own expiry timer."""

    def __init__(self, budget: ProcessBudget, timeout_s: float) -> None:
        self.budget = budget
        self.timeout_s = timeout_s
        self._parked: dict[str, ParkedSession] = {}
        self.expired = 0

    def __len__(self) -> int:
        return len(self._parked)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._parked

    def get(self, session_id: str) -> ParkedSession | None:
        """The parked entry, for introspection; ``take`` is the only way to re-attach it."""
        return self._parked.get(session_id)

    def park(self, session: Session, state: Any, principal: str | None) -> None:
        """Keep ``session`` for the timeout; an older parked session with the same id is dropped."""
        self._drop(session.id)
        entry = ParkedSession(session, state, principal, time.monotonic() + self.timeout_s)
        self._arm(entry)
        self._parked[session.id] = entry
        self.budget.detached += 1

    def take(self, session_id: str, principal: str | None) -> ParkedSession | None:
        """Remove and return the parked session for ``principal``; None if none is parked.

        Parked under another principal: refused exactly like an unknown id, so
        the answer does not reveal that the session exists.
        """
        entry = self._parked.get(session_id)
        if entry is None:
            return None
        if entry.principal != principal:
            raise InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})
        self._drop(session_id)
        return entry

    def restore(self, entry: ParkedSession) -> None:
        """Put back a taken entry that could not be attached, keeping its original deadline."""
        if entry.deadline <= time.monotonic():
            return
        self._arm(entry)
        self._parked[entry.session.id] = entry
        self.budget.detached += 1

    def clear(self) -> None:
        """Drop every parked session (the host drains)."""
        for session_id in list(self._parked):
            self._drop(session_id)

    def _arm(self, entry: ParkedSession) -> None:
        delay = max(0.0, entry.deadline - time.monotonic())
        entry.timer = asyncio.get_running_loop().call_later(delay, self._expire, entry.session.id)

    def _expire(self, session_id: str) -> None:
        if self._drop(session_id):
            self.expired += 1
            log.debug("detached session %s expired", session_id)

    def _drop(self, session_id: str) -> bool:
        entry = self._parked.pop(session_id, None)
        if entry is None:
            return False
        if entry.timer is not None:
            entry.timer.cancel()
        self.budget.detached -= 1
        return True


class HostedAgentServer(AgentServer):
    """An AgentServer whose ``session/load`` and ``session/resume`` first re-attach a parked session."""

    def __init__(
        self,
        agent: Agent,
        conn: Connection,
        *,
        sessions: HostedSessionTable,
        pool: HostedPool,
        detached: DetachedSessions,
        principal: str | None,
    ) -> None:
        super().__init__(agent, conn, sessions=sessions, pool=pool)
        self.hosted_sessions = sessions
        self.detached = detached
        self.principal = principal

    @property
    def can_resume(self) -> bool:
        """Parking helps only an agent that serves session/load or session/resume."""
        return implements(self.agent, "load_session") or implements(self.agent, "resume_session")

    async def _load_session(self, kw: Kwargs) -> dict[str, Any] | AnswerAfterStart:
        self._reattach(kw["session_id"])
        return await super()._load_session(kw)

    async def _resume_session(self, kw: Kwargs) -> dict[str, Any] | AnswerAfterStart:
        self._reattach(kw["session_id"])
        return await super()._resume_session(kw)

    def _reattach(self, session_id: str) -> None:
        if session_id in self.sessions:
            return
        entry = self.detached.take(session_id, self.principal)
        if entry is None:
            return
        try:
            self.sessions.add(entry.session)
        except AcpError:
            self.detached.restore(entry)
            raise
        entry.session.last_active = time.monotonic()  # idle cleanup (R16) counts from the re-attach
        self.agent.attach_session(session_id, entry.state)

    def release_sessions(self, park: bool) -> None:
        """The connection ended (its prompts already joined): park its idle sessions, or drop them all."""
        table = self.hosted_sessions
        for session in table:
            table.remove(session.id)
            if not park or session.busy:
                continue
            try:
                state = self.agent.detach_session(session.id)
            except Exception:
                log.exception("detach_session(%r) failed; the session ends with its socket", session.id)
                continue
            self.detached.park(session, state, self.principal)
