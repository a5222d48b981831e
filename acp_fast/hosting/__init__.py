"""Hosting: many ACP connections per process, over WebSocket and Streamable HTTP (``server`` extra: picows, h11)."""

from .auth import bearer_token
from .server import AcpHost, ListenAddress, run_host, serve_ws

__all__ = ["AcpHost", "ListenAddress", "bearer_token", "run_host", "serve_ws"]
