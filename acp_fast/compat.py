"""Serve an agent written on the official Python SDK (``agent-client-protocol``, import ``acp``).

Change one import (``from acp_fast.compat import run_agent`` for ``from acp
import run_agent``) or run ``acp-fast serve module:Class``; the agent's code
stays as it is. ``wrap_sdk_agent`` builds an ``acp_fast.Agent`` that:

- rebuilds, for every request, the SDK's request model from the wire params
  and calls the agent with the keyword arguments the SDK router would pass
  (every model field but ``field_meta``, then the ``_meta`` entries spread in);
- serialises returned models the way the SDK's connection does
  (``by_alias``/``exclude_none`` plus ``exclude_unset``, or ``exclude_defaults``
  on the routes the SDK passes through ``normalize_result``);
- turns ``acp.RequestError`` into the acp_fast error of the same code,
  message and data, and pydantic ``ValidationError`` into -32602 as the SDK does;
- implements only what the agent defines (a stub inherited from the
  ``acp.Agent`` protocol does not count), so the rest answers -32601 and is
  not advertised; ``session/close``, ``session/fork`` and ``session/resume``
  need ``use_unstable_protocol=True`` exactly as under the SDK;
- lets the agent's own ``initialize`` response decide the capabilities: the
  server only removes those of methods the agent lacks (see docs/MIGRATION.md).

``on_connect`` receives an ``SdkClient``: the SDK's ``Client`` method names,
taking and returning SDK models, mapped onto acp_fast's ``Client``.

Needs the optional extra ``acp_fast[compat]``; ``import acp_fast`` never
imports this module.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

try:
    from acp import schema as S
    from acp.exceptions import RequestError
    from acp.interfaces import Agent as SdkAgentProtocol
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("acp_fast.compat needs the official SDK: pip install 'acp-fast[compat]'") from exc
from pydantic import BaseModel, TypeAdapter, ValidationError

from .agent.base import Agent
from .agent.client_handle import Client
from .wire.errors import AcpError, ConnectionClosed, InvalidParams, MethodNotFound, from_error_obj
from .wire.limits import Limits

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
Kwargs = dict[str, Any]

#: Methods the SDK routes only with ``use_unstable_protocol=True``.
UNSTABLE_METHODS: frozenset[str] = frozenset({"close_session", "fork_session", "resume_session"})

_ELICITATION_RESPONSE: TypeAdapter[Any] = TypeAdapter(S.CreateElicitationResponse)


# -- models <-> wire ----------------------------------------------------------------------
def dump_unset(value: Any) -> Any:
    """What the SDK's connection writes for a handler's result (models: exclude_unset)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    return value


def dump_defaults(value: Any) -> Any:
    """The SDK's ``normalize_result``/``serialize_params``: None -> {}, models without defaults."""
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


def _call_kwargs(obj: BaseModel, fields: tuple[str, ...]) -> Kwargs:
    """The SDK router's kwargs: each field but field_meta, then the _meta keys spread in."""
    kwargs = {name: getattr(obj, name) for name in fields if name != "field_meta"}
    meta = getattr(obj, "field_meta", None)
    if meta:
        kwargs.update(meta)
    return kwargs


def _validation_error(exc: ValidationError) -> InvalidParams:
    err = InvalidParams(data={"errors": json.loads(exc.json(include_url=False, include_context=False))})
    err.__cause__ = exc
    return err


def _from_request_error(exc: RequestError) -> AcpError:
    err = from_error_obj({"code": exc.code, "message": str(exc), "data": exc.data})
    err.__cause__ = exc
    return err


async def _invoke(call: Callable[[], Awaitable[Any]]) -> Any:
    """Run an SDK handler; its errors leave as the JSON-RPC errors the SDK would send."""
    try:
        return await call()
    except RequestError as exc:
        raise _from_request_error(exc) from exc
    except ValidationError as exc:
        raise _validation_error(exc) from exc


def _validate(model: type[M], wire: dict[str, Any]) -> M:
    try:
        return model.model_validate(wire)
    except ValidationError as exc:
        raise _validation_error(exc) from exc


# -- the agent side -------------------------------------------------------------------------
#: SDK agent attribute -> (request model, result serialiser), as ``acp.agent.router`` routes them.
_ROUTES: dict[str, tuple[type[BaseModel], Callable[[Any], Any]]] = {
    "initialize": (S.InitializeRequest, dump_unset),
    "new_session": (S.NewSessionRequest, dump_unset),
    "load_session": (S.LoadSessionRequest, dump_defaults),
    "list_sessions": (S.ListSessionsRequest, dump_unset),
    "close_session": (S.CloseSessionRequest, dump_defaults),
    "set_session_mode": (S.SetSessionModeRequest, dump_defaults),
    "prompt": (S.PromptRequest, dump_unset),
    "authenticate": (S.AuthenticateRequest, dump_defaults),
    "fork_session": (S.ForkSessionRequest, dump_unset),
    "resume_session": (S.ResumeSessionRequest, dump_unset),
}
_CONFIG_FIELDS = tuple(  # the fields both variants share, as the SDK's model_to_kwargs takes them
    n
    for n in S.SetSessionConfigOptionSelectRequest.model_fields
    if n in S.SetSessionConfigOptionBooleanRequest.model_fields
)
#: Everything the adapter can forward; ``set_config_option``, ``cancel`` and the
#: extension hooks are handled on their own below.
SDK_AGENT_METHODS: frozenset[str] = frozenset(
    {*_ROUTES, "set_config_option", "cancel", "ext_method", "ext_notification"}
)


def sdk_defines(sdk_agent: object, attr: str) -> bool:
    """Whether ``sdk_agent`` really implements ``attr`` (not the ``acp.Agent`` protocol stub)."""
    fn = getattr(sdk_agent, attr, None)
    if fn is None or not callable(fn):
        return False
    return getattr(type(sdk_agent), attr, None) is not getattr(SdkAgentProtocol, attr, None)


def _forwarder(attr: str) -> Callable[..., Awaitable[Any]]:
    model, serialise = _ROUTES[attr]
    fields = tuple(model.model_fields)

    async def forward(self: SdkAgent, **kwargs: Any) -> Any:
        request = _validate(model, _to_wire(model, kwargs))
        fn = getattr(self.sdk_agent, attr)
        return serialise(await _invoke(lambda: fn(**_call_kwargs(request, fields))))

    forward.__name__ = forward.__qualname__ = attr
    forward.__doc__ = f"Forwards to the SDK agent's ``{attr}``."
    return forward


async def _set_config_option(self: SdkAgent, **kwargs: Any) -> Any:
    wire = _to_wire(S.SetSessionConfigOptionBooleanRequest, kwargs)
    boolean = wire.get("type") == "boolean"
    model = S.SetSessionConfigOptionBooleanRequest if boolean else S.SetSessionConfigOptionSelectRequest
    request = _validate(model, wire)
    fn = self.sdk_agent.set_config_option
    return dump_defaults(await _invoke(lambda: fn(**_call_kwargs(request, _CONFIG_FIELDS))))


async def _cancel(self: SdkAgent, session_id: str, **kwargs: Any) -> None:
    request = _validate(S.CancelNotification, _to_wire(S.CancelNotification, {"session_id": session_id, **kwargs}))
    fields = tuple(S.CancelNotification.model_fields)
    await _invoke(lambda: self.sdk_agent.cancel(**_call_kwargs(request, fields)))


async def _ext_method(self: SdkAgent, method: str, params: dict[str, Any]) -> Any:
    # The SDK hands extension handlers the name without its leading underscore.
    return dump_unset(await _invoke(lambda: self.sdk_agent.ext_method(method[1:], params)))


async def _ext_notification(self: SdkAgent, method: str, params: dict[str, Any]) -> None:
    await _invoke(lambda: self.sdk_agent.ext_notification(method[1:], params))


async def _no_new_session(self: SdkAgent, **kwargs: Any) -> Any:
    raise MethodNotFound("Method not found: session/new", {"method": "session/new"})


class SdkAgent(Agent):
    """An acp_fast Agent forwarding to an agent written on the official SDK.

    Built by ``wrap_sdk_agent``, which subclasses it per agent with exactly
    the methods that agent defines.
    """

    def __init__(self, sdk_agent: Any, sdk_client: SdkClient) -> None:
        self.sdk_agent = sdk_agent
        self.sdk_client = sdk_client

    def on_connect(self, client: Client) -> None:
        super().on_connect(client)
        self.sdk_client.bind(client)
        hook = getattr(self.sdk_agent, "on_connect", None)
        if callable(hook):
            hook(self.sdk_client)


def wrap_sdk_agent(agent: Any, *, use_unstable_protocol: bool = False) -> Agent:
    """Adapt an SDK agent (or an SDK-style factory ``conn -> agent``) to acp_fast."""
    sdk_client = SdkClient()
    if callable(agent) and not any(sdk_defines(agent, a) for a in SDK_AGENT_METHODS):
        agent = agent(sdk_client)  # AgentSideConnection accepts a factory the same way
    defined = {a for a in SDK_AGENT_METHODS if sdk_defines(agent, a)}
    for attr in sorted(defined & UNSTABLE_METHODS):
        if not use_unstable_protocol:
            log.warning(
                "%s.%s is unstable ACP; without use_unstable_protocol=True it answers -32601 (as under the SDK)",
                type(agent).__name__,
                attr,
            )
    if not use_unstable_protocol:
        defined -= UNSTABLE_METHODS
    namespace: dict[str, Any] = {a: _forwarder(a) for a in defined & set(_ROUTES)}
    if "new_session" not in defined:
        namespace["new_session"] = _no_new_session
    extras = {
        "set_config_option": _set_config_option,
        "cancel": _cancel,
        "ext_method": _ext_method,
        "ext_notification": _ext_notification,
    }
    namespace.update({a: fn for a, fn in extras.items() if a in defined})
    namespace["decides_capabilities"] = "initialize" in defined
    cls = type(f"SdkAgent[{type(agent).__name__}]", (SdkAgent,), namespace)
    wrapped: Agent = cls(agent, sdk_client)
    return wrapped


async def run_agent(
    agent: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    use_unstable_protocol: bool = False,
    stdio_buffer_limit_bytes: int | None = None,
    limits: Limits | None = None,
) -> None:
    """Drop-in for ``acp.run_agent``: serve the SDK agent on stdin/stdout until EOF.

    Only stdio is supported (the stream arguments must be None).
    ``stdio_buffer_limit_bytes`` becomes the longest accepted line; left as
    None, acp_fast's own limit applies (64 MiB).
    """
    from dataclasses import replace

    from .agent.serve import serve_stdio

    if input_stream is not None or output_stream is not None:
        raise TypeError("acp_fast.compat.run_agent serves stdin/stdout only; pass no streams")
    limits = limits or Limits()
    if stdio_buffer_limit_bytes is not None:
        limits = replace(limits, max_line_bytes=stdio_buffer_limit_bytes)
    await serve_stdio(wrap_sdk_agent(agent, use_unstable_protocol=use_unstable_protocol), limits)


# -- the client side ----------------------------------------------------------------------------
def _params(model: BaseModel) -> dict[str, Any]:
    """Params exactly as the SDK's ``serialize_params`` writes them."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


class SdkClient:
    """What an SDK agent's ``on_connect(conn)`` gets: the SDK's Client names over acp_fast's Client.

    Errors from the client (and calls the client's capabilities do not allow)
    raise ``acp.RequestError``; a closed connection raises ``ConnectionError``,
    as the SDK's connection does.
    """

    def __init__(self) -> None:
        self._client: Client | None = None

    def bind(self, client: Client) -> None:
        self._client = client

    @property
    def client(self) -> Client:
        """The underlying acp_fast Client (capabilities, typed helpers)."""
        if self._client is None:
            raise ConnectionError("the agent is not connected yet")
        return self._client

    async def _call(self, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except ConnectionClosed as exc:
            raise ConnectionError("Connection closed") from exc
        except AcpError as exc:
            raise RequestError(exc.code, exc.message, exc.data) from exc

    async def _request(self, method: str, params: BaseModel) -> Any:
        client = self.client
        return await self._call(lambda: client.request(method, _params(params)))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        note = _params(S.SessionNotification(session_id=session_id, update=update, field_meta=kwargs or None))
        client = self.client
        await self._call(lambda: client.session_update(note["sessionId"], note["update"], field_meta=note.get("_meta")))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> S.RequestPermissionResponse:
        req = S.RequestPermissionRequest(
            session_id=session_id, tool_call=tool_call, options=options, field_meta=kwargs or None
        )
        return S.RequestPermissionResponse.model_validate(await self._request("session/request_permission", req))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> S.ReadTextFileResponse:
        req = S.ReadTextFileRequest(session_id=session_id, path=path, line=line, limit=limit, field_meta=kwargs or None)
        return S.ReadTextFileResponse.model_validate(await self._request("fs/read_text_file", req))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> S.WriteTextFileResponse | None:
        req = S.WriteTextFileRequest(session_id=session_id, path=path, content=content, field_meta=kwargs or None)
        return _optional(S.WriteTextFileResponse, await self._request("fs/write_text_file", req))

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> S.CreateTerminalResponse:
        req = S.CreateTerminalRequest(
            session_id=session_id,
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            output_byte_limit=output_byte_limit,
            field_meta=kwargs or None,
        )
        return S.CreateTerminalResponse.model_validate(await self._request("terminal/create", req))

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> S.TerminalOutputResponse:
        req = S.TerminalOutputRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return S.TerminalOutputResponse.model_validate(await self._request("terminal/output", req))

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.ReleaseTerminalResponse | None:
        req = S.ReleaseTerminalRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return _optional(S.ReleaseTerminalResponse, await self._request("terminal/release", req))

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.WaitForTerminalExitResponse:
        req = S.WaitForTerminalExitRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return S.WaitForTerminalExitResponse.model_validate(await self._request("terminal/wait_for_exit", req))

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> S.KillTerminalResponse | None:
        req = S.KillTerminalRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return _optional(S.KillTerminalResponse, await self._request("terminal/kill", req))

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        request = _elicitation_request(message, mode, kwargs or None)
        client = self.client
        result = await self._call(lambda: client.create_elicitation(_params(request)))
        return _ELICITATION_RESPONSE.validate_python(result)

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        note = _params(S.CompleteElicitationNotification(elicitation_id=elicitation_id, field_meta=kwargs or None))
        client = self.client
        await self._call(lambda: client.complete_elicitation(note["elicitationId"], field_meta=note.get("_meta")))

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        client = self.client
        return await self._call(lambda: client.ext_method(f"_{method}", params))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        client = self.client
        await self._call(lambda: client.ext_notification(f"_{method}", params))


def _optional(model: type[M], payload: Any) -> M | None:
    """The SDK's ``validate_optional_model``: a non-object answer reads as None."""
    return model.model_validate(payload) if isinstance(payload, dict) else None


_ELICITATION_REQUESTS: tuple[tuple[type[BaseModel], type[BaseModel], str], ...] = (
    (S.ElicitationFormSessionMode, S.CreateFormSessionElicitationRequest, "form"),
    (S.ElicitationFormRequestMode, S.CreateFormRequestElicitationRequest, "form"),
    (S.ElicitationUrlSessionMode, S.CreateUrlSessionElicitationRequest, "url"),
    (S.ElicitationUrlRequestMode, S.CreateUrlRequestElicitationRequest, "url"),
)


def _elicitation_request(message: str, mode: Any, meta: dict[str, Any] | None) -> BaseModel:
    """The request model the SDK builds for ``create_elicitation(message, mode)``."""
    for mode_cls, request_cls, kind in _ELICITATION_REQUESTS:
        if isinstance(mode, mode_cls):
            fields = mode.model_dump(mode="json", exclude_none=True)
            return request_cls(message=message, mode=kind, field_meta=meta, **fields)
    raise TypeError(f"Unsupported elicitation mode: {type(mode).__name__}")


__all__ = [
    "SDK_AGENT_METHODS",
    "UNSTABLE_METHODS",
    "SdkAgent",
    "SdkClient",
    "dump_defaults",
    "dump_unset",
    "run_agent",
    "sdk_defines",
    "wrap_sdk_agent",
]
