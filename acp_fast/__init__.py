"""acp_fast: a fast, bounded agent-side server runtime for the Agent Client Protocol."""

from ._version import __version__
from .agent import Agent, Turn, current_context, current_turn
from .cancel import CancelToken
from .client_api import CapabilityNotSupported, Client
from .dispatch import Connection, IncomingRequest
from .errors import (
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
from .limits import Limits
from .pending import PendingRequest
from .server import AgentServer, run_agent, serve_stdio

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
