"""What the installed official SDK (``acp``) offers, found out at import instead of assumed.

Releases differ in the methods their router dispatches (0.8 routes
``session/set_model`` and gates ``session/list`` as unstable; 0.10 adds
``session/set_config_option`` and ``session/close``; 0.12 drops
``session/set_model``), in schema names (``KillTerminalCommandResponse``
before 0.10, ``KillTerminalResponse`` after) and in what exists at all
(elicitation from 0.10, message transports from 0.12). The routes are read
from the SDK's own ``build_agent_router``: a probe agent that defines
nothing is routed, and each route says its method, whether it is unstable
and whether its result goes through ``normalize_result``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any

try:
    from acp import schema as S
    from acp.agent.router import build_agent_router
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("acp_fast.compat needs the official SDK: pip install 'acp-fast[compat]'") from exc
from pydantic import BaseModel


def _version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


#: The installed ``agent-client-protocol`` release, e.g. ``(0, 10, 1)``.
SDK_VERSION_TEXT: str = metadata.version("agent-client-protocol")
SDK_VERSION: tuple[int, ...] = _version_tuple(SDK_VERSION_TEXT)


def model(*names: str) -> type[BaseModel] | None:
    """The first of ``names`` the installed ``acp.schema`` defines (releases renamed some)."""
    for name in names:
        found = getattr(S, name, None)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return None


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """One method the installed SDK's agent router dispatches."""

    method: str
    attr: str
    models: tuple[type[BaseModel], ...]
    unstable: bool
    normalized: bool  # the result goes through the SDK's normalize_result
    notification: bool = False


#: wire method -> (agent attribute, request model names); the names cover every release from 0.8.
_ATTRS: dict[str, tuple[str, tuple[str, ...]]] = {
    "initialize": ("initialize", ("InitializeRequest",)),
    "session/new": ("new_session", ("NewSessionRequest",)),
    "session/load": ("load_session", ("LoadSessionRequest",)),
    "session/list": ("list_sessions", ("ListSessionsRequest",)),
    "session/close": ("close_session", ("CloseSessionRequest",)),
    "session/set_mode": ("set_session_mode", ("SetSessionModeRequest",)),
    "session/set_model": ("set_session_model", ("SetSessionModelRequest",)),
    "session/set_config_option": (
        "set_config_option",
        ("SetSessionConfigOptionBooleanRequest", "SetSessionConfigOptionSelectRequest"),
    ),
    "session/prompt": ("prompt", ("PromptRequest",)),
    "authenticate": ("authenticate", ("AuthenticateRequest",)),
    "session/fork": ("fork_session", ("ForkSessionRequest",)),
    "session/resume": ("resume_session", ("ResumeSessionRequest",)),
    "session/cancel": ("cancel", ("CancelNotification",)),
}


class _Probe:
    """An agent that defines nothing: the router still registers every route it knows."""


def _discover_routes() -> dict[str, RouteInfo]:
    router: Any = build_agent_router(_Probe(), use_unstable_protocol=False)  # type: ignore[arg-type]
    found: dict[str, RouteInfo] = {}
    tables = ((getattr(router, "_requests", {}), False), (getattr(router, "_notifications", {}), True))
    for table, notification in tables:
        for method, route in table.items():
            entry = _ATTRS.get(method)
            if entry is None:
                continue
            attr, names = entry
            models = tuple(m for m in (model(n) for n in names) if m is not None)
            if not models:
                continue
            found[method] = RouteInfo(
                method=method,
                attr=attr,
                models=models,
                unstable=bool(getattr(route, "warn_unstable", False)),
                normalized=getattr(route, "adapt_result", None) is not None,
                notification=notification,
            )
    return found


#: Every method the installed SDK routes to an agent, keyed by wire name.
ROUTES: dict[str, RouteInfo] = _discover_routes()
#: Agent attributes the SDK routes only with ``use_unstable_protocol=True``.
UNSTABLE_ATTRS: frozenset[str] = frozenset(r.attr for r in ROUTES.values() if r.unstable)


def describe() -> dict[str, Any]:
    """A summary for logs and ``acp-fast`` diagnostics."""
    return {
        "sdk": SDK_VERSION_TEXT,
        "methods": sorted(ROUTES),
        "unstable": sorted(UNSTABLE_ATTRS),
    }
