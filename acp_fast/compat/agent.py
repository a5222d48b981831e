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

import asyncio
import contextvars
import copy
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
from ..agent.methods import AGENT_METHODS
from ..agent.sessions import Session
from ..peer.connection import IncomingRequest
from ..wire.errors import AcpError, InternalError, InvalidParams, InvalidRequest, MethodNotFound, from_error_obj
from ..wire.jsonrpc import Notification
from .client import SdkClient
from .release import ANSWER_TURNS, NOTIFICATION_ROUTES, REQUEST_ROUTES, ROUTES, UNSTABLE_ATTRS, RouteInfo

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
    """-32602 as the SDK sends it: "Invalid params", ``data: {"errors": exc.errors()}`` (url, ctx and all)."""
    err = InvalidParams(data={"errors": json.loads(exc.json())})
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


async def _invoke_then_turns(call: Callable[[], Awaitable[Any]], what: str) -> Any:
    """``invoke``, then the loop turns the release's runtime lets pass before it writes the answer,
    so the tasks the handler started in its last step reach the client before the answer as they
    would under that runtime (``release.ANSWER_TURNS``), whichever way the handler ended."""
    try:
        result = await invoke(call, what)
    except AcpError:
        await _pass_turns()
        raise
    await _pass_turns()
    return result


async def _pass_turns() -> None:
    """Resume ``ANSWER_TURNS`` (two or more) loop turns from now: a future set on the turn before
    resumes its awaiter then. Not ``sleep(0)`` in a row: a control handler stepped inline from a
    read callback hands over to the dispatch task at its first suspension, which takes a turn of
    its own, and a bare yield would add one more; a future is resumed on the same turn either way."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def tick(left: int) -> None:
        if left:
            loop.call_soon(tick, left - 1)
        elif not done.done():  # the awaiter was cancelled meanwhile
            done.set_result(None)

    loop.call_soon(tick, ANSWER_TURNS - 2)
    await done


#: Runs a request's handler: ``invoke`` itself where the release writes the answer as the handler returns.
answered: Callable[[Callable[[], Awaitable[Any]], str], Awaitable[Any]] = (
    _invoke_then_turns if ANSWER_TURNS else invoke
)


def method_not_found(method: str) -> MethodNotFound:
    """-32601 as the SDK's ``RequestError.method_not_found`` words it: no method in the message, only in data."""
    return MethodNotFound(data={"method": method})


def parse(route: RouteInfo, wire: Any) -> BaseModel:
    """``wire`` as the release's request model; a failure is the SDK's -32602."""
    assert route.validator is not None
    try:
        return route.validator(wire)
    except ValidationError as exc:
        raise _validation_error(exc) from exc


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


def _shared_fields(route: RouteInfo) -> tuple[str, ...]:
    first, *rest = route.models
    return tuple(n for n in first.model_fields if all(n in m.model_fields for m in rest))


async def call_route(sdk_agent: object, route: RouteInfo, wire: Any) -> Any:
    """Validate ``wire`` with the release's model and call the agent as its router would."""
    fn, legacy = resolve(sdk_agent, route.attr)
    if fn is None:
        raise method_not_found(route.method)
    request = parse(route, wire)
    run = invoke if route.notification else answered
    if legacy:
        name = getattr(fn, "__name__", route.attr)
        warnings.warn(
            f"The old style method {type(sdk_agent).__name__}.{name} is deprecated (the SDK says so too); "
            "acp_fast.compat still calls it with the request model",
            DeprecationWarning,
            stacklevel=2,
        )
        result = await run(lambda: fn(request), route.method)
    else:
        if route.adapt_params is not None:
            kwargs = route.adapt_params(request)
        else:
            kwargs = call_kwargs(request, _shared_fields(route))
        result = await run(lambda: fn(**kwargs), route.method)
    if route.notification:
        return None
    return dump_defaults(result) if route.normalized else dump_unset(result)


# -- the adapter --------------------------------------------------------------------------------
#: The wire params of the message being dispatched, as the client sent them: (method, params). Set
#: by compat's own handler, which runs before the server's on the dispatch task, so a forwarder
#: (and a prompt task, which copies the context when it is created) builds the release's request
#: model from every field the client sent, not only those acp_fast's method table declares.
_WIRE: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar("acp_fast_compat_wire", default=None)
#: Cancel reasons (the server's words for them) whose stopping of the turn compat leaves to an SDK
#: agent that defines ``cancel``: the SDK's runtime answers ``session/cancel`` by calling the agent's
#: ``cancel`` and nothing else, so the agent's own way of stopping (often ``.cancel()`` on the prompt
#: task it kept) is the only one. ``max_turn_s`` cancels as ``session/cancel`` does. Shutdown, EOF,
#: ``session/close`` and ``$/cancel_request`` still cancel the task, as the SDK's runtime does when
#: its connection closes (and 1.x for ``$/cancel_request``).
_LEFT_TO_AGENT = frozenset({"session/cancel", "max_turn_s (timeout)"})

#: Requests acp_fast's server routes and answers itself (with the forwarders below as the agent's
#: methods); mcp/* are left out: the server hands them to its MCP bridge, never to the agent.
_CORE_REQUESTS = frozenset(m for m, s in AGENT_METHODS.items() if not s.notification and not m.startswith("mcp/"))
#: Requests compat routes itself that may take long: background work in the pool (R02, R08), as
#: acp_fast runs prompts and mcp/*; every other one runs on the control lane, in order (R01).
_BACKGROUND = frozenset({"mcp/message", "nes/suggest"})


def _wire_for(route: RouteInfo, kwargs: Kwargs) -> Any:
    """The client's own params for ``route``, or, when none were recorded, the kwargs turned back."""
    seen = _WIRE.get()
    if seen is not None and seen[0] == route.method:
        return seen[1]
    model = route.models[0] if len(route.models) == 1 else route.models[-1]
    wire = _to_wire(model, kwargs)
    if kwargs.get("type") is not None:
        wire["type"] = kwargs["type"]
    return wire


def _forwarder(route: RouteInfo) -> Callable[..., Awaitable[Any]]:
    async def forward(self: SdkAgent, **kwargs: Any) -> Any:
        return await call_route(self.sdk_agent, route, _wire_for(route, kwargs))

    forward.__name__ = forward.__qualname__ = route.attr
    forward.__doc__ = f"Forwards {route.method} to the SDK agent's ``{route.attr}``."
    return forward


def _keeping_initialize(route: RouteInfo) -> Callable[..., Awaitable[Any]]:
    """The initialize forwarder, keeping the agent's own answer for ``finish_initialize``; the server
    shapes a copy, so what the agent returned stays as it was."""
    forward = _forwarder(route)

    async def initialize(self: SdkAgent, **kwargs: Any) -> Any:
        self.initialize_answer = await forward(self, **kwargs)
        return copy.deepcopy(self.initialize_answer)

    initialize.__name__ = initialize.__qualname__ = "initialize"
    initialize.__doc__ = forward.__doc__
    return initialize


async def _ext_method(self: SdkAgent, method: str, params: dict[str, Any]) -> Any:
    fn = self.sdk_agent.ext_method
    # The SDK hands extension handlers the name without its leading underscore.
    return dump_unset(await answered(lambda: fn(method[1:], params), method))


async def _ext_notification(self: SdkAgent, method: str, params: dict[str, Any]) -> None:
    fn = self.sdk_agent.ext_notification
    await invoke(lambda: fn(method[1:], params), method)


async def _no_new_session(self: SdkAgent, **kwargs: Any) -> Any:
    raise method_not_found("session/new")


def _warn_gated(method: str) -> None:
    warnings.warn(
        f"{method} is unstable ACP: it answers -32601 unless use_unstable_protocol=True",
        UserWarning,
        stacklevel=3,
    )


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

    #: Requests the installed SDK routes that acp_fast's server does not (session/set_model, nes/*, ...).
    extra_routes: dict[str, RouteInfo] = {}
    #: Notifications likewise (1.x document/*, nes/accept|reject, mcp/message when the agent takes it).
    extra_notifications: dict[str, RouteInfo] = {}
    #: Unstable requests the agent defines while ``use_unstable_protocol`` is off: a UserWarning and -32601.
    gated: frozenset[str] = frozenset()
    #: Unstable notifications likewise: a UserWarning, and dropped.
    gated_notifications: frozenset[str] = frozenset()
    #: Every request the SDK's router would hand this agent (the release routes it, the agent defines it).
    served: dict[str, RouteInfo] = {}
    #: The agent defines ``cancel``: a cancelled turn is stopped by it alone, as under the SDK (``_LEFT_TO_AGENT``).
    stops_own_turn: bool = False

    def __init__(self, sdk_agent: Any, sdk_client: SdkClient, strict: bool = False) -> None:
        #: What the agent's ``initialize`` last answered, before the server shaped it.
        self.initialize_answer: Any = None
        self.sdk_agent = sdk_agent
        self.sdk_client = sdk_client
        self.strict = strict
        self.server: AgentServer | None = None

    def on_server(self, server: AgentServer) -> None:
        """Claim messages before the server does: extra SDK routes, and the SDK's leniency."""
        self.server = server
        server.conn.on_receive_request(self._before_server, "acp_fast.compat.before_server")
        server.conn.on_receive_notification(self._notification, "acp_fast.compat.notification")
        if self.stops_own_turn:
            server.pool.left_to_agent = _LEFT_TO_AGENT
        if not self.strict:
            server.context = server.context.evolve(initialized=True)

    def on_connect(self, client: Client) -> None:
        super().on_connect(client)
        server = self.server
        peer = server.conn if server is not None else client._conn
        self.sdk_client.bind(client, peer, strict=self.strict)
        if server is not None:
            server.conn.on_receive_notification_sync("session/cancel", self._cancel_any_session)
        hook = getattr(self.sdk_agent, "on_connect", None)
        if callable(hook):
            hook(self.sdk_client)

    async def _before_server(self, req: IncomingRequest) -> bool:
        params = req.params
        _WIRE.set((req.method, params))
        if req.method == "initialize" and isinstance(params, dict) and isinstance(params.get("protocolVersion"), str):
            # Read as the release's InitializeRequest reads it: "1" is 1; 0.10 on take an unparsable
            # string as 1, 0.8 refuses it (-32602).
            params["protocolVersion"] = validate(ROUTES["initialize"].models[0], params).protocol_version  # type: ignore[attr-defined]
        if req.method in self.gated:
            _warn_gated(req.method)
            raise method_not_found(req.method)
        if not self._serves(req.method):  # the SDK's router has no handler for it
            raise method_not_found(req.method)
        server = self.server
        route = self.extra_routes.get(req.method)
        own = self.served.get(req.method)
        if route is None and own is not None and (server is None or server.context.initialized):
            parse(own, params)  # bad params: the SDK's -32602, not the server's own wording
        if route is not None:
            if self.strict and server is not None and not server.context.initialized:
                raise InvalidRequest(f"Invalid request: {req.method} before initialize")
            if route.method in _BACKGROUND and server is not None:
                job = server.pool.admit(req)  # counts against max_background (R08) like acp_fast's own
                server.pool.start(job, lambda _j: call_route(self.sdk_agent, route, params), lambda _j, v: v)
            else:
                req.respond(await call_route(self.sdk_agent, route, params))
            return True
        if self.strict or server is None or not isinstance(params, dict):
            return False
        cwd = params.get("cwd")
        if isinstance(cwd, str) and not cwd.startswith("/") and req.method in _CWD_METHODS:
            # acp_fast's server wants an absolute cwd; the SDK hands any string to the agent, which
            # gets the client's own params (_WIRE, set above, keeps them) while the server sees this.
            _WIRE.set((req.method, dict(params)))
            params["cwd"] = "/.acp-fast-compat/relative-cwd"
        if req.method not in _SESSION_METHODS:
            return False
        sid = params.get("sessionId")
        if isinstance(sid, str) and server.sessions.find(sid) is None:
            server.sessions.add(Session(sid, "", None))  # bounded by max_sessions like any other
        return False

    def _serves(self, method: str) -> bool:
        """Whether the SDK's router would hand ``method`` to this agent. mcp/* stay with acp_fast's
        bridge, and ``initialize`` is answered by the server for an agent that does not define it."""
        if method in self.served or method == "initialize" or method.startswith("mcp/"):
            return True
        return method.startswith("_") and sdk_defines(self.sdk_agent, "ext_method")

    def finish_initialize(self, served: dict[str, Any]) -> dict[str, Any]:
        """The ``initialize`` answer as the agent returned it (the server's hook for adapters).

        The SDK's runtime passes the agent's result through; so does compat, adding only what
        the runtime itself provides: ``protocolVersion`` when the agent left it out (a required
        field), and ``mcpCapabilities.acp`` when acp_fast's MCP bridge serves ``mcp/*``. An agent
        without ``initialize`` gets the server's own answer, built from what it implements.
        """
        returned = self.initialize_answer
        if not self.decides_capabilities or not isinstance(returned, dict):
            return served
        answer = copy.deepcopy(returned)
        answer.setdefault("protocolVersion", served["protocolVersion"])
        server = self.server
        if server is not None and server.mcp.enabled:
            caps = dict(answer.get("agentCapabilities") or {})
            caps["mcpCapabilities"] = {**(caps.get("mcpCapabilities") or {}), "acp": True}
            answer["agentCapabilities"] = caps
        return answer

    async def _notification(self, note: Notification) -> bool:
        """Notifications the SDK routes and acp_fast's server does not: awaited in order, never answered."""
        method = note.method
        if method in self.gated_notifications:
            _warn_gated(method)
            return True
        route = self.extra_notifications.get(method)
        if route is None:
            return False
        server = self.server
        if self.strict and server is not None and not server.context.initialized:
            log.warning("dropped %s before initialize", method)
            return True
        await self._quiet(call_route(self.sdk_agent, route, note.params), method)
        return True

    def _cancel_any_session(self, note: Notification) -> None:
        """session/cancel: a known session as acp_fast does; any other id still reaches the agent
        (unless ``strict``). The agent's handler, spawned here or by the server, gets the client's
        params. How the turn itself is stopped is set up in ``on_server`` (``_LEFT_TO_AGENT``)."""
        server = self.server
        assert server is not None
        sid = note.params.get("sessionId") if isinstance(note.params, dict) else None
        if not self.strict and isinstance(sid, str) and server.sessions.find(sid) is None:
            route = ROUTES.get("session/cancel")
            if route is not None and sdk_defines(self.sdk_agent, "cancel"):
                work = self._quiet(call_route(self.sdk_agent, route, note.params), note.method)
                server.conn.spawn(work, name="acp.compat.cancel")
            return
        token = _WIRE.set((note.method, note.params))  # copied into the cancel hook's task
        try:
            server.on_cancel_notification(note)
        finally:
            _WIRE.reset(token)

    @staticmethod
    async def _quiet(work: Awaitable[Any], method: str) -> None:
        """Notifications are never answered: a failing handler is logged only."""
        try:
            await work
        except AcpError as exc:
            log.warning("%s handler failed: %s", method, exc.message)


def _gate_unstable(agent: Any, defined: dict[str, Any]) -> set[str]:
    """Take unstable methods out of ``defined``, as the SDK does without ``use_unstable_protocol``.

    Returns those the adapter answers -32601 itself; ``mcp/*`` stay with acp_fast's MCP bridge.
    """
    gated: set[str] = set()
    for method, route in sorted(defined.items()):
        if route.unstable:
            log.info(
                "%s.%s is unstable ACP; without use_unstable_protocol=True it answers -32601 (as under the SDK)",
                type(agent).__name__,
                route.attr,
            )
            del defined[method]
            if not method.startswith("mcp/"):
                gated.add(method)
    return gated


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
    attrs = {r.attr for r in (*REQUEST_ROUTES.values(), *NOTIFICATION_ROUTES.values())}
    attrs |= {"ext_method", "ext_notification"}
    if isinstance(agent, type) or (callable(agent) and not any(sdk_defines(agent, a) for a in attrs)):
        agent = agent(sdk_client)  # a class or factory taking the connection, as the SDK's connection accepts
    requests = {m: r for m, r in REQUEST_ROUTES.items() if sdk_defines(agent, r.attr)}
    notes = {m: r for m, r in NOTIFICATION_ROUTES.items() if sdk_defines(agent, r.attr)}
    gated = {"request": set[str](), "notification": set[str]()}
    if not use_unstable_protocol:
        gated = {"request": _gate_unstable(agent, requests), "notification": _gate_unstable(agent, notes)}
    namespace: dict[str, Any] = {
        AGENT_METHODS[m].attr: _forwarder(r) for m, r in requests.items() if m in _CORE_REQUESTS
    }
    namespace["extra_routes"] = {m: r for m, r in requests.items() if m not in _CORE_REQUESTS}
    namespace["extra_notifications"] = {m: r for m, r in notes.items() if m != "session/cancel"}
    if "initialize" in requests:
        namespace["initialize"] = _keeping_initialize(requests["initialize"])
    namespace["served"] = dict(requests)
    namespace["gated"] = frozenset(gated["request"])
    namespace["gated_notifications"] = frozenset(gated["notification"])
    if "session/cancel" in notes:
        cancel_route = notes["session/cancel"]

        async def _cancel(self: SdkAgent, session_id: str, **kwargs: Any) -> None:
            wire = _wire_for(cancel_route, {"session_id": session_id, **kwargs})
            await call_route(self.sdk_agent, cancel_route, wire)

        namespace["cancel"] = _cancel
        namespace["stops_own_turn"] = True
    if "session/new" not in requests:
        namespace["new_session"] = _no_new_session
    if sdk_defines(agent, "ext_method"):
        namespace["ext_method"] = _ext_method
    if sdk_defines(agent, "ext_notification"):
        namespace["ext_notification"] = _ext_notification
    namespace["decides_capabilities"] = "initialize" in requests
    cls = type(f"SdkAgent[{type(agent).__name__}]", (SdkAgent,), namespace)
    wrapped: Agent = cls(agent, sdk_client, strict)
    return wrapped
