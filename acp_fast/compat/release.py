"""What the installed official SDK (``acp``) offers, found out at import instead of assumed.

Releases differ in the methods their router dispatches (0.8 routes
``session/set_model`` and gates ``session/list`` as unstable; 0.10 adds
``session/set_config_option`` and ``session/close``; 0.12 drops
``session/set_model``), in schema names (``KillTerminalCommandResponse``
before 0.10, ``KillTerminalResponse`` after) and in what exists at all
(elicitation from 0.10, message transports from 0.12; 1.0 adds ``logout``,
``session/delete``, ``providers/*``, ``nes/*``, ``document/*`` and an agent-side
``mcp/message``). The routes are read from the SDK's own ``build_agent_router``,
built for a probe agent that defines every attribute: each route gives its
method, kind, unstable gate and whether its result goes through
``normalize_result``; the handler's attribute and request model come from the
``acp.Agent`` protocol's route declarations (1.x, the ones
``MessageRouter.from_protocol`` reads) or, before 1.0, from the wrapper the
router made around the probe's handler.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, get_args

from ..extras import MissingExtra

try:
    from acp import schema as S
    from acp.agent.connection import AgentSideConnection as SdkAgentSideConnection
    from acp.agent.router import build_agent_router
    from acp.interfaces import Agent as SdkAgentProtocol
except ImportError as exc:  # exercised by .ci/package-check's plain install
    raise MissingExtra("compat", "serving an agent written on the official SDK", exc.name or "acp") from exc
from pydantic import BaseModel, TypeAdapter

log = logging.getLogger("acp_fast.compat")

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

#: Loop turns the release's runtime lets pass between a handler's return and the write of its
#: answer, in which tasks the handler started still run (an update such a task sends in them goes
#: out before the answer). Before 1.0 the handler's own task queues the answer as it returns: none.
#: 1.x runs the handler in a task of its own and queues the answer from a second task that waits
#: for it (``asyncio.wait``): two. (compat passes none, or two or more: see ``agent._pass_turns``.)
ANSWER_TURNS: int = 2 if SDK_VERSION >= (1,) else 0


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
    #: Wire params to the request model, as the release validates them (1.x may declare its own).
    validator: Callable[[Any], BaseModel] | None = None
    #: 1.x: the model to the handler's kwargs, when the protocol declares its own conversion.
    adapt_params: Callable[[BaseModel], dict[str, Any]] | None = None


#: Routes whose handler closure names no request model (0.10 and 0.12 build ``set_config_option``'s
#: own wrapper): the models by schema name, tried in order.
_CUSTOM_MODELS: dict[str, tuple[str, ...]] = {
    "session/set_config_option": ("SetSessionConfigOptionBooleanRequest", "SetSessionConfigOptionSelectRequest"),
}


def _models_of(request_type: Any) -> tuple[type[BaseModel], ...]:
    """The pydantic models in a request type: a model, or a union or ``Annotated`` of models."""
    if isinstance(request_type, type) and issubclass(request_type, BaseModel):
        return (request_type,)
    found: list[type[BaseModel]] = []
    for arg in get_args(request_type):
        found.extend(m for m in _models_of(arg) if m not in found)
    return tuple(found)


def _closure(func: Any) -> dict[str, Any]:
    """The variables a function closes over, by name (what the router's wrapper was made with)."""
    code = getattr(func, "__code__", None)
    cells = getattr(func, "__closure__", None) or ()
    if code is None:
        return {}
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars, cells, strict=False)}


def _protocol_routes() -> dict[tuple[str, bool], tuple[str, Any]]:
    """1.x: (method, is notification) -> (attribute, route metadata), from the ``acp.Agent`` protocol's
    ``__route__`` declarations that ``MessageRouter.from_protocol`` builds its router from."""
    found: dict[tuple[str, bool], tuple[str, Any]] = {}
    for attr, member in inspect.getmembers(SdkAgentProtocol):
        meta = getattr(member, "__route__", None)
        method = getattr(meta, "method", None)
        if isinstance(method, str):
            found[(method, getattr(meta, "kind", "request") == "notification")] = (attr, meta)
    return found


class _Probe:
    """An agent that defines every attribute: the router then wraps each route's handler, and the
    wrapper names the attribute and (before 1.0) the request model it validates."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        async def handler(**kwargs: Any) -> None:
            return None

        return handler


def _one_model_validator(models: tuple[type[BaseModel], ...]) -> Callable[[Any], BaseModel]:
    if len(models) == 1:
        return models[0].model_validate
    first, last = models[0], models[-1]

    def pick(wire: Any) -> BaseModel:  # set_config_option: the boolean variant only when asked for
        boolean = isinstance(wire, dict) and wire.get("type") == "boolean"
        return (first if boolean else last).model_validate(wire)

    return pick


def _describe(method: str, notification: bool, route: Any, declared: Any) -> RouteInfo | None:
    validator: Callable[[Any], BaseModel] | None
    if declared is not None:  # 1.x: the protocol's declaration, validated as from_protocol does
        attr, meta = declared
        models = _models_of(meta.request_type)
        validator = meta.validate_params or TypeAdapter(meta.request_type).validate_python
        adapt_params = meta.adapt_params
    else:  # before 1.0: the router's wrapper closure
        closure = _closure(getattr(route, "func", None))
        attr = closure.get("attr")
        models = _models_of(closure.get("model"))
        if not models:
            models = tuple(m for m in (model(n) for n in _CUSTOM_MODELS.get(method, ())) if m is not None)
        validator = adapt_params = None
    if not isinstance(attr, str) or not models:
        return None
    return RouteInfo(
        method=method,
        attr=attr,
        models=models,
        unstable=bool(getattr(route, "warn_unstable", False)),
        normalized=getattr(route, "adapt_result", None) is not None,
        notification=notification,
        validator=validator or _one_model_validator(models),
        adapt_params=adapt_params,
    )


def _discover_routes() -> tuple[dict[str, RouteInfo], dict[str, RouteInfo]]:
    router: Any = build_agent_router(_Probe(), use_unstable_protocol=False)
    declared = _protocol_routes()
    found: tuple[dict[str, RouteInfo], dict[str, RouteInfo]] = ({}, {})
    tables = ((getattr(router, "_requests", {}), False), (getattr(router, "_notifications", {}), True))
    for table, notification in tables:
        for method, route in table.items():
            info = _describe(method, notification, route, declared.get((method, notification)))
            if info is None:
                log.warning("the SDK routes %s, but compat cannot tell its handler or model: not served", method)
                continue
            found[notification][method] = info
    return found


#: Every request the installed SDK routes to an agent, keyed by wire name.
REQUEST_ROUTES: dict[str, RouteInfo]
#: Every notification it routes (``session/cancel``; 1.x adds ``document/*``, ``nes/*``, ``mcp/message``).
NOTIFICATION_ROUTES: dict[str, RouteInfo]
REQUEST_ROUTES, NOTIFICATION_ROUTES = _discover_routes()
#: Both, keyed by wire name; where a method is both (1.x ``mcp/message``), the request.
ROUTES: dict[str, RouteInfo] = {**NOTIFICATION_ROUTES, **REQUEST_ROUTES}
#: Agent attributes the SDK routes only with ``use_unstable_protocol=True``.
UNSTABLE_ATTRS: frozenset[str] = frozenset(
    r.attr for r in (*REQUEST_ROUTES.values(), *NOTIFICATION_ROUTES.values()) if r.unstable
)


def client_call_signature(name: str) -> inspect.Signature | None:
    """The signature the installed release gives the agent's ``conn.<name>(...)`` call, or None.

    Releases reordered the positional parameters (0.8 to 0.10: ``request_permission(options,
    session_id, tool_call)``; 0.11 on: ``(session_id, tool_call, options)``), so agents calling
    positionally bind only when compat takes the order from the release itself.
    """
    method = getattr(SdkAgentSideConnection, name, None)
    if method is None or not callable(method):
        return None
    try:
        return inspect.signature(method)
    except (TypeError, ValueError):  # pragma: no cover - a release whose method has no signature
        return None


def describe() -> dict[str, Any]:
    """A summary for logs and ``acp-fast`` diagnostics."""
    return {
        "sdk": SDK_VERSION_TEXT,
        "methods": sorted(ROUTES),
        "unstable": sorted(UNSTABLE_ATTRS),
    }
