"""What an SDK agent holds as its connection: the SDK's client-call names over acp_fast's peer.

Each call builds the installed release's request model (so validation and
``_meta`` from extra keyword arguments work as there), sends it the way the
SDK serialises params, and validates the answer with the release's response
model. Errors from the client raise ``acp.RequestError``; a closed connection
raises ``ConnectionError``, as the SDK's connection does.

Not strict (the default): calls go out whatever the client advertised, as on
the SDK. Strict: calls the client's capabilities do not allow raise
``RequestError(-32601)`` without a round trip (ACP says the agent MUST NOT
send them).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from acp import schema as S
from acp.exceptions import RequestError
from pydantic import BaseModel, TypeAdapter

from ..wire.errors import AcpError, ConnectionClosed
from .release import client_call_signature, model

if TYPE_CHECKING:
    from ..agent.client_handle import Client
    from ..peer.connection import Connection

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])

_KILL_REQUEST = model("KillTerminalRequest", "KillTerminalCommandRequest")
_KILL_RESPONSE = model("KillTerminalResponse", "KillTerminalCommandResponse")
_ELICITATION = getattr(S, "CreateElicitationResponse", None)
_ELICITATION_RESPONSE: TypeAdapter[Any] | None = TypeAdapter(_ELICITATION) if _ELICITATION is not None else None


def _params(request: BaseModel) -> dict[str, Any]:
    """Params exactly as the SDK's ``serialize_params`` writes them."""
    return request.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


def _optional(response: type[M] | None, payload: Any) -> M | None:
    """The SDK's ``validate_optional_model``: a non-object answer reads as None."""
    if response is None or not isinstance(payload, dict):
        return None
    return response.model_validate(payload)


def _one_model(request: type[BaseModel] | None) -> Callable[[F], F]:
    """Also accept the one-request-model call the SDK still honours (deprecated there too)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(self: SdkClient, *args: Any, **kwargs: Any) -> Any:
            param = args[0] if len(args) == 1 and not kwargs else kwargs.get("params") if len(kwargs) == 1 else None
            if request is not None and isinstance(param, request) and not args[1:]:
                warnings.warn(
                    f"Calling {fn.__name__} with {request.__name__} is deprecated in the SDK",
                    DeprecationWarning,
                    stacklevel=2,
                )
                fields = {n: getattr(param, n) for n in type(param).model_fields if n != "field_meta"}
                return fn(self, **fields, **(getattr(param, "field_meta", None) or {}))
            return fn(self, *args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def _release_order(fn: F) -> F:
    """Take the arguments in the installed release's order and names, positional or keyword.

    The parameters are bound to the release's own ``AgentSideConnection`` signature (which
    raises ``TypeError`` as there for a call it would refuse) and passed on by name, so an
    agent written for 0.8 (``request_permission(options, session_id, tool_call)``) and one
    for 0.12 (``(session_id, tool_call, options)``) both reach the client with the same
    request. A method the release lacks keeps compat's own signature.
    """
    sig = client_call_signature(fn.__name__)
    if sig is None:
        return fn
    kinds = {name: p.kind for name, p in sig.parameters.items()}

    @functools.wraps(fn)
    def call(self: SdkClient, *args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(self, *args, **kwargs)
        named: dict[str, Any] = {}
        for name, value in list(bound.arguments.items())[1:]:
            if kinds[name] is inspect.Parameter.VAR_KEYWORD:
                named.update(value)
            else:
                named[name] = value
        return fn(self, **named)

    call.__signature__ = sig  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


class RawConnection:
    """``conn._conn`` as SDK agents reach for it: ``send_request``/``send_notification`` by method name.

    Private in the SDK too; kept because widely used agents send terminal
    calls this way. Never gated by capabilities.
    """

    def __init__(self, owner: SdkClient) -> None:
        self._owner = owner

    async def send_request(self, method: str, params: Any = None) -> Any:
        peer = self._owner.peer
        return await self._owner._call(lambda: peer.send_request(method, params))

    async def send_notification(self, method: str, params: Any = None) -> None:
        peer = self._owner.peer

        async def send() -> None:
            peer.send_notification(method, params)
            await peer.drain()

        await self._owner._call(send)


class SdkClient:
    """The SDK's ``Client`` surface (what ``on_connect(conn)`` gets) over acp_fast's peer."""

    def __init__(self) -> None:
        self._client: Client | None = None
        self._peer: Connection | None = None
        self.strict = False
        self._conn = RawConnection(self)

    def bind(self, client: Client, peer: Connection, *, strict: bool = False) -> None:
        self._client = client
        self._peer = peer
        self.strict = strict

    @property
    def client(self) -> Client:
        """The underlying acp_fast Client (capabilities, typed helpers)."""
        if self._client is None:
            raise ConnectionError("the agent is not connected yet")
        return self._client

    @property
    def peer(self) -> Connection:
        if self._peer is None:
            raise ConnectionError("the agent is not connected yet")
        return self._peer

    def __getattr__(self, name: str) -> Any:
        # camelCase names (sessionUpdate, requestPermission) as the SDK's compatible_class adds them
        if "_" not in name and any(c.isupper() for c in name):
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
            if snake in type(self).__dict__ or hasattr(SdkClient, snake):
                return getattr(self, snake)
        raise AttributeError(name)

    async def _call(self, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except ConnectionClosed as exc:
            raise ConnectionError("Connection closed") from exc
        except AcpError as exc:
            raise RequestError(exc.code, exc.message, exc.data) from exc

    async def _request(self, method: str, request: BaseModel) -> Any:
        params = _params(request)
        if self.strict:
            client = self.client
            return await self._call(lambda: client.request(method, params))
        peer = self.peer
        return await self._call(lambda: peer.send_request(method, params))

    @_one_model(S.SessionNotification)
    @_release_order
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        note = _params(S.SessionNotification(session_id=session_id, update=update, field_meta=kwargs or None))
        client = self.client
        await self._call(lambda: client.session_update(note["sessionId"], note["update"], field_meta=note.get("_meta")))

    @_one_model(S.RequestPermissionRequest)
    @_release_order
    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        req = S.RequestPermissionRequest(
            session_id=session_id, tool_call=tool_call, options=options, field_meta=kwargs or None
        )
        return S.RequestPermissionResponse.model_validate(await self._request("session/request_permission", req))

    @_one_model(S.ReadTextFileRequest)
    @_release_order
    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> Any:
        req = S.ReadTextFileRequest(session_id=session_id, path=path, line=line, limit=limit, field_meta=kwargs or None)
        return S.ReadTextFileResponse.model_validate(await self._request("fs/read_text_file", req))

    @_one_model(S.WriteTextFileRequest)
    @_release_order
    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        req = S.WriteTextFileRequest(session_id=session_id, path=path, content=content, field_meta=kwargs or None)
        return _optional(S.WriteTextFileResponse, await self._request("fs/write_text_file", req))

    @_one_model(S.CreateTerminalRequest)
    @_release_order
    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
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

    @_one_model(S.TerminalOutputRequest)
    @_release_order
    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        req = S.TerminalOutputRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return S.TerminalOutputResponse.model_validate(await self._request("terminal/output", req))

    @_one_model(S.ReleaseTerminalRequest)
    @_release_order
    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        req = S.ReleaseTerminalRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return _optional(S.ReleaseTerminalResponse, await self._request("terminal/release", req))

    @_one_model(S.WaitForTerminalExitRequest)
    @_release_order
    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        req = S.WaitForTerminalExitRequest(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return S.WaitForTerminalExitResponse.model_validate(await self._request("terminal/wait_for_exit", req))

    @_one_model(_KILL_REQUEST)
    @_release_order
    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        assert _KILL_REQUEST is not None
        req = _KILL_REQUEST(session_id=session_id, terminal_id=terminal_id, field_meta=kwargs or None)
        return _optional(_KILL_RESPONSE, await self._request("terminal/kill", req))

    @_release_order
    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        """elicitation/create (releases from 0.10 on)."""
        if _ELICITATION_RESPONSE is None:
            raise AttributeError("this agent-client-protocol release has no elicitation")
        request = _elicitation_request(message, mode, kwargs or None)
        if self.strict:
            client = self.client
            result = await self._call(lambda: client.create_elicitation(_params(request)))
        else:
            result = await self._request("elicitation/create", request)
        return _ELICITATION_RESPONSE.validate_python(result)

    @_release_order
    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        """elicitation/complete (releases from 0.10 on)."""
        note_model = model("CompleteElicitationNotification")
        if note_model is None:
            raise AttributeError("this agent-client-protocol release has no elicitation")
        note = _params(note_model(elicitation_id=elicitation_id, field_meta=kwargs or None))
        if self.strict:
            client = self.client
            await self._call(lambda: client.complete_elicitation(note["elicitationId"], field_meta=note.get("_meta")))
        else:
            await self._conn.send_notification("elicitation/complete", note)

    @_release_order
    async def connect_mcp(self, server_id: str, **kwargs: Any) -> Any:
        """mcp/connect to an MCP server the client provides over ACP (releases from 1.0 on)."""
        req = _mcp_model("ConnectMcpRequest")(server_id=server_id, field_meta=kwargs or None)
        return _mcp_model("ConnectMcpResponse").model_validate(await self._request("mcp/connect", req))

    @_release_order
    async def disconnect_mcp(self, connection_id: str, **kwargs: Any) -> Any:
        """mcp/disconnect (1.0 on); a non-object answer reads as the empty response, as in the SDK."""
        req = _mcp_model("DisconnectMcpRequest")(connection_id=connection_id, field_meta=kwargs or None)
        answer = await self._request("mcp/disconnect", req)
        return _mcp_model("DisconnectMcpResponse").model_validate(answer if isinstance(answer, dict) else {})

    @_release_order
    async def mcp_message(
        self, connection_id: str, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """One MCP request over mcp/message (1.0 on); the answer is the inner result, as it came."""
        req = _mcp_model("MessageMcpRequest")(
            connection_id=connection_id, method=method, params=params, field_meta=kwargs or None
        )
        return await self._request("mcp/message", req)

    @_release_order
    async def notify_mcp(
        self, connection_id: str, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """One MCP notification over mcp/message (1.0 on)."""
        note = _mcp_model("MessageMcpNotification")(
            connection_id=connection_id, method=method, params=params, field_meta=kwargs or None
        )
        await self._conn.send_notification("mcp/message", _params(note))

    @_release_order
    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        return await self._conn.send_request(f"_{method}", params)

    @_release_order
    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        await self._conn.send_notification(f"_{method}", params)


def _mcp_model(name: str) -> type[BaseModel]:
    found = model(name)
    if found is None:
        raise AttributeError(f"this agent-client-protocol release has no {name} (MCP over ACP calls are 1.0 on)")
    return found


_ELICITATION_REQUESTS: tuple[tuple[str, str, str], ...] = (
    ("ElicitationFormSessionMode", "CreateFormSessionElicitationRequest", "form"),
    ("ElicitationFormRequestMode", "CreateFormRequestElicitationRequest", "form"),
    ("ElicitationUrlSessionMode", "CreateUrlSessionElicitationRequest", "url"),
    ("ElicitationUrlRequestMode", "CreateUrlRequestElicitationRequest", "url"),
)


def _elicitation_request(message: str, mode: Any, meta: dict[str, Any] | None) -> BaseModel:
    """The request model the SDK builds for ``create_elicitation(message, mode)``."""
    for mode_name, request_name, kind in _ELICITATION_REQUESTS:
        mode_cls, request_cls = model(mode_name), model(request_name)
        if mode_cls is not None and request_cls is not None and isinstance(mode, mode_cls):
            fields = mode.model_dump(mode="json", exclude_none=True)
            return request_cls(message=message, mode=kind, field_meta=meta, **fields)
    raise TypeError(f"Unsupported elicitation mode: {type(mode).__name__}")
