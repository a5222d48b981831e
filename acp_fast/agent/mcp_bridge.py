"""MCP over ACP in both roles: provider bridge and client connections (R17).

Wire (schema-native, as in the official SDKs): ``mcp/connect {serverId}``
answers ``{connectionId}``; ``mcp/message {connectionId, method, params?}``
carries one inner MCP message, flattened: an outer ``id`` makes it an inner
request whose result (or error) *is* the outer one, no ``id`` makes it a
notification; ``mcp/disconnect {connectionId}`` answers ``{}``.

Provider role: an agent (or proxy) that hosts MCP servers sets
``Agent.mcp_provider`` to an :class:`McpProvider`. Incoming ``mcp/*``
requests run in the background pool (R02, they count against R08) and are
routed here. Connection ids are minted by the bridge; the provider only
sees its own opaque handle. A message for an unknown or closed connection is
refused with -32602 when it is a request and dropped with a log record when
it is a notification (the Rust SDK's behaviour).

Client role: for servers the client declared as ``{"type": "acp",
"serverId"}`` in ``session/new`` (or load/resume/fork), the agent opens an
:class:`McpClientConnection`. It sends ``mcp/connect`` at once and holds
every message for that connection until the connect response has arrived,
so no message can ever precede it; messages queued meanwhile leave in call
order. Messages the hosted server sends back (sampling, ping,
``notifications/...``) arrive as incoming ``mcp/message`` and go to the
connection's :class:`McpInbound`.

Both tables are bounded by ``Limits.max_mcp_connections`` each, so a peer
flooding ``mcp/connect`` cannot starve the agent's own client connections.
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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..wire import jsonrpc
from ..wire.errors import AcpError, InvalidParams, MethodNotFound, ServerBusy

if TYPE_CHECKING:
    from ..peer.connection import Connection

log = logging.getLogger(__name__)

Handle = Any


class McpProvider:
    """Hosts MCP servers reachable over ACP; subclass and register on the Agent.

    ``connect`` returns an opaque handle for one connection (raise
    InvalidParams for an unknown server). ``message`` handles one inner MCP
    message: for a request it returns the inner result (a JSON value, or
    ``bytes`` of already-encoded JSON) or raises an AcpError whose code and
    message become the outer error; for a notification its return value is
    ignored. ``disconnect`` frees the handle; it is also called for every
    connection still open when the ACP connection ends.
    """

    async def connect(self, server_id: str) -> Handle:
        raise InvalidParams(f"unknown MCP server {server_id!r}", {"serverId": server_id})

    async def message(
        self, handle: Handle, method: str, params: dict[str, Any] | None, *, is_request: bool
    ) -> Any:
        raise MethodNotFound(f"Method not found: {method}", {"method": method})

    async def disconnect(self, handle: Handle) -> None:
        """Nothing to free by default."""


class McpInbound:
    """What a client-role connection does with messages the hosted server sends back."""

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        if method == "ping":  # MCP: either side may ping; the answer is an empty result
            return {}
        raise MethodNotFound(f"Method not found: {method}", {"method": method})

    async def notification(self, method: str, params: dict[str, Any] | None) -> None:
        log.debug("MCP notification %s from the client-hosted server ignored", method)


class ConnState(enum.Enum):
    CONNECTING = "connecting"
    OPEN = "open"
    CLOSED = "closed"


def _outer(connection_id: str, method: str, params: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"connectionId": connection_id, "method": method}
    if params is not None:
        obj["params"] = params
    return obj


def _pass_through(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return jsonrpc.raw(bytes(value))
    return value


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
        pending = self._bridge.conn.send_request("mcp/message", _outer(connection_id, method, params))
        return await pending  # a cancelled awaiter makes the connection send $/cancel_request

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one inner MCP notification."""
        connection_id = await self._open_id()
        conn = self._bridge.conn
        conn.send_notification("mcp/message", _outer(connection_id, method, params))
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
    ) -> None:
        self.conn = conn
        self.provider = provider
        self.max_connections = max_connections
        self.client_role = client_role
        self._declared = declared_servers or (lambda: ())
        self._hosted: dict[str, _Hosted] = {}
        self._clients: dict[str, McpClientConnection] = {}
        self._connecting: set[McpClientConnection] = set()
        self._prefix = f"acpf-{os.urandom(4).hex()}-"
        self._ids = itertools.count(1)

    @property
    def enabled(self) -> bool:
        """Whether to advertise ``mcpCapabilities.acp``."""
        return self.provider is not None or self.client_role

    @property
    def open_counts(self) -> dict[str, int]:
        return {"hosted": len(self._hosted), "client": len(self._clients) + len(self._connecting)}

    # -- provider role: incoming mcp/connect, mcp/message, mcp/disconnect ---------
    def handles(self, method: str) -> bool:
        """Whether an incoming ``mcp/*`` request has somewhere to go (else -32601)."""
        if method == "mcp/message":
            return self.enabled
        return self.provider is not None

    async def handle_request(self, method: str, kwargs: dict[str, Any]) -> Any:
        if method == "mcp/connect":
            return await self._connect(kwargs["server_id"])
        if method == "mcp/disconnect":
            return await self._disconnect(kwargs["connection_id"])
        return await self._message(kwargs["connection_id"], kwargs["method"], kwargs.get("params"))

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
            return _pass_through(value)
        client = self._clients.get(connection_id)
        if client is not None:
            return _pass_through(await client.inbound.request(method, params))
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

    async def handle_notification(self, params: Any) -> None:
        """An incoming ``mcp/message`` without id: never answered (R06)."""
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
        if not self.client_role:
            raise MethodNotFound("this agent does not use MCP over ACP (set Agent.mcp_over_acp = True)")
        if server_id not in set(self._declared()):
            raise InvalidParams(
                f"no session declared an ACP-transport MCP server with serverId {server_id!r}",
                {"serverId": server_id},
            )
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
        hosted, self._hosted = list(self._hosted.values()), {}
        for h in hosted:
            was_open = h.state is ConnState.OPEN
            h.state = ConnState.CLOSED
            if was_open and self.provider is not None:
                try:
                    await self.provider.disconnect(h.handle)
                except Exception:
                    log.exception("MCP provider failed to disconnect %r", h.id)
