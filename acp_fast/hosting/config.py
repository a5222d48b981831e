"""What a host is configured with: the shared types of the hosting room and one frozen ``HostConfig``.

The per-connection bounds stay in :class:`~acp_fast.wire.limits.Limits`; the
options of a host (its path, auth hook, origins, session store, observability,
trusted proxies, where it listens) travel together in one ``HostConfig``,
checked once when it is built: a bad value raises
:class:`~acp_fast.wire.errors.ConfigError` naming the field, before any socket
is opened. ``AcpHost``, ``serve_ws`` and ``run_host`` take ``(factory, config)``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..wire.errors import ConfigError
from ..wire.limits import Limits
from . import cors
from .forwarded import TrustedProxies
from .store import parse_spec

if TYPE_CHECKING:
    from ..agent.base import Agent
    from .store import SessionStore

AgentFactory = Callable[[], "Agent"]
#: Given the upgrade request's headers (case-insensitive), and if it takes a second argument the
#: client's address (hosting/forwarded.py): refuse with 401 (False), accept (True), or accept as a
#: named principal (a non-empty string). The principal owns the connection's sessions: only it
#: may re-attach them after a reconnect (hosting/detached.py).
Authorize = Callable[[Mapping[str, str]], bool | str] | Callable[[Mapping[str, str], str], bool | str]

CONNECTION_ID_HEADER = "Acp-Connection-Id"
SESSION_ID_HEADER = "Acp-Session-Id"
ACCESS_LOG_FORMATS = ("text", "json")


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where to listen: ``host``/``port`` for TCP, ``unix_path`` for a unix socket."""

    host: str | None = None
    port: int | None = None
    unix_path: str | None = None

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        """``HOST:PORT``, ``[V6]:PORT`` or ``unix:PATH``."""
        if text.startswith("unix:"):
            path = text[len("unix:") :]
            if not path:
                raise ValueError("unix: needs a path, e.g. unix:/run/acp.sock")
            return cls(unix_path=path)
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"expected HOST:PORT or unix:PATH, got {text!r}")
        return cls(host=host.strip("[]") or None, port=int(port))

    def __str__(self) -> str:
        return f"unix:{self.unix_path}" if self.unix_path else f"{self.host or '*'}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class HostConfig:
    """Everything a host is told, validated together on construction (``ConfigError`` naming the field).

    ``session_store``: where parked sessions wait (``memory``, ``sqlite:PATH``,
    ``redis://HOST:PORT/DB`` or a ``SessionStore``); None is memory.
    ``metrics``: serve ``GET /metrics`` on the hosting port; ``metrics_listen``
    (``HOST:PORT``): on a port of its own (the metrics extra); ``metrics_group``:
    with ``--workers N``, the directory where the workers serve each other their metrics.
    ``otel``: OpenTelemetry spans per request and per prompt turn, through
    ``tracer_provider`` or the global one (the otel extra). ``access_log``:
    ``text`` or ``json``, one stderr line per HTTP request and WebSocket connection.
    ``proxies``: whose PROXY and forwarding headers name the client (hosting/forwarded.py).
    ``listen``, ``reuse_port``, ``use_uvloop`` and ``freeze_gc`` are for the
    process that listens (``serve_ws``, ``run_host``).
    """

    limits: Limits = field(default_factory=Limits)
    listen: ListenAddress = ListenAddress(host="127.0.0.1", port=0)
    path: str = "/acp"
    authorize: Authorize | None = None
    allowed_origins: Collection[str] = ()
    web_console: bool = False
    session_store: str | SessionStore | None = None
    metrics: bool = False
    metrics_listen: str | None = None
    metrics_group: str | None = None
    otel: bool = False
    tracer_provider: Any = None
    access_log: str | None = None
    proxies: TrustedProxies = field(default_factory=TrustedProxies)
    reuse_port: bool = False
    use_uvloop: bool = True
    freeze_gc: bool = False

    def __post_init__(self) -> None:
        if self.proxies is None:  # the keyword adapters pass None for "no trusted proxy"
            object.__setattr__(self, "proxies", TrustedProxies())
        try:  # '*' only without an auth hook: a cross-field rule (hosting/cors.py)
            origins = cors.check_origins(self.allowed_origins, auth=self.authorize is not None)
        except ValueError as exc:
            raise ConfigError("allowed_origins", str(exc)) from None
        object.__setattr__(self, "allowed_origins", origins)
        if self.metrics_listen is not None:
            try:
                if ListenAddress.parse(self.metrics_listen).unix_path is not None:
                    raise ValueError("takes HOST:PORT (a unix socket is not served)")
            except ValueError as exc:
                raise ConfigError("metrics_listen", str(exc)) from None
        if isinstance(self.session_store, str):
            try:
                parse_spec(self.session_store)
            except ValueError as exc:
                raise ConfigError("session_store", str(exc)) from None
        if self.access_log is not None and self.access_log not in ACCESS_LOG_FORMATS:
            raise ConfigError("access_log", f"expected text or json, got {self.access_log!r}")

    @property
    def metrics_address(self) -> ListenAddress | None:
        """The metrics listener's own address, if it has one."""
        return ListenAddress.parse(self.metrics_listen) if self.metrics_listen else None

    @classmethod
    def of(cls, limits: Limits | None = None, **options: Any) -> HostConfig:
        """The config the keyword signatures describe (``limits`` plus any ``HostConfig`` field by name)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unexpected host option(s): {', '.join(unknown)}")
        return cls(limits=limits or Limits(), **options)
