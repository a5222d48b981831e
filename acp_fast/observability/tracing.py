"""OpenTelemetry traces: a server span per incoming request, a span per prompt turn, W3C context in ``_meta``.

Only the OpenTelemetry API is used (the ``otel`` extra); the SDK, its
exporters and the global tracer provider are the application's (for example
``opentelemetry-instrument acp-fast ...``, or ``trace.set_tracer_provider``
before serving). Without a configured provider the API's spans are no-ops.

- Each incoming request gets a ``SERVER`` span named after its method, whose
  parent is the W3C context the client put in ``params._meta``
  (``traceparent``, ``tracestate``, ``baggage``: ACP's meta propagation).
  It ends when the answer is written, with ``error.type`` and
  ``rpc.response.status_code`` on an error.
- A prompt turn gets an ``invoke_agent`` span under its request's span, and
  that span is the current context inside the agent's ``prompt``: the agent's
  own spans (LLM calls, tools) nest under it. Its stop reason is
  ``gen_ai.response.finish_reasons``; a cancel, and a host's drain, are
  events on both spans.
- Requests the agent sends the client (``session/request_permission``,
  ``fs/*``, ...) carry the current context in their ``_meta``.

Attribute names follow the OpenTelemetry MCP and GenAI conventions where one
fits (``jsonrpc.request.id``, ``gen_ai.conversation.id`` for the session id,
``network.transport``, ``error.type``), with ``acp.method.name`` in the place
of ``mcp.method.name``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Tracer

from ..agent.base import Turn, current_turn
from ..agent.server import AgentServer
from ..peer.connection import Connection, IncomingRequest
from ..peer.pending import PendingRequest
from ..wire.errors import from_exception

#: The instrumentation scope's name.
SCOPE = "acp_fast"
#: Methods whose work outlives the handler: their request span is found again inside the turn.
_TURN_METHODS = frozenset({"session/prompt"})
#: ``network.transport`` by acp_fast transport.
_NETWORK = {"websocket": "tcp", "http": "tcp", "stdio": "pipe"}


def _meta_of(params: Any) -> dict[str, Any] | None:
    if type(params) is dict:
        meta = params.get("_meta")
        if type(meta) is dict:
            return meta
    return None


class Tracing:
    """Instruments connections: their requests, their agent's ``prompt`` and their outgoing requests."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.tracer: Tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        # Each attached connection's open turn spans (request, turn), for the drain event; by connection.
        self._open: dict[Connection, tuple[dict[str | int, Span], dict[str | int, Span]]] = {}

    def attach(self, server: AgentServer, transport: str) -> None:
        """Instrument one connection (before it reads): wraps what its ``request_type`` already is (metrics)."""
        conn = server.conn
        spans: dict[str | int, Span] = {}  # request spans of this connection's running turns, by request id
        turns: dict[str | int, Span] = {}  # their turn spans
        self._open[conn] = (spans, turns)
        conn.request_type = _traced_type(conn.request_type, self.tracer, transport, spans, turns)
        agent = server.agent
        agent.prompt = _traced_prompt(agent.prompt, self.tracer, spans, turns)  # type: ignore[method-assign, assignment]
        conn.send_request = _propagating(conn.send_request)  # type: ignore[method-assign]

    def detach(self, server: AgentServer) -> None:
        """The connection ended."""
        self._open.pop(server.conn, None)

    def drain(self) -> None:
        """The host begins to drain (SIGTERM): a ``drain`` event on every running turn's spans."""
        for spans, turns in self._open.values():
            for span in (*spans.values(), *turns.values()):
                span.add_event("drain")


def _traced_type(
    base: type[IncomingRequest],
    tracer: Tracer,
    transport: str,
    spans: dict[str | int, Span],
    turns: dict[str | int, Span],
) -> type[IncomingRequest]:
    """A subclass of ``base`` whose instances hold a server span from arrival to answer."""
    network = _NETWORK.get(transport, "tcp")

    def __init__(self: Any, conn: Connection, id: str | int, method: str, params: Any) -> None:
        base.__init__(self, conn, id, method, params)
        meta = _meta_of(params)
        parent = propagate.extract(meta) if meta else None
        attributes: dict[str, Any] = {
            "acp.method.name": method,
            "jsonrpc.request.id": str(id),
            "network.transport": network,
            "acp.transport": transport,
        }
        if type(params) is dict and type(params.get("sessionId")) is str:
            attributes["gen_ai.conversation.id"] = params["sessionId"]
        self.span = span = tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        if method in _TURN_METHODS:
            spans[id] = span

    def cancel_received(self: Any) -> None:
        base.cancel_received(self)
        self.span.add_event("cancel")
        turn = turns.get(self.id)
        if turn is not None:
            turn.add_event("cancel")

    def respond(self: Any, result: Any) -> None:
        was = self.answered
        base.respond(self, result)
        if not was and self.span.is_recording() and type(result) is dict and "stopReason" in result:
            self.span.set_attribute("gen_ai.response.finish_reasons", [str(result["stopReason"])])
        if not was:
            _end(self)

    def respond_error(self: Any, exc: BaseException) -> None:
        was = self.answered
        base.respond_error(self, exc)
        if not was and self.span.is_recording():
            error = from_exception(exc)
            self.span.set_attribute("error.type", str(error.code))
            self.span.set_attribute("rpc.response.status_code", str(error.code))
            self.span.set_status(trace.StatusCode.ERROR, error.message)
        if not was:
            _end(self)

    def _end(self: Any) -> None:
        if spans.get(self.id) is self.span:
            del spans[self.id]
        self.span.end()

    return type(
        "Traced" + base.__name__,
        (base,),
        {
            "__slots__": ("span",),
            "__init__": __init__,
            "cancel_received": cancel_received,
            "respond": respond,
            "respond_error": respond_error,
        },
    )


def _traced_prompt(
    prompt: Callable[..., Awaitable[Any]],
    tracer: Tracer,
    spans: dict[str | int, Span],
    turns: dict[str | int, Span],
) -> Callable[..., Awaitable[Any]]:
    """The agent's ``prompt`` inside an ``invoke_agent`` span that is current while it runs."""

    async def traced(**kwargs: Any) -> Any:
        try:
            turn: Turn | None = current_turn()
        except RuntimeError:  # an agent calling its own prompt outside a turn
            turn = None
        rid = turn.request_id if turn is not None else None
        parent = spans.get(rid) if rid is not None else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
        if turn is not None:
            attributes["gen_ai.conversation.id"] = turn.session.id
        with tracer.start_as_current_span(
            "invoke_agent",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            if rid is not None:
                turns[rid] = span
            try:
                result = await prompt(**kwargs)
            except asyncio.CancelledError:
                span.set_attribute("gen_ai.response.finish_reasons", ["cancelled"])
                raise
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(trace.StatusCode.ERROR, str(exc))
                raise
            finally:
                if rid is not None:
                    turns.pop(rid, None)
            if turn is not None and turn.token.cancelled:
                reason = "cancelled"
            elif isinstance(result, dict):
                reason = str(result.get("stopReason", "end_turn"))
            else:
                reason = str(result) if isinstance(result, str) else "end_turn"
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
            return result

    return traced


def _propagating(send_request: Callable[[str, Any], PendingRequest]) -> Callable[..., PendingRequest]:
    """``Connection.send_request`` that puts the current trace context in ``params._meta``."""

    def send(method: str, params: Any = None) -> PendingRequest:
        if trace.get_current_span().get_span_context().is_valid:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier and (params is None or type(params) is dict):
                params = dict(params or {})
                meta = params.get("_meta")
                params["_meta"] = {**meta, **carrier} if type(meta) is dict else carrier
        return send_request(method, params)

    return send


__all__ = ["SCOPE", "Tracing"]
