"""MCP over ACP in both roles: provider bridge and client connections (R17).

The two wire forms, and which one a message uses, are described in mcp_wire.py.

Provider role: an agent (or proxy) that hosts MCP servers sets
``Agent.mcp_provider`` to an :class:`McpProvider`. Incoming ``mcp/*``
requests run in the background pool (R02, they count against R08) and are
routed here: a request-scoped one to ``McpProvider.request``, the connect
form to ``connect``/``message``/``disconnect``. Connection ids are minted by
the bridge; the provider only sees its own opaque handle. A message for an unknown or closed connection is
refused with -32602 when it is a request and dropped with a log record when
it is a notification (the Rust SDK's behaviour).

Client role: for servers the client declared as ``{"type": "acp",
"serverId"}`` in ``session/new`` (or load/resume/fork), ``McpBridge.request``
sends one request-scoped ``mcp/message`` per call; in the connect form the
agent opens an :class:`McpClientConnection`. It sends ``mcp/connect`` at once and holds
every message for that connection until the connect response has arrived,
so no message can ever precede it; messages queued meanwhile leave in call
order. Messages the hosted server sends back (sampling, ping,
``notifications/...``) arrive as incoming ``mcp/message`` and go to the
connection's :class:`McpInbound`.

Both connection tables are bounded by ``Limits.max_mcp_connections`` each,
so a peer flooding ``mcp/connect`` cannot starve the agent's own client
connections; the request-scoped tables (incoming requests being served,
outgoing requests awaiting their outcome) by ``Limits.max_mcp_requests``
each. Incoming request-scoped notifications are routed on the dispatch loop
itself, in arrival order and with no task each, to the listener of the
outgoing request they name; unknown ones are dropped with a log record.
Results a provider returns as ``bytes`` (already-encoded JSON, e.g. relayed
from an MCP server's stdout) are passed through with ``jsonrpc.raw`` and
never decoded.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import os
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from ..wire.errors import (
    AcpError,
    InvalidParams,
    McpBackendFailed,
    McpBindingError,
    McpLimitExceeded,
    McpServerUnavailable,
    MethodNotFound,
    RequestCancelled,
    ServerBusy,
)
from .mcp_wire import MCP_PROTOCOL_VERSION as MCP_PROTOCOL_VERSION  # re-exported: they were defined here
from .mcp_wire import META_CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES
from .mcp_wire import META_PROTOCOL_VERSION as META_PROTOCOL_VERSION
from .mcp_wire import (
    Form,
    connect_params,
    form_of,
    inner_outcome,
    pass_through,
    scoped_params,
    with_request_meta,
)
from .mcp_wire import McpError as McpError

if TYPE_CHECKING:
    from ..peer.connection import Connection

log = logging.getLogger(__name__)

Handle = Any

#: Listener for the request-scoped notifications of one outgoing request: (method, params).
NotificationListener = Callable[[str, "dict[str, Any] | None"], None]


class McpRequestOptions(TypedDict, total=False):
    """Per-call options of ``Client.mcp_request``."""

    form: Form  # which wire form; unset: the rule in the module doc
    request_id: str  # the inner request's id (request-scoped form); unset: a fresh one
    on_notification: NotificationListener  # gets the request's scoped notifications


class McpProvider:
    """Hosts MCP servers reachable over ACP; subclass and register on the Agent.

    ``connect`` returns an opaque handle for one connection (raise
    InvalidParams for an unknown server). ``message`` handles one inner MCP
    message: for a request it returns the inner result (a JSON value, or
    ``bytes`` of already-encoded JSON) or raises an AcpError whose code and
    message become the outer error; for a notification its return value is
    ignored. ``disconnect`` frees the handle; it is also called for every
    connection still open when the ACP connection ends. ``request`` serves
    the request-scoped form; there an AcpError is the inner error, carried in
    a successful answer, except the McpBindingError kinds and cancellation.
    """

    async def connect(self, server_id: str) -> Handle:
        raise InvalidParams(f"unknown MCP server {server_id!r}", {"serverId": server_id})

    async def message(
        self, handle: Handle, method: str, params: dict[str, Any] | None, *, is_request: bool
    ) -> Any:
        raise MethodNotFound(f"Method not found: {method}", {"method": method})

    async def disconnect(self, handle: Handle) -> None:
        """Nothing to free by default."""

    async def request(self, server_id: str, method: str, params: dict[str, Any] | None, scope: McpScope) -> Any:
        """One request-scoped inner MCP request: return its result, raise an AcpError for its inner error.

        Raise McpServerUnavailable for an unknown server. By default one
        connect-form round trip per request (``connect``, ``message``,
        ``disconnect``; an InvalidParams from ``connect`` means no such
        server), so a provider written for the connect form serves both
        forms; override it to keep state across requests or to send
        notifications with ``scope.notify``.
        """
        try:
            handle = await self.connect(server_id)
        except InvalidParams as exc:
            raise McpServerUnavailable(exc.message, {"serverId": server_id}) from None
        try:
            return await self.message(handle, method, params, is_request=True)
        finally:
            await self.disconnect(handle)


class McpScope:
    """One active incoming request-scoped MCP request, as its provider sees it."""

    __slots__ = ("_conn", "done", "meta", "request_id", "server_id")

    def __init__(self, conn: Connection, server_id: str, request_id: str, meta: dict[str, Any] | None) -> None:
        self._conn = conn
        self.server_id = server_id
        self.request_id = request_id
        self.meta = meta  # the outer ``_meta`` of the envelope, not the inner one
        self.done = False

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification scoped to this request; dropped once it has been answered."""
        if self.done:
            return
        self._conn.send_notification("mcp/message", scoped_params(self.server_id, self.request_id, method, params))
        await self._conn.drain()


class McpInbound:
    """What a client-role connection does with messages the hosted server sends back."""

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        if method == "ping":  # MCP: either side may ping; the answer is an empty result
            return {}
        raise MethodNotFound(f"Method not found: {method}", {"method": method})

    async def notification(self, method: str, params: dict[str, Any] | None) -> None:
        log.debug("MCP notification %s from the client-hosted server ignored", method)


def _ignore(method: str, params: dict[str, Any] | None) -> None:
    """The listener of a request whose caller wants no notifications."""


class ConnState(enum.Enum):
    CONNECTING = "connecting"
    OPEN = "open"
    CLOSED = "closed"


class _Hosted:
    """One provider-side connection."""

    __slots__ = ("handle", "id", "server_id", "state")

    def __init__(self, connection_id: str, server_id: str) -> None:
        self.id = connection_id
        self.server_id = server_id
        self.handle: Handle = None
        self.state = ConnState.CONNECTING


class McpClientConnection:
    """The agent's connection to one MCP server the client hosts (client role)."""

    def __init__(self, bridge: McpBridge, server_id: str, inbound: McpInbound | None = None) -> None:
        self._bridge = bridge
        self.server_id = server_id
        self.inbound = inbound or McpInbound()
        self.connection_id: str | None = None
        self.state = ConnState.CONNECTING
        self._ready: asyncio.Future[str] = bridge.conn.loop.create_future()

    def _connected(self, result: Any, error: AcpError | None) -> None:
        if self._ready.done():
            return
        if error is None and isinstance(result, dict) and isinstance(result.get("connectionId"), str):
            self.connection_id = result["connectionId"]
            self.state = ConnState.OPEN
            self._bridge._client_open(self)
            self._ready.set_result(result["connectionId"])
            return
        self.state = ConnState.CLOSED
        self._bridge._client_gone(self)
        exc = error or InvalidParams(f"mcp/connect answered without a connectionId: {result!r}")
        self._ready.set_exception(exc)
        self._ready.exception()  # retrieved here; every waiter still gets it raised

    async def wait_connected(self) -> str:
        """The connection id, once the client answered ``mcp/connect`` (R17)."""
        return await asyncio.shield(self._ready)

    async def _open_id(self) -> str:
        connection_id = await self.wait_connected()
        if self.state is not ConnState.OPEN:
            raise InvalidParams(f"MCP connection {connection_id!r} is closed")
        return connection_id

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one inner MCP request; returns the inner result, raises the inner error."""
        connection_id = await self._open_id()
        pending = self._bridge.conn.send_request("mcp/message", connect_params(connection_id, method, params))
        return await pending  # a cancelled awaiter makes the connection send $/cancel_request

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one inner MCP notification."""
        connection_id = await self._open_id()
        conn = self._bridge.conn
        conn.send_notification("mcp/message", connect_params(connection_id, method, params))
        await conn.drain()

    async def close(self) -> None:
        """``mcp/disconnect``; later messages for this connection are refused locally."""
        if self.state is ConnState.CLOSED:
            return
        connection_id = await self.wait_connected()
        if self.state is not ConnState.OPEN:  # closed while the connect was in flight
            return
        self.state = ConnState.CLOSED
        self._bridge._client_gone(self)
        await self._bridge.conn.send_request("mcp/disconnect", {"connectionId": connection_id})


class McpBridge:
    """Both MCP-over-ACP tables of one ACP connection."""

    def __init__(
        self,
        conn: Connection,
        provider: McpProvider | None,
        max_connections: int,
        declared_servers: Callable[[], Iterable[str]] | None = None,
        client_role: bool = False,
        max_requests: int | None = None,
    ) -> None:
        self.conn = conn
        self.provider = provider
        self.max_connections = max_connections
        self.max_requests = max_requests if max_requests is not None else conn.limits.max_mcp_requests
        self.client_role = client_role
        self._declared = declared_servers or (lambda: ())
        self._hosted: dict[str, _Hosted] = {}
        self._clients: dict[str, McpClientConnection] = {}
        self._connecting: set[McpClientConnection] = set()
        self._serving: dict[tuple[str, str], McpScope] = {}  # incoming request-scoped, being served
        self._awaiting: dict[tuple[str, str], NotificationListener] = {}  # outgoing, awaiting outcome
        self.peer_form: Form | None = None  # the form this peer last spoke here, if any
        self._prefix = f"acpf-{os.urandom(4).hex()}-"
        self._ids = itertools.count(1)

    @property
    def enabled(self) -> bool:
        """Whether to advertise ``mcpCapabilities.acp``."""
        return self.provider is not None or self.client_role

    @property
    def open_counts(self) -> dict[str, int]:
        return {
            "hosted": len(self._hosted),
            "client": len(self._clients) + len(self._connecting),
            "serving": len(self._serving),
            "awaiting": len(self._awaiting),
        }

    # -- provider role: incoming mcp/connect, mcp/message, mcp/disconnect ---------
    def handles(self, method: str) -> bool:
        """Whether an incoming ``mcp/*`` request has somewhere to go (else -32601)."""
        if method == "mcp/message":
            return self.enabled
        return self.provider is not None

    def check(self, method: str, kwargs: dict[str, Any]) -> None:
        """Refuse a malformed ``mcp/message`` (-32602) before it takes a background slot."""
        if method == "mcp/message" and form_of(kwargs) == "request":
            params = kwargs.get("params")
            if params is not None and type(params) is not dict:
                raise InvalidParams(
                    "Invalid params: mcp/message params must be an object or null", {"field": "params"}
                )

    async def handle_request(self, method: str, kwargs: dict[str, Any]) -> Any:
        if method == "mcp/connect":
            self.peer_form = "connect"
            return await self._connect(kwargs["server_id"])
        if method == "mcp/disconnect":
            return await self._disconnect(kwargs["connection_id"])
        if form_of(kwargs) == "connect":
            self.peer_form = "connect"
            return await self._message(kwargs["connection_id"], kwargs["method"], kwargs.get("params"))
        self.peer_form = "request"
        return await self._serve(
            kwargs["server_id"], kwargs["request_id"], kwargs["method"], kwargs.get("params"), kwargs.get("field_meta")
        )

    async def _serve(
        self, server_id: str, request_id: str, method: str, params: dict[str, Any] | None, meta: Any
    ) -> dict[str, Any]:
        """One incoming request-scoped request: the carrier of its inner outcome, or a binding error."""
        if self.provider is None:
            raise McpServerUnavailable(f"this agent hosts no MCP server {server_id!r}", {"serverId": server_id})
        key = (server_id, request_id)
        if key in self._serving:
            raise InvalidParams(
                f"MCP request {request_id!r} is already active for server {server_id!r}",
                {"serverId": server_id, "requestId": request_id},
            )
        if len(self._serving) >= self.max_requests:
            raise McpLimitExceeded(
                f"{len(self._serving)} MCP-over-ACP requests are being served (limit {self.max_requests})",
                {"serverId": server_id, "limit": self.max_requests},
            )
        scope = McpScope(self.conn, server_id, request_id, meta if isinstance(meta, dict) else None)
        self._serving[key] = scope
        try:
            value = await self.provider.request(server_id, method, params, scope)
        except (McpBindingError, RequestCancelled):
            raise
        except AcpError as exc:  # the inner MCP error travels in the carrier
            return {"error": exc.to_error_obj()}
        except Exception as exc:
            log.exception("MCP provider failed on %s for %r", method, server_id)
            raise McpBackendFailed(data={"serverId": server_id, "details": str(exc)}) from None
        finally:
            scope.done = True
            del self._serving[key]
        return {"result": pass_through(value)}

    async def _connect(self, server_id: str) -> dict[str, Any]:
        assert self.provider is not None
        if len(self._hosted) >= self.max_connections:
            raise ServerBusy(
                f"{len(self._hosted)} MCP-over-ACP connections are open (limit {self.max_connections}); "
                "disconnect one first",
                {"limit": self.max_connections},
            )
        hosted = _Hosted(f"{self._prefix}{next(self._ids)}", server_id)
        self._hosted[hosted.id] = hosted  # reserved before the await: the bound holds under races
        try:
            hosted.handle = await self.provider.connect(server_id)
        except BaseException:
            self._hosted.pop(hosted.id, None)
            raise
        if hosted.state is ConnState.CLOSED:  # the ACP connection ended meanwhile
            await self.provider.disconnect(hosted.handle)
            raise InvalidParams(f"MCP connection to {server_id!r} was closed while connecting")
        hosted.state = ConnState.OPEN
        return {"connectionId": hosted.id}

    def _open_hosted(self, connection_id: str) -> _Hosted | None:
        hosted = self._hosted.get(connection_id)
        return hosted if hosted is not None and hosted.state is ConnState.OPEN else None

    async def _message(self, connection_id: str, method: str, params: Any) -> Any:
        hosted = self._open_hosted(connection_id)
        if hosted is not None:
            assert self.provider is not None
            value = await self.provider.message(hosted.handle, method, params, is_request=True)
            return pass_through(value)
        client = self._clients.get(connection_id)
        if client is not None:
            return pass_through(await client.inbound.request(method, params))
        raise InvalidParams(
            f"unknown or closed MCP connection {connection_id!r}", {"connectionId": connection_id}
        )

    async def _disconnect(self, connection_id: str) -> dict[str, Any]:
        hosted = self._open_hosted(connection_id)
        if hosted is None:
            raise InvalidParams(
                f"unknown or closed MCP connection {connection_id!r}", {"connectionId": connection_id}
            )
        hosted.state = ConnState.CLOSED
        del self._hosted[connection_id]
        assert self.provider is not None
        await self.provider.disconnect(hosted.handle)
        return {}

    def route_notification(self, params: Any) -> Coroutine[Any, Any, None] | None:
        """An incoming ``mcp/message`` notification: a request-scoped one is routed here and now,
        on the dispatch loop (in order, no task); a connect-form one is returned as work to spawn."""
        if not isinstance(params, dict) or params.get("connectionId") is not None or "serverId" not in params:
            return self.handle_notification(params)
        self.peer_form = "request"
        server_id, request_id, method = params.get("serverId"), params.get("requestId"), params.get("method")
        inner = params.get("params")
        if not (type(server_id) is str and type(request_id) is str and type(method) is str) or (
            inner is not None and type(inner) is not dict
        ):
            log.warning("dropped malformed request-scoped mcp/message notification")
            return None
        listener = self._awaiting.get((server_id, request_id))
        if listener is None:
            log.debug("mcp/message %s for no active request %r of %r ignored", method, request_id, server_id)
            return None
        try:
            listener(method, inner)
        except Exception:
            log.exception("MCP notification listener for %r failed on %s", request_id, method)
        return None

    async def handle_notification(self, params: Any) -> None:
        """An incoming connect-form ``mcp/message`` without id: never answered (R06)."""
        if not isinstance(params, dict) or not isinstance(params.get("connectionId"), str):
            log.warning("dropped malformed mcp/message notification")
            return
        method = params.get("method")
        if not isinstance(method, str):
            log.warning("dropped mcp/message notification without an inner method")
            return
        connection_id: str = params["connectionId"]
        inner = params.get("params")
        inner = inner if isinstance(inner, dict) else None
        hosted = self._open_hosted(connection_id)
        try:
            if hosted is not None:
                assert self.provider is not None
                await self.provider.message(hosted.handle, method, inner, is_request=False)
            elif (client := self._clients.get(connection_id)) is not None:
                await client.inbound.notification(method, inner)
            else:
                log.warning("mcp/message %s for unknown or closed connection %r ignored", method, connection_id)
        except Exception:
            log.exception("MCP notification %s on %r failed", method, connection_id)

    # -- client role ------------------------------------------------------------------
    def open_client(self, server_id: str, inbound: McpInbound | None = None) -> McpClientConnection:
        """Send ``mcp/connect`` now; the returned connection holds messages until it is answered."""
        self._check_declared(server_id)
        if len(self._clients) + len(self._connecting) >= self.max_connections:
            raise ServerBusy(
                f"{len(self._clients) + len(self._connecting)} MCP-over-ACP client connections are open "
                f"(limit {self.max_connections})"
            )
        client = McpClientConnection(self, server_id, inbound)
        pending = self.conn.send_request("mcp/connect", {"serverId": server_id})
        self._connecting.add(client)

        async def on_connect(result: Any, error: AcpError | None) -> None:
            # Ordered barrier (R20): the id is routable before the next message is read.
            client._connected(result, error)

        pending.on_result(on_connect)
        return client

    async def connect_client(self, server_id: str, inbound: McpInbound | None = None) -> McpClientConnection:
        """Open a client-role connection and wait until the client answered ``mcp/connect``."""
        client = self.open_client(server_id, inbound)
        await client.wait_connected()
        return client

    def form_for(self, server_id: str, form: Form | None = None) -> Form:
        """The form a call to ``server_id`` uses: ``form`` if given, else the rule in the module doc."""
        if form is not None:
            return form
        if self._client_to(server_id) is not None:
            return "connect"
        return self.peer_form or "request"

    def _client_to(self, server_id: str) -> McpClientConnection | None:
        """A connect-form connection to ``server_id`` that is open or still connecting (one is enough)."""
        for client in (*self._clients.values(), *self._connecting):
            if client.server_id == server_id and client.state is not ConnState.CLOSED:
                return client
        return None

    async def request(
        self, server_id: str, method: str, params: dict[str, Any] | None = None, **options: Unpack[McpRequestOptions]
    ) -> Any:
        """One inner MCP request to a server the client declared, in the form ``form_for`` picks."""
        if self.form_for(server_id, options.get("form")) == "connect":
            client = self._client_to(server_id) or self.open_client(server_id)
            return await client.request(method, params)  # waits for the connect answer (R17)
        self._check_declared(server_id)
        rid = options.get("request_id")
        if rid is None:
            rid = f"{self._prefix}r{next(self._ids)}"
        key = (server_id, rid)
        if key in self._awaiting:
            raise InvalidParams(f"MCP request {rid!r} is already active for server {server_id!r}")
        if len(self._awaiting) >= self.max_requests:
            raise McpLimitExceeded(
                f"{len(self._awaiting)} MCP-over-ACP requests await their outcome (limit {self.max_requests})"
            )
        params = with_request_meta(params)
        pending = self.conn.send_request("mcp/message", scoped_params(server_id, rid, method, params))
        self._awaiting[key] = options.get("on_notification") or _ignore
        try:
            carrier = await pending  # a cancelled awaiter makes the connection send $/cancel_request
        finally:
            self._awaiting.pop(key, None)  # shutdown may have cleared it already
        return inner_outcome(carrier)

    def _check_declared(self, server_id: str) -> None:
        if not self.client_role:
            raise MethodNotFound("this agent does not use MCP over ACP (set Agent.mcp_over_acp = True)")
        if server_id not in set(self._declared()):
            raise InvalidParams(
                f"no session declared an ACP-transport MCP server with serverId {server_id!r}",
                {"serverId": server_id},
            )

    def _client_open(self, client: McpClientConnection) -> None:
        self._connecting.discard(client)
        assert client.connection_id is not None
        self._clients[client.connection_id] = client

    def _client_gone(self, client: McpClientConnection) -> None:
        self._connecting.discard(client)
        if client.connection_id is not None and self._clients.get(client.connection_id) is client:
            del self._clients[client.connection_id]

    # -- shutdown -------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Free every connection still open; the ACP connection is ending."""
        for client in list(self._clients.values()) + list(self._connecting):
            client.state = ConnState.CLOSED
            self._client_gone(client)
        for scope in self._serving.values():
            scope.done = True  # their jobs are the pool's to cancel; no notification leaves now
        self._awaiting.clear()
        hosted, self._hosted = list(self._hosted.values()), {}
        for h in hosted:
            was_open = h.state is ConnState.OPEN
            h.state = ConnState.CLOSED
            if was_open and self.provider is not None:
                try:
                    await self.provider.disconnect(h.handle)
                except Exception:
                    log.exception("MCP provider failed to disconnect %r", h.id)
