"""An agent written on the official SDK, as an ``acp_fast.Agent``: routes, arguments, results, errors.

What each request reaches is decided by the installed SDK release (see
``release``): its router's methods, its unstable gate, its result
serialisation. The call follows that release's conventions, including the
deprecated ones it still honours (a camelCase handler, or a handler taking
the one request model as ``params``).

Two of the SDK's habits are not copied. ``_meta`` entries are spread into the
handler's keyword arguments as the SDK does, but an entry named like a
declared field (``sessionId``'s ``session_id``, ``prompt``) never replaces
that field: the declared value wins and the entry is dropped with a warning.
An uncaught exception answers -32603 with the SDK's ``data`` (the message),
and its traceback goes to the log only.
"""

from __future__ import annotations

import inspect
import json
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from acp.exceptions import RequestError
from acp.interfaces import Agent as SdkAgentProtocol
from pydantic import BaseModel, ValidationError

from ..agent.base import Agent
from ..agent.client_handle import Client
from ..agent.sessions import Session
from ..peer.connection import IncomingRequest
from ..wire.errors import AcpError, InternalError, InvalidParams, InvalidRequest, MethodNotFound, from_error_obj
from ..wire.jsonrpc import Notification
from .client import SdkClient
from .release import ROUTES, UNSTABLE_ATTRS, RouteInfo

if TYPE_CHECKING:
    from ..agent.server import AgentServer

log = logging.getLogger("acp_fast.compat")

M = TypeVar("M", bound=BaseModel)
Kwargs = dict[str, Any]

#: Kept for callers of the 0.12-era module: the attributes routed only when unstable is on.
UNSTABLE_METHODS: frozenset[str] = UNSTABLE_ATTRS

#: Methods whose ``cwd`` acp_fast's server requires to be absolute (the SDK does not).
_CWD_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
#: Methods acp_fast's server checks against its session table (unknown ids: see ``strict``).
_SESSION_METHODS = frozenset(
    {"session/prompt", "session/set_mode", "session/set_config_option", "session/close", "session/fork"}
)


# -- models <-> wire ----------------------------------------------------------------------
def dump_unset(value: Any) -> Any:
    """What the SDK's connection writes for a handler's result (models: exclude_unset)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    return value


def dump_defaults(value: Any) -> Any:
    """The SDK's ``normalize_result``: None -> {}, models without their defaults."""
    if value is None:
        return {}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    return value


def _to_wire(model: type[BaseModel], kwargs: Kwargs) -> dict[str, Any]:
    """acp_fast's snake_case kwargs back to wire params for ``model`` (absent stays absent)."""
    wire: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        value = kwargs.get(name)
        if value is not None:
            wire[info.alias or name] = value
    return wire


def call_kwargs(obj: BaseModel, fields: tuple[str, ...]) -> Kwargs:
    """The SDK router's kwargs (each field but field_meta, plus the _meta entries), declared fields winning."""
    kwargs = {name: getattr(obj, name) for name in fields if name != "field_meta"}
    meta = getattr(obj, "field_meta", None)
    if meta:
        shadowing = sorted(k for k in meta if k in kwargs)
        if shadowing:
            log.warning(
                "_meta entries %s name declared parameters of %s; the declared values are kept",
                shadowing,
                type(obj).__name__,
            )
        kwargs = {**{k: v for k, v in meta.items() if k not in kwargs}, **kwargs}
    return kwargs


def _validation_error(exc: ValidationError) -> InvalidParams:
    err = InvalidParams(data={"errors": json.loads(exc.json(include_url=False, include_context=False))})
    err.__cause__ = exc
    return err


def from_request_error(exc: RequestError) -> AcpError:
    err = from_error_obj({"code": exc.code, "message": str(exc), "data": exc.data})
    err.__cause__ = exc
    return err


def internal_error(exc: Exception, what: str) -> InternalError:
    """-32603 with the SDK's ``data``: the message as JSON if it is JSON, else ``{"details": message}``."""
    log.error("unhandled error in %s", what, exc_info=exc)
    text = str(exc)
    try:
        data = json.loads(text)
    except ValueError:
        data = {"details": text}
    err = InternalError(data=data)
    err.__cause__ = exc
    return err


async def invoke(call: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Run an SDK handler; what it raises leaves as the JSON-RPC error the SDK would send."""
    try:
        return await call()
    except RequestError as exc:
        raise from_request_error(exc) from exc
    except ValidationError as exc:
        raise _validation_error(exc) from exc
    except AcpError:
        raise
    except Exception as exc:
        raise internal_error(exc, what) from exc


def validate(model: type[M], wire: Any) -> M:
    try:
        return model.model_validate(wire)
    except ValidationError as exc:
        raise _validation_error(exc) from exc


# -- finding the agent's handlers as the SDK does -------------------------------------------
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _own(sdk_agent: object, attr: str) -> Callable[..., Any] | None:
    fn = getattr(sdk_agent, attr, None)
    if fn is None or not callable(fn):
        return None
    if getattr(type(sdk_agent), attr, None) is getattr(SdkAgentProtocol, attr, None):
        return None  # the acp.Agent protocol's stub: not implemented
    return fn  # type: ignore[no-any-return]


def resolve(sdk_agent: object, attr: str) -> tuple[Callable[..., Any] | None, bool]:
    """The handler for ``attr`` and whether it takes the one request model (the SDK's legacy styles)."""
    fn = _own(sdk_agent, attr)
    if fn is None and "_" in attr:
        return _own(sdk_agent, _camel(attr)), True
    if fn is not None and "_" not in attr:
        try:
            params = inspect.signature(getattr(fn, "__func__", fn)).parameters
        except (TypeError, ValueError):
            return fn, False
        return fn, len(params) == 2 and "params" in params
    return fn, False


def sdk_defines(sdk_agent: object, attr: str) -> bool:
    """Whether ``sdk_agent`` really implements ``attr`` (not the ``acp.Agent`` protocol stub)."""
    return resolve(sdk_agent, attr)[0] is not None


def _pick_model(route: RouteInfo, wire: Any) -> type[BaseModel]:
    if len(route.models) > 1:  # set_config_option: the boolean variant only when asked for
        boolean = isinstance(wire, dict) and wire.get("type") == "boolean"
        return route.models[0] if boolean else route.models[-1]
    return route.models[0]


def _shared_fields(route: RouteInfo) -> tuple[str, ...]:
    first, *rest = route.models
    return tuple(n for n in first.model_fields if all(n in m.model_fields for m in rest))


async def call_route(sdk_agent: object, route: RouteInfo, wire: Any) -> Any:
    """Validate ``wire`` with the release's model and call the agent as its router would."""
    fn, legacy = resolve(sdk_agent, route.attr)
    if fn is None:
        raise MethodNotFound(f"Method not found: {route.method}", {"method": route.method})
    request = validate(_pick_model(route, wire), wire)
    if legacy:
        name = getattr(fn, "__name__", route.attr)
        warnings.warn(
            f"The old style method {type(sdk_agent).__name__}.{name} is deprecated (the SDK says so too); "
            "acp_fast.compat still calls it with the request model",
            DeprecationWarning,
            stacklevel=2,
        )
        result = await invoke(lambda: fn(request), route.method)
    else:
        kwargs = call_kwargs(request, _shared_fields(route))
        result = await invoke(lambda: fn(**kwargs), route.method)
    if route.notification:
        return None
    return dump_defaults(result) if route.normalized else dump_unset(result)


# -- the adapter --------------------------------------------------------------------------------
def _forwarder(route: RouteInfo) -> Callable[..., Awaitable[Any]]:
    async def forward(self: SdkAgent, **kwargs: Any) -> Any:
        model = route.models[0] if len(route.models) == 1 else route.models[-1]
        wire = _to_wire(model, kwargs)
        if isinstance(wire.get("cwd"), str):
            wire["cwd"] = self._relative_cwds.pop(wire["cwd"], wire["cwd"])
        if kwargs.get("type") is not None:
            wire["type"] = kwargs["type"]
        return await call_route(self.sdk_agent, route, wire)

    forward.__name__ = forward.__qualname__ = route.attr
    forward.__doc__ = f"Forwards {route.method} to the SDK agent's ``{route.attr}``."
    return forward


async def _ext_method(self: SdkAgent, method: str, params: dict[str, Any]) -> Any:
    fn = self.sdk_agent.ext_method
    # The SDK hands extension handlers the name without its leading underscore.
    return dump_unset(await invoke(lambda: fn(method[1:], params), method))


async def _ext_notification(self: SdkAgent, method: str, params: dict[str, Any]) -> None:
    fn = self.sdk_agent.ext_notification
    await invoke(lambda: fn(method[1:], params), method)


async def _no_new_session(self: SdkAgent, **kwargs: Any) -> Any:
    raise MethodNotFound("Method not found: session/new", {"method": "session/new"})


class SdkAgent(Agent):
    """An acp_fast Agent forwarding to an agent written on the official SDK.

    Built by ``wrap_sdk_agent``, which subclasses it per agent with exactly
    the methods that agent defines and the installed release routes.
    ``strict=False`` (the default) behaves as the SDK does where agents and
    their tests rely on it: requests before ``initialize`` are served,
    session ids the server has not seen reach the agent, and client calls go
    out whatever the client advertised. ``strict=True`` keeps acp_fast's
    answers (-32600, -32602, -32601) for those.
    """

    #: Methods the installed SDK routes that acp_fast's server does not know (session/set_model).
    extra_routes: dict[str, RouteInfo] = {}
    #: Unstable methods the agent defines while ``use_unstable_protocol`` is off: a UserWarning and -32601.
    gated: frozenset[str] = frozenset()

    def __init__(self, sdk_agent: Any, sdk_client: SdkClient, strict: bool = False) -> None:
        self.sdk_agent = sdk_agent
        self.sdk_client = sdk_client
        self.strict = strict
        self.server: AgentServer | None = None
        self._relative_cwds: dict[str, str] = {}

    def on_server(self, server: AgentServer) -> None:
        """Claim requests before the server does: extra SDK routes, and the SDK's leniency."""
        self.server = server
        server.conn.on_receive_request(self._before_server, "acp_fast.compat.before_server")
        if not self.strict:
            server.context = server.context.evolve(initialized=True)

    def on_connect(self, client: Client) -> None:
        super().on_connect(client)
        server = self.server
        peer = server.conn if server is not None else client._conn
        self.sdk_client.bind(client, peer, strict=self.strict)
        if server is not None and not self.strict:
            server.conn.on_receive_notification_sync("session/cancel", self._cancel_any_session)
        hook = getattr(self.sdk_agent, "on_connect", None)
        if callable(hook):
            hook(self.sdk_client)

    async def _before_server(self, req: IncomingRequest) -> bool:
        params = req.params
        if req.method == "initialize" and isinstance(params, dict) and isinstance(params.get("protocolVersion"), str):
            # Read as the release's InitializeRequest reads it: "1" is 1; 0.10 on take an unparsable
            # string as 1, 0.8 refuses it (-32602).
            params["protocolVersion"] = validate(ROUTES["initialize"].models[0], params).protocol_version  # type: ignore[attr-defined]
        if req.method in self.gated:
            warnings.warn(
                f"{req.method} is unstable ACP: it answers -32601 unless use_unstable_protocol=True",
                UserWarning,
                stacklevel=2,
            )
            raise MethodNotFound(f"Method not found: {req.method}", {"method": req.method})
        route = self.extra_routes.get(req.method)
        if route is not None:
            if self.strict and self.server is not None and not self.server.context.initialized:
                raise InvalidRequest(f"Invalid request: {req.method} before initialize")
            req.respond(await call_route(self.sdk_agent, route, params))
            return True
        server = self.server
        if self.strict or server is None or not isinstance(params, dict):
            return False
        cwd = params.get("cwd")
        self._relative_cwds.clear()  # control requests run one at a time: the previous one is done
        if isinstance(cwd, str) and not cwd.startswith("/") and req.method in _CWD_METHODS:
            # acp_fast's server wants an absolute cwd; the SDK hands any string to the agent.
            stand_in = f"/.acp-fast-compat/relative-cwd/{len(self._relative_cwds)}"
            self._relative_cwds[stand_in] = cwd
            params["cwd"] = stand_in
        if req.method not in _SESSION_METHODS:
            return False
        sid = params.get("sessionId")
        if isinstance(sid, str) and server.sessions.find(sid) is None:
            server.sessions.add(Session(sid, "", None))  # bounded by max_sessions like any other
        return False

    def _cancel_any_session(self, note: Notification) -> None:
        """session/cancel: a known session as acp_fast does; any other id still reaches the agent."""
        server = self.server
        assert server is not None
        sid = note.params.get("sessionId") if isinstance(note.params, dict) else None
        if isinstance(sid, str) and server.sessions.find(sid) is None:
            route = ROUTES.get("session/cancel")
            if route is not None and sdk_defines(self.sdk_agent, "cancel"):
                server.conn.spawn(self._quiet(call_route(self.sdk_agent, route, note.params)), name="acp.compat.cancel")
            return
        server.on_cancel_notification(note)

    @staticmethod
    async def _quiet(work: Awaitable[Any]) -> None:
        """Notifications are never answered: a failing cancel handler is logged only."""
        try:
            await work
        except AcpError as exc:
            log.warning("session/cancel handler failed: %s", exc.message)


def wrap_sdk_agent(
    agent: Any,
    *,
    use_unstable_protocol: bool = False,
    strict: bool = False,
    sdk_client: SdkClient | None = None,
) -> Agent:
    """Adapt an SDK agent (or an SDK-style factory ``conn -> agent``) to acp_fast.

    ``sdk_client`` is what the agent gets as its connection (``on_connect``,
    the factory's argument); ``AgentSideConnection`` passes itself.
    """
    sdk_client = sdk_client if sdk_client is not None else SdkClient()
    attrs = {r.attr for r in ROUTES.values()} | {"ext_method", "ext_notification"}
    if isinstance(agent, type) or (callable(agent) and not any(sdk_defines(agent, a) for a in attrs)):
        agent = agent(sdk_client)  # a class or factory taking the connection, as the SDK's connection accepts
    defined = {r.method: r for r in ROUTES.values() if sdk_defines(agent, r.attr)}
    gated = frozenset(m for m, r in defined.items() if r.unstable and not use_unstable_protocol)
    for method in sorted(gated):
        log.info(
            "%s.%s is unstable ACP; without use_unstable_protocol=True it answers -32601 (as under the SDK)",
            type(agent).__name__,
            defined[method].attr,
        )
        del defined[method]
    from ..agent.methods import AGENT_METHODS

    namespace: dict[str, Any] = {
        r.attr: _forwarder(r) for m, r in defined.items() if m in AGENT_METHODS and m != "session/cancel"
    }
    namespace["extra_routes"] = {m: r for m, r in defined.items() if m not in AGENT_METHODS}
    namespace["gated"] = gated
    if "session/cancel" in defined:
        cancel_route = defined["session/cancel"]

        async def _cancel(self: SdkAgent, session_id: str, **kwargs: Any) -> None:
            wire = _to_wire(cancel_route.models[0], {"session_id": session_id, **kwargs})
            await call_route(self.sdk_agent, cancel_route, wire)

        namespace["cancel"] = _cancel
    if "session/new" not in defined:
        namespace["new_session"] = _no_new_session
    if sdk_defines(agent, "ext_method"):
        namespace["ext_method"] = _ext_method
    if sdk_defines(agent, "ext_notification"):
        namespace["ext_notification"] = _ext_notification
    namespace["decides_capabilities"] = "initialize" in defined
    cls = type(f"SdkAgent[{type(agent).__name__}]", (SdkAgent,), namespace)
    wrapped: Agent = cls(agent, sdk_client, strict)
    return wrapped
