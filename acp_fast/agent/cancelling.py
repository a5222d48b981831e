"""How a cancel reaches a turn: ``session/cancel``, ``$/cancel_request`` and ``max_turn_s`` (R06, R10-R12, R30).

A cancel goes to the session (``Session.cancel_turn``: a fresh token for
later turns, the running turn's token set and its task cancelled), or, for a
request that is no prompt, to its job. The agent's ``cancel`` hook, when it
has one, runs afterwards beside the loop; the cancel itself never waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..wire.errors import InvalidParams, ServerBusy
from .methods import AGENT_METHODS

if TYPE_CHECKING:
    from ..peer.connection import Connection
    from ..wire.jsonrpc import Notification
    from .base import Agent
    from .pool import BackgroundPool, Job
    from .sessions import SessionTable

log = logging.getLogger(__name__)

Kwargs = dict[str, Any]


class Canceller:
    """One connection's cancels, for its session table and its pool."""

    __slots__ = ("_agent", "_conn", "_fit", "_hook", "_pool", "_sessions")

    def __init__(
        self,
        agent: Agent,
        conn: Connection,
        sessions: SessionTable,
        pool: BackgroundPool,
        fit: Callable[[str, Kwargs], Kwargs],
        hook: bool,
    ) -> None:
        """``fit``: the params as the agent's handler takes them; ``hook``: the agent overrides ``cancel``."""
        self._agent = agent
        self._conn = conn
        self._sessions = sessions
        self._pool = pool
        self._fit = fit
        self._hook = hook

    def on_notification(self, note: Notification) -> None:
        """``session/cancel`` and ``$/cancel_request`` (R06, R10-R12).

        Synchronous, so it can run straight from the read callback (see
        dispatch).
        """
        spec = AGENT_METHODS[note.method]
        try:
            kwargs = spec.parse(note.params)
        except InvalidParams as exc:  # R06: logged and dropped, never answered
            log.warning("dropped malformed %s: %s", note.method, exc.message)
            return
        if note.method == "session/cancel":
            self.cancel_session(kwargs["session_id"], kwargs.get("field_meta"))
        else:
            self.cancel_request(kwargs["request_id"])

    def cancel_session(
        self, session_id: str, field_meta: dict[str, Any] | None = None, reason: str = "session/cancel"
    ) -> None:
        session = self._sessions.find(session_id)
        if session is None:
            log.debug("session/cancel for unknown session %r ignored", session_id)
            return
        session.cancel_turn(reason)
        if self._hook:  # the agent's own reaction runs beside the loop, not on it
            meta = {"field_meta": field_meta} if field_meta else {}
            hook = self._agent.cancel(**self._fit("cancel", {"session_id": session_id, **meta}))
            self._conn.spawn(hook, name=f"acp.cancel_hook:{session_id}")

    def turn_timed_out(self, job: Job) -> None:
        """A turn ran past ``max_turn_s``: cancelled as a ``session/cancel`` would (R30)."""
        session = job.session
        if session is None or session.turn is not job:
            job.cancel("max_turn_s (timeout)")
            return
        try:
            self.cancel_session(session.id, reason="max_turn_s (timeout)")
        except ServerBusy as exc:  # the turn is cancelled; only the agent's cancel hook could not be spawned
            log.warning("cancel hook for session %r not run after its timeout: %s", session.id, exc.message)

    def cancel_request(self, request_id: str | int) -> None:
        job = self._pool.get(request_id)
        if job is None:
            return  # finished already, or never ours: the normal response stands
        if job.session is not None:
            job.session.cancel_turn("$/cancel_request")
        else:
            job.cancel("$/cancel_request")
