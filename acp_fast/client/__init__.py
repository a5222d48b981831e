"""The client side of an ACP connection: ClientSideConnection, sessions, ready-made connections."""

from .connection import (
    AgentProcess,
    ClientHandler,
    ClientSession,
    ClientSideConnection,
    InMemoryPair,
    PromptResult,
    SessionBuilder,
    connect_in_memory,
    spawn_agent,
)

__all__ = [
    "AgentProcess",
    "ClientHandler",
    "ClientSession",
    "ClientSideConnection",
    "InMemoryPair",
    "PromptResult",
    "SessionBuilder",
    "connect_in_memory",
    "spawn_agent",
]
