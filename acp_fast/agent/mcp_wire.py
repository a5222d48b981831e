"""The two wire forms of MCP over ACP: what their messages look like and how to tell them apart (R17).

Both forms are served on every connection; which one a message uses is
read from the message itself, never from a setting.

Request-scoped (ACP schema 1.24 on): ``mcp/message {serverId, requestId,
method, params?}`` is one inner MCP request. ``requestId`` is the caller's id
for the inner request (a string, unique among its active requests to that
server), not the outer JSON-RPC id. The outer result is a carrier holding
exactly one inner outcome, ``{"result": ...}`` or ``{"error": {code,
message, data?}}``; outer errors are for the binding itself (-32602
malformed or duplicate, -32800 cancelled, -33000 over the limit, -33001 no
such server, -33002 the server failed without an outcome). While the request
is active the provider may send ``mcp/message`` notifications with the same
``serverId`` and ``requestId`` (progress and the like). There is no connect
or disconnect.

Connect form (before 1.24, kept for peers that speak it):
``mcp/connect {serverId}`` answers ``{connectionId}``; ``mcp/message
{connectionId, method, params?}`` carries one inner MCP message, flattened:
an outer ``id`` makes it an inner request whose result (or error) *is* the
outer one, no ``id`` makes it a notification; ``mcp/disconnect
{connectionId}`` answers ``{}``.

Which form: an incoming ``mcp/message`` with ``connectionId`` is the connect
form, one with ``serverId`` and ``requestId`` the request-scoped form (both,
or neither: -32602). For its own calls (``Client.mcp_request``) the agent
uses the connect form when it holds a connect-form connection to that
server (open or still connecting), else the form this peer has itself
spoken on this connection (an ``mcp/connect`` or ``connectionId`` says
connect, a ``serverId`` message says request-scoped), else the
request-scoped form, which is the one schema 1.24 clients serve; ``form=``
overrides it per call.
"""

from __future__ import annotations

from typing import Any, Literal

from ..wire import jsonrpc
from ..wire.errors import InvalidParams, McpBackendFailed, OtherError

#: The two wire forms; ``None`` lets the bridge pick by the rule above.
Form = Literal["request", "connect"]

#: The MCP revision of the request-scoped form, and the inner ``_meta`` keys a
#: provider of that revision reads from every request (added when missing).
MCP_PROTOCOL_VERSION = "2026-07-28"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


class McpError(OtherError):
    """An inner MCP error (request-scoped form): raised by ``Client.mcp_request``; a provider may raise it too."""


def form_of(kwargs: dict[str, Any]) -> Form:
    """Which form a parsed incoming ``mcp/message`` is in; -32602 when it names both or neither."""
    present = {wire for wire, py in _FORM_FIELDS.items() if kwargs.get(py) is not None}
    if present == {"connectionId"}:
        return "connect"
    if present == {"serverId", "requestId"}:
        return "request"
    raise InvalidParams(
        "Invalid params: mcp/message needs either connectionId (connect form) "
        "or serverId and requestId (request-scoped form)",
        {"fields": sorted(present)},
    )


#: The fields that tell the two forms apart: wire name -> keyword name.
_FORM_FIELDS = {"connectionId": "connection_id", "serverId": "server_id", "requestId": "request_id"}


def connect_params(connection_id: str, method: str, params: Any) -> dict[str, Any]:
    """Connect-form ``mcp/message`` params."""
    return _with_inner({"connectionId": connection_id}, method, params)


def scoped_params(server_id: str, request_id: str, method: str, params: Any) -> dict[str, Any]:
    """Request-scoped ``mcp/message`` params."""
    return _with_inner({"serverId": server_id, "requestId": request_id}, method, params)


def _with_inner(route: dict[str, Any], method: str, params: Any) -> dict[str, Any]:
    route["method"] = method
    if params is not None:
        route["params"] = params
    return route


def with_request_meta(params: dict[str, Any] | None) -> dict[str, Any]:
    """Inner params with the version and capabilities a 2026-07-28 provider reads; the caller's own win."""
    base = dict(params or {})
    meta = base.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault(META_PROTOCOL_VERSION, MCP_PROTOCOL_VERSION)
    meta.setdefault(META_CLIENT_CAPABILITIES, {})
    base["_meta"] = meta
    return base


def inner_outcome(carrier: Any) -> Any:
    """The inner result of a request-scoped answer; raises its inner error (``result`` wins if both)."""
    if isinstance(carrier, dict):
        if "result" in carrier:
            return carrier["result"]
        err = carrier.get("error")
        if isinstance(err, dict) and type(err.get("code")) is int and isinstance(err.get("message"), str):
            raise McpError(err["code"], err["message"], err.get("data"))
    raise McpBackendFailed("mcp/message answered without a result or error carrier", {"response": carrier})


def pass_through(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return jsonrpc.raw(bytes(value))
    return value
