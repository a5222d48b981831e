"""The session table: one prompt slot per session, bounded size, idle eviction (R07, R16).

The table is part of the authoritative context: control requests change it
on the dispatch loop, background tasks share it (R02). A session's prompt
slot is a small state machine, IDLE <-> RUNNING, moved only by
``begin_turn``/``end_turn``; a second prompt while RUNNING is refused (R07).
Idle eviction never touches a RUNNING session (R16).

A subagent child session (``ChildSession``) is a row of the same table,
owned by its parent: it counts against the same capacity, cancelling the
parent's turn cancels the children's work too, and removing the parent
removes them. Its turns are the agent's own subagent work, never a
client's ``session/prompt``.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ..wire.errors import InvalidParams, InvalidRequest, PromptInProgress, ServerBusy
from .cancel import CancelToken


def new_session_id(prefix: str) -> str:
    """``prefix`` and 128 random bits in hex: unique in the process and beyond, as hosting needs
    (a parked session is found again by its id). ``uuid4().hex`` holds 122 of the same bits and
    costs more: it builds a ``UUID`` object on the way."""
    return prefix + os.urandom(16).hex()


class RunningTurn(Protocol):
    """What a session holds of its running prompt (the pool's Job)."""

    def cancel(self, reason: str = "cancelled") -> None: ...


class SlotState(enum.Enum):
    IDLE = "idle"
    RUNNING = "running"


class Session:
    """Framework-owned state of one ACP session; ``data`` is the agent's."""

    __slots__ = (
        "_children",
        "_config",
        "_data",
        "_token",
        "cwd",
        "id",
        "last_active",
        "mcp_servers",
        "mode_id",
        "slot",
        "turn",
    )

    def __init__(self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None) -> None:
        # The token and the dicts are made on first use: most sessions of a
        # pipelined session/new never need them (a third of this constructor).
        self.id = session_id
        self.cwd = cwd
        self.mcp_servers = mcp_servers if mcp_servers is not None else []
        self.mode_id: str | None = None
        self._config: dict[str, Any] | None = None
        self._data: dict[str, Any] | None = None
        self.slot = SlotState.IDLE
        self._token: CancelToken | None = None
        self.turn: RunningTurn | None = None
        self.last_active = time.monotonic()
        self._children: dict[str, ChildSession] | None = None

    @property
    def children(self) -> dict[str, ChildSession]:
        """The subagent child sessions this session owns, by id."""
        children = self._children
        if children is None:
            children = self._children = {}
        return children

    @property
    def token(self) -> CancelToken:
        """The token the *next* turn will use (R10, R11)."""
        token = self._token
        if token is None:
            token = self._token = CancelToken()
        return token

    @property
    def config(self) -> dict[str, Any]:
        """Configuration options set on this session (``session/set_config_option``)."""
        config = self._config
        if config is None:
            config = self._config = {}
        return config

    @config.setter
    def config(self, value: dict[str, Any]) -> None:
        self._config = value

    @property
    def data(self) -> dict[str, Any]:
        """The agent's own per-session state."""
        data = self._data
        if data is None:
            data = self._data = {}
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data = value

    def begin_turn(self, job: RunningTurn) -> CancelToken:
        """Reserve the prompt slot and this turn's token, before the task exists."""
        if self.slot is SlotState.RUNNING:
            self.check_free()
        self.slot = SlotState.RUNNING
        self.turn = job
        self.last_active = time.monotonic()
        return self.token

    def check_free(self) -> None:
        """Raise PromptInProgress while a turn holds the slot (R07), saying when it is one answered for (R30)."""
        if self.slot is SlotState.RUNNING:
            if getattr(self.turn, "orphaned", False):  # answered for, its body still unwinding (R30)
                raise PromptInProgress(
                    f"session {self.id!r}: the previous turn was cancelled and is still finishing its "
                    "cancellation; retry once it has ended"
                )
            raise PromptInProgress(
                f"session {self.id!r} already has a prompt running; "
                "cancel it or wait for its response"
            )

    def end_turn(self, job: RunningTurn) -> None:
        if self.turn is job:
            self.slot = SlotState.IDLE
            self.turn = None
            self.last_active = time.monotonic()

    def cancel_turn(self, reason: str = "cancelled") -> bool:
        """Cancel the running turn (if any) and install a fresh token (R11).

        The work running on every child session below this one is cancelled
        with it, each child getting a fresh token too.
        """
        if self._children:
            for child in _descendants(self):
                child.cancel_own_turn(reason)
        return self.cancel_own_turn(reason)

    def cancel_own_turn(self, reason: str = "cancelled") -> bool:
        """``cancel_turn`` for this session alone."""
        job = self.turn
        if job is None:
            return False  # nothing running: the next turn's token stays clean
        self._token = None  # a fresh one for later turns, made when one needs it
        job.cancel(reason)
        return True

    @property
    def busy(self) -> bool:
        return self.slot is SlotState.RUNNING


class ChildSession(Session):
    """A subagent's session, announced on its parent with ``subagent_update``."""

    __slots__ = ("parent",)

    def __init__(self, session_id: str, parent: Session) -> None:
        super().__init__(session_id, parent.cwd)
        self.parent = parent

    def begin_turn(self, job: RunningTurn) -> CancelToken:
        raise InvalidRequest(
            f"session {self.id!r} is a subagent of {self.parent.id!r}: its work is the agent's, "
            "it takes no session/prompt"
        )

    def begin_child_turn(self, job: RunningTurn) -> CancelToken:
        """Reserve the slot and token for the agent's own work on this child (R07, R10)."""
        return super().begin_turn(job)


def _descendants(session: Session) -> list[ChildSession]:
    """Every child session below ``session``, iteratively: how deep subagents nest is up to the agent."""
    found: list[ChildSession] = []
    stack = list(session.children.values())
    while stack:
        child = stack.pop()
        found.append(child)
        if child._children:
            stack.extend(child._children.values())
    return found


class SessionTable:
    """All sessions of one connection, at most ``capacity`` of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._sessions: dict[str, Session] = {}
        #: The sessions by id, for lookups on hot paths; change the table only through its methods.
        self.by_id: Mapping[str, Session] = self._sessions

    def check_capacity(self) -> None:
        """Raise ServerBusy if no further session fits."""
        if len(self._sessions) >= self.capacity:
            raise ServerBusy(
                f"{len(self._sessions)} sessions are open (limit {self.capacity}); "
                "close one first"
            )

    def open(self, session_id: str, cwd: str, mcp_servers: list[Any] | None) -> Session:
        """The session with this id, made and added if there is none: what an opening method needs.

        One lookup for the commonest case, a new id (``session/new``); a
        subclass's ``add`` still runs for every session made here.
        """
        session = self._sessions.get(session_id)
        if session is None:
            session = self.add(Session(session_id, cwd, mcp_servers))
        return session

    def add(self, session: Session) -> Session:
        if session.id in self._sessions:
            raise InvalidParams(f"session {session.id!r} already exists")
        self.check_capacity()
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})
        return session

    def find(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def open_child(self, parent: Session, child_id: str) -> ChildSession:
        """``parent``'s child session ``child_id``, added if new (counted like any session).

        An id that names another session, or another parent's child, is refused.
        """
        session = self._sessions.get(child_id)
        if session is None:
            child = ChildSession(child_id, parent)
            self.add(child)
            parent.children[child_id] = child
            return child
        if not isinstance(session, ChildSession) or session.parent is not parent:
            raise InvalidParams(f"session {child_id!r} exists and is not a subagent of {parent.id!r}")
        return session

    def remove(self, session_id: str) -> Session | None:
        """Remove a session, the child sessions below it, and its place in its parent."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return None
        if isinstance(session, ChildSession):
            siblings = session.parent._children
            if siblings is not None:
                siblings.pop(session_id, None)
        if session._children:
            for child in list(session._children):
                self.remove(child)
        return session

    def idle_longer_than(self, seconds: float, now: float | None = None) -> list[Session]:
        """Sessions idle past ``seconds``; never one with a prompt running (R16)."""
        now = time.monotonic() if now is None else now
        return [
            s for s in self._sessions.values() if not s.busy and now - s.last_active > seconds
        ]

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions
