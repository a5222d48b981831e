"""Hosting: many ACP connections per process, over WebSocket and Streamable HTTP (``server`` extra: picows, h11)."""

from ..extras import require

require("server", "hosting agents over WebSocket and HTTP (--listen, serve_ws, run_host)")

from .auth import bearer_token  # noqa: E402
from .config import HostConfig, ListenAddress  # noqa: E402
from .forwarded import TrustedProxies  # noqa: E402
from .server import AcpHost, run_host, serve_ws  # noqa: E402

__all__ = ["AcpHost", "HostConfig", "ListenAddress", "TrustedProxies", "bearer_token", "run_host", "serve_ws"]
