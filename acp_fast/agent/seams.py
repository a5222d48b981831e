"""What a host composes into an AgentServer: where sessions come from, and a shared prompt budget.

A server on its own connection needs neither; a host passes both to serve
many connections in one process (hosting/detached.py, hosting/budget.py),
instead of overriding the server's or the pool's own methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .base import Agent
    from .sessions import SessionTable


class SessionSource(Protocol):
    """Sessions kept beyond one connection, taken back by ``session/load`` and ``session/resume``."""

    async def reattach(self, session_id: str, sessions: SessionTable, agent: Agent) -> None:
        """Put the session ``session_id`` into ``sessions`` if this source holds it, before the
        agent's own load or resume runs; raise an AcpError to refuse the request."""


class PromptBudget(Protocol):
    """A count of running prompts shared by every connection's pool (R28)."""

    def check_prompt(self) -> None:
        """Raise ServerBusy when no further prompt may start; called before a prompt is admitted."""

    def prompt_started(self) -> None:
        """A prompt was admitted."""

    def prompt_ended(self) -> None:
        """An admitted prompt let go of its slots (every path, R15)."""
