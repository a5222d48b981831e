"""The ACP agent side: the Agent base, the server policy on a peer, and what it owns."""

from .base import Agent
from .context import Turn, current_context, current_turn

__all__ = ["Agent", "Turn", "current_context", "current_turn"]
