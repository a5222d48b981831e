"""Sessions that outlive their socket for ``detached_session_timeout_s`` (hosting).

When a connection ends (EOF, reset, ping timeout) its prompts are still
cancelled, given their grace, aborted and joined (R13-R15); only then are its
idle sessions parked instead of being dropped: the framework's ``Session``
(cwd, MCP servers, mode, config options, ``data``) plus whatever the agent
returned from ``Agent.detach_session``. A ``session/load`` or
``session/resume`` for that id on a later connection takes it back, calls the
new agent instance's ``attach_session`` with that state, then runs the agent's
``load_session``/``resume_session`` as usual.

Where the session waits is the session store (``--session-store``,
hosting/store.py). The memory store keeps live objects in this process, as
before. A shared store (SQLite for the workers of one host, Redis for
replicas) keeps one JSON document per session, so any process can take it:
what ``detach_session`` returns must then be JSON (dict with str keys, list,
tuple (it comes back a list), str, int, float, bool, None). A state that is
not, or that encodes larger than ``max_parked_session_bytes``, is logged and
the session ends with its socket, never half-stored; so does a store that
fails (Redis down, disk full). The hot path of an attached session never
touches the store: only parking and re-attaching do.

Parked sessions count against ``max_sessions_total`` of the process that
parked them until they are re-attached here or their timeout passes (one
re-attached by another process keeps counting here until then: the count
errs on the safe side). With an auth hook, only the principal that owned the
session may re-attach it; anyone else is told the session is unknown, as if
it did not exist.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from ..agent.base import Agent, implements
from ..agent.pool import BackgroundPool
from ..agent.server import AgentServer
from ..agent.sessions import Session, SessionTable
from ..peer.connection import Connection
from ..wire.errors import AcpError, InvalidParams
from ..wire.limits import Limits
from .budget import HostedSessionTable, ProcessBudget
from .store import SessionStore, WrongOwner

log = logging.getLogger(__name__)

#: The version of a parked session's JSON document; another one is refused, not misread.
ENTRY_VERSION = 1

# orjson would quietly turn these into strings or dicts that attach_session never gave out.
_STRICT_JSON = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


class UnparkableState(ValueError):
    """A session could not be encoded for a shared store (not JSON, or too large)."""


def encode_parked(session: Session, state: Any, max_bytes: int) -> bytes:
    """One parked session as a JSON document: all of it or an :class:`UnparkableState`."""
    doc = {
        "v": ENTRY_VERSION,
        "id": session.id,
        "cwd": session.cwd,
        "mcpServers": session.mcp_servers,
        "mode": session.mode_id,
        "config": session.config,
        "data": session.data,
        "state": state,
    }
    try:
        blob = orjson.dumps(doc, option=_STRICT_JSON)
    except TypeError as exc:  # orjson.JSONEncodeError included
        raise UnparkableState(f"its state is not JSON ({exc})") from None
    if len(blob) > max_bytes:
        raise UnparkableState(f"it encodes to {len(blob)} bytes (max_parked_session_bytes is {max_bytes})")
    return blob


def decode_parked(blob: bytes) -> tuple[Session, Any]:
    """The session and agent state of :func:`encode_parked`'s document."""
    doc = orjson.loads(blob)
    if doc.get("v") != ENTRY_VERSION:
        raise ValueError(f"parked session document version {doc.get('v')!r}, expected {ENTRY_VERSION}")
    session = Session(doc["id"], doc["cwd"], doc["mcpServers"])
    session.mode_id = doc["mode"]
    if doc["config"]:
        session.config = doc["config"]
    if doc["data"]:
        session.data = doc["data"]
    return session, doc["state"]


@dataclass(slots=True)
class ParkedSession:
    """One detached session: the framework's state, the agent's, and who may claim it."""

    session: Session
    state: Any
    principal: str | None
    deadline: float
    timer: asyncio.TimerHandle | None = None
    blob: bytes | None = None  # as a shared store held it, to put back unchanged


class DetachedSessions:
    """The process's parked sessions: live objects here (memory), or entries in a shared store.

    For a shared store, what stays here is only the count of the sessions this
    process parked (one expiry timer each), for ``max_sessions_total``.
    """

    def __init__(self, budget: ProcessBudget, limits: Limits, store: SessionStore | None = None) -> None:
        self.budget = budget
        self.timeout_s = limits.detached_session_timeout_s
        self.max_entry_bytes = limits.max_parked_session_bytes
        self.store_timeout_s = limits.session_store_timeout_s
        self.store = store
        self._parked: dict[str, ParkedSession] = {}  # memory store
        self._owned: dict[str, asyncio.TimerHandle] = {}  # shared store: parked here, still counted
        self.expired = 0
        self.failed = 0  # sessions that could not be parked (state, size, store failure)

    @property
    def shared(self) -> bool:
        """Other processes can re-attach what this one parks."""
        return self.store is not None

    def __len__(self) -> int:
        return len(self._owned) if self.store is not None else len(self._parked)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._parked or session_id in self._owned

    def get(self, session_id: str) -> ParkedSession | None:
        """The parked entry (memory store), for introspection; ``take`` is the only way to re-attach it."""
        return self._parked.get(session_id)

    async def park(self, session: Session, state: Any, principal: str | None) -> bool:
        """Keep ``session`` for the timeout (an older one with the same id is replaced); False if it ended."""
        store = self.store
        if store is None:
            self._drop(session.id)
            entry = ParkedSession(session, state, principal, time.monotonic() + self.timeout_s)
            self._arm(entry)
            self._parked[session.id] = entry
            self.budget.detached += 1
            return True
        try:
            blob = encode_parked(session, state, self.max_entry_bytes)
        except UnparkableState as exc:
            self.failed += 1
            log.error("session %s not parked, it ends with its socket: %s", session.id, exc)
            return False
        return await self._put(session.id, principal, blob, self.timeout_s)

    async def _put(self, session_id: str, principal: str | None, blob: bytes, ttl_s: float) -> bool:
        assert self.store is not None
        try:
            async with asyncio.timeout(self.store_timeout_s):  # no task of its own, unlike wait_for
                await self.store.put(session_id, principal, blob, ttl_s)
        except Exception as exc:
            self.failed += 1
            log.error(
                "session %s not parked, it ends with its socket: session store %s failed: %r",
                session_id,
                self.store.name,
                exc,
            )
            return False
        self._own(session_id, ttl_s)
        return True

    async def take(self, session_id: str, principal: str | None) -> ParkedSession | None:
        """Remove and return the parked session for ``principal``; None if none is parked.

        Parked under another principal: refused exactly like an unknown id, so
        the answer does not reveal that the session exists. A store that fails
        is logged and the session treated as unknown.
        """
        store = self.store
        if store is None:
            entry = self._parked.get(session_id)
            if entry is None:
                return None
            if entry.principal != principal:
                raise _unknown(session_id)
            self._drop(session_id)
            return entry
        try:
            async with asyncio.timeout(self.store_timeout_s):
                got = await store.take(session_id, principal)
        except WrongOwner:
            raise _unknown(session_id) from None
        except Exception as exc:
            log.error("re-attaching session %s: session store %s failed: %r", session_id, store.name, exc)
            return None
        if got is None:
            return None
        self._disown(session_id)
        blob, left_s = got
        try:
            session, state = decode_parked(blob)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("parked session %s is unreadable and dropped: %r", session_id, exc)
            return None
        return ParkedSession(session, state, principal, time.monotonic() + left_s, blob=blob)

    async def restore(self, entry: ParkedSession) -> None:
        """Put back a taken entry that could not be attached, keeping its original deadline."""
        left = entry.deadline - time.monotonic()
        if left <= 0:
            return
        if self.store is None:
            self._arm(entry)
            self._parked[entry.session.id] = entry
            self.budget.detached += 1
            return
        assert entry.blob is not None
        await self._put(entry.session.id, entry.principal, entry.blob, left)

    def clear(self) -> None:
        """The host drains: the memory store drops every parked session; a shared store keeps
        them for whichever process is asked next, and this one stops counting them."""
        for session_id in list(self._parked):
            self._drop(session_id)
        for session_id in list(self._owned):
            self._disown(session_id)

    async def close(self) -> None:
        """Release the store's connections (after the drain)."""
        if self.store is not None:
            try:
                await self.store.close()
            except Exception as exc:
                log.warning("closing session store %s: %r", self.store.name, exc)

    def _own(self, session_id: str, ttl_s: float) -> None:
        self._disown(session_id)
        self._owned[session_id] = asyncio.get_running_loop().call_later(ttl_s, self._owned_expired, session_id)
        self.budget.detached += 1

    def _owned_expired(self, session_id: str) -> None:
        if self._owned.pop(session_id, None) is not None:
            self.budget.detached -= 1
            self.expired += 1

    def _disown(self, session_id: str) -> None:
        timer = self._owned.pop(session_id, None)
        if timer is not None:
            timer.cancel()
            self.budget.detached -= 1

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


def _unknown(session_id: str) -> InvalidParams:
    return InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})


class ParkedSessionSource:
    """One hosted connection's way to the parked sessions: the ``SessionSource`` its server
    asks before ``session/load`` and ``session/resume``, and where its sessions go when it ends."""

    __slots__ = ("detached", "principal")

    def __init__(self, detached: DetachedSessions, principal: str | None) -> None:
        self.detached = detached
        self.principal = principal

    async def reattach(self, session_id: str, sessions: SessionTable, agent: Agent) -> None:
        if session_id in sessions:
            return
        entry = await self.detached.take(session_id, self.principal)
        if entry is None:
            return
        try:
            sessions.add(entry.session)
        except AcpError:
            await self.detached.restore(entry)
            raise
        entry.session.last_active = time.monotonic()  # idle cleanup (R16) counts from the re-attach
        agent.attach_session(session_id, entry.state)

    async def release(self, table: SessionTable, agent: Agent, park: bool) -> None:
        """The connection ended (its prompts already joined): park its idle sessions, or drop them all.

        Every session leaves the table (and the agent's hands) before the first
        store call, so a store that stalls delays only the parking.
        """
        leaving: list[tuple[Session, Any]] = []
        for session in table:
            table.remove(session.id)
            if not park or session.busy:
                continue
            try:
                state = agent.detach_session(session.id)
            except Exception:
                log.exception("detach_session(%r) failed; the session ends with its socket", session.id)
                continue
            leaving.append((session, state))
        for session, state in leaving:
            await self.detached.park(session, state, self.principal)


class HostedAgentServer(AgentServer):
    """An AgentServer built the way a host builds one: a table and a pool that count against the
    process (hosting/budget.py), and the parked sessions as its session source.

    It adds to the server only what the host asks of a connection at its end;
    every request is served by the AgentServer's own methods.
    """

    def __init__(
        self,
        agent: Agent,
        conn: Connection,
        *,
        sessions: HostedSessionTable,
        pool: BackgroundPool,
        detached: DetachedSessions,
        principal: str | None,
    ) -> None:
        self.parked = ParkedSessionSource(detached, principal)
        super().__init__(agent, conn, sessions=sessions, pool=pool, source=self.parked)
        self.hosted_sessions = sessions
        self.detached = detached
        self.principal = principal

    @property
    def can_resume(self) -> bool:
        """Parking helps only an agent that serves session/load or session/resume."""
        return implements(self.agent, "load_session") or implements(self.agent, "resume_session")

    async def release_sessions(self, park: bool) -> None:
        """The connection ended: see ``ParkedSessionSource.release``."""
        await self.parked.release(self.hosted_sessions, self.agent, park)
