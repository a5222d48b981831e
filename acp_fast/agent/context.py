"""The connection context, the running turn, and how background work finds them (R01, R02).

The context is immutable: a control request that changes it (initialize,
authenticate, logout) installs a new object on the dispatch loop before the
next message is admitted, so a background job holding a snapshot sees the
context as of its admission and nothing half-updated. What is shared rather
than snapshotted (the session table, application state, the transport) lives
beside it on the server.

A background task finds its snapshot and its turn through two context
variables, set once when the task starts (``enter_turn``); ``current_context`` and
``current_turn`` read them. They live here, below everything that sets or
reads them (the server, the pool, subagent runs), so no module of the agent
layer has to import another's private names to reach them.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cancel import CancelToken
    from .sessions import Session


@dataclass(frozen=True, slots=True)
class Context:
    initialized: bool = False
    protocol_version: int | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    authenticated: bool = False
    auth_method: str | None = None

    def evolve(self, **changes: Any) -> Context:
        return replace(self, **changes)

    def client_supports(self, path: tuple[str, ...]) -> bool:
        """Whether the client advertised the capability at ``path`` (missing means no)."""
        node: Any = self.client_capabilities
        for key in path:
            if type(node) is not dict:
                return False
            node = node.get(key)
        return node is not None and node is not False


class Turn:
    """What a running prompt can ask about itself (see ``current_turn``)."""

    __slots__ = ("context", "request_id", "session", "token")

    def __init__(
        self,
        session: Session,
        token: CancelToken,
        request_id: str | int,
        context: Context | None = None,
    ) -> None:
        self.session = session
        self.token = token
        self.request_id = request_id
        #: The connection context as of this prompt's admission (R02 snapshot).
        self.context = context

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled


#: The running task's turn and context snapshot. Set by the runtime only, once as a
#: background task starts (the server for a prompt or an ``mcp/*`` job, a subagent run
#: for its child); read through ``current_turn`` and ``current_context``.
turn_var: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("acp_fast_turn", default=None)
context_var: contextvars.ContextVar[Context | None] = contextvars.ContextVar("acp_fast_context", default=None)


def enter_turn(turn: Turn) -> None:
    """Make ``turn`` and its admission snapshot the calling task's (R02)."""
    turn_var.set(turn)
    context_var.set(turn.context)


def current_context() -> Context:
    """The connection context as of the admission of the running background job (R02).

    Set in every ``session/prompt`` and ``mcp/*`` task: later control requests
    (``authenticate``, ``logout``) do not change what a running job sees.
    """
    context = context_var.get()
    if context is None:
        raise RuntimeError("current_context() called outside a background job")
    return context


def current_turn() -> Turn:
    """The prompt turn the calling task belongs to."""
    turn = turn_var.get()
    if turn is None:
        raise RuntimeError("current_turn() called outside a session/prompt task")
    return turn
