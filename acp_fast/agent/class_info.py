"""What the server needs to know about an agent class, worked out once per class.

Which Agent methods the class overrides, which of its handlers take no
``**kwargs``, its hooks, and the route of every request method: all of it
depends on the class alone, so one ``ClassInfo`` is shared by every
connection serving that class (a host holds thousands of connections; built
per connection, the routes alone were ~3 KiB of dicts, tuples and bound
methods on every idle one).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .base import Agent, class_implements
from .methods import AGENT_METHODS, MethodSpec

Kwargs = dict[str, Any]
#: A control method's handler, unbound: called with the server and the parsed params.
ControlHandler = Callable[[Any, Kwargs], Awaitable[Any]]
#: Every request method's spec and, for a control method the agent serves, its handler.
Routes = dict[str, tuple[MethodSpec, ControlHandler | None]]

#: Classes remembered; past it the cache starts over (classes made at run time cannot grow it for ever).
MAX_CLASSES = 256

#: The handlers every agent has, whether or not it overrides them.
_ALWAYS = frozenset({"initialize", "new_session", "cancel"})


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """One (server class, agent class) pair's facts."""

    #: The Agent methods the class overrides (``implements``).
    implemented: frozenset[str]
    #: The keyword arguments of each handler written without ``**kwargs``; usually empty.
    narrow: dict[str, frozenset[str]]
    routes: Routes
    #: Hooks left as inherited do nothing: the server skips what they would cost.
    start_hook: bool
    cancel_hook: bool
    turn_end_hook: bool


_INFO: dict[tuple[type, type], ClassInfo] = {}


def class_info(server_cls: type, agent_cls: type[Agent], control: Mapping[str, str]) -> ClassInfo:
    """The shared facts of ``agent_cls`` served by ``server_cls``, whose method ``control[m]`` answers ``m``."""
    key = (server_cls, agent_cls)
    info = _INFO.get(key)
    if info is None:
        if len(_INFO) >= MAX_CLASSES:
            _INFO.clear()
        implemented = frozenset(
            name for name in dir(Agent) if not name.startswith("_") and class_implements(agent_cls, name)
        )
        info = _INFO[key] = ClassInfo(
            implemented=implemented,
            narrow=_narrow_handlers(agent_cls, implemented | _ALWAYS),
            routes=_routes(server_cls, implemented, control),
            start_hook=agent_cls.on_session_start is not Agent.on_session_start,
            cancel_hook=agent_cls.cancel is not Agent.cancel,
            turn_end_hook=agent_cls.on_turn_end is not Agent.on_turn_end,
        )
    return info


def _narrow_handlers(agent_cls: type, attrs: frozenset[str]) -> dict[str, frozenset[str]]:
    """The keyword arguments each handler in ``attrs`` takes, for those without ``**kwargs``.

    Undeclared params (see ``methods``) reach every handler that has
    ``**kwargs``, as all the base ones do; one written without it gets only
    the names it lists.
    """
    found: dict[str, frozenset[str]] = {}
    for attr in attrs:
        try:
            params = inspect.signature(getattr(agent_cls, attr)).parameters.values()
        except (TypeError, ValueError):  # not introspectable (a C callable): give it everything
            continue
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            found[attr] = frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL)
    return found


def _routes(server_cls: type, implemented: frozenset[str], control: Mapping[str, str]) -> Routes:
    """Every request method's spec, with the handler of each control method the agent serves."""
    served = {
        method: getattr(server_cls, attr)
        for method, attr in control.items()
        if method in ("initialize", "session/new") or AGENT_METHODS[method].attr in implemented
    }
    return {method: (spec, served.get(method)) for method, spec in AGENT_METHODS.items() if not spec.notification}
