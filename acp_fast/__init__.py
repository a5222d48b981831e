"""acp_fast: a fast, bounded agent-side server runtime for the Agent Client Protocol."""

from ._version import __version__
from .agent.base import Agent
from .agent.cancel import CancelToken
from .agent.client_handle import CapabilityNotSupported, Client
from .agent.context import Turn, current_context, current_turn
from .agent.serve import run_agent, serve_stdio
from .agent.server import AgentServer
from .peer.connection import Connection, IncomingRequest
from .peer.pending import PendingRequest
from .wire.errors import (
    AcpError,
    AuthRequired,
    ConnectionClosed,
    DeadlockError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    PromptInProgress,
    RequestCancelled,
    ResourceNotFound,
    ServerBusy,
    ServerError,
)
from .wire.limits import Limits

__all__ = [
    "AcpError",
    "Agent",
    "AgentServer",
    "AuthRequired",
    "CancelToken",
    "CapabilityNotSupported",
    "Client",
    "Connection",
    "ConnectionClosed",
    "DeadlockError",
    "IncomingRequest",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "Limits",
    "MethodNotFound",
    "ParseError",
    "PendingRequest",
    "PromptInProgress",
    "RequestCancelled",
    "ResourceNotFound",
    "ServerBusy",
    "ServerError",
    "Turn",
    "__version__",
    "current_context",
    "current_turn",
    "run_agent",
    "serve_stdio",
]
