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
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Tracer

from ..agent.base import Turn, current_turn
from ..agent.server import AgentServer
from ..peer.connection import Connection
from ..peer.instrument import Instrument, Prompt, Watched, attach
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
    """Watches connections: their requests, their prompt turns and their outgoing requests."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.tracer: Tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        # Each attached connection's instrument, for the drain event; by connection.
        self._open: dict[Connection, ConnectionTracer] = {}

    def attach(self, server: AgentServer, transport: str) -> None:
        """Watch one connection (before it reads), after whatever watches it already (metrics)."""
        conn = server.conn
        tracer = self._open[conn] = ConnectionTracer(self.tracer, transport)
        attach(conn, tracer)

    def detach(self, server: AgentServer) -> None:
        """The connection ended."""
        self._open.pop(server.conn, None)

    def drain(self) -> None:
        """The host begins to drain (SIGTERM): a ``drain`` event on every running turn's spans."""
        for tracer in self._open.values():
            for span in (*tracer.turn_requests.values(), *tracer.turns.values()):
                span.add_event("drain")


class ConnectionTracer(Instrument):
    """The tracing instrument of one connection: a server span from each request's arrival to its answer."""

    def __init__(self, tracer: Tracer, transport: str) -> None:
        super().__init__(sees_arrivals=True)
        self.tracer = tracer
        self.transport = transport
        self.network = _NETWORK.get(transport, "tcp")
        self.requests: dict[str | int, Span] = {}  # the open request spans, by request id
        self.turn_requests: dict[str | int, Span] = {}  # those of running turns (found again inside the turn)
        self.turns: dict[str | int, Span] = {}  # the turns' own spans, by request id

    def request_in(self, req: Watched) -> None:
        params = req.params
        meta = _meta_of(params)
        parent = propagate.extract(meta) if meta else None
        attributes: dict[str, Any] = {
            "acp.method.name": req.method,
            "jsonrpc.request.id": str(req.id),
            "network.transport": self.network,
            "acp.transport": self.transport,
        }
        if type(params) is dict and type(params.get("sessionId")) is str:
            attributes["gen_ai.conversation.id"] = params["sessionId"]
        span = self.tracer.start_span(req.method, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        self.requests[req.id] = span
        if req.method in _TURN_METHODS:
            self.turn_requests[req.id] = span

    def cancelled(self, req: Watched) -> None:
        span = self.requests.get(req.id)
        if span is not None:
            span.add_event("cancel")
        turn = self.turns.get(req.id)
        if turn is not None:
            turn.add_event("cancel")

    def answered(self, req: Watched, result: Any) -> None:
        span = self._end(req)
        if span is None:
            return
        if span.is_recording() and type(result) is dict and "stopReason" in result:
            span.set_attribute("gen_ai.response.finish_reasons", [str(result["stopReason"])])
        span.end()

    def failed(self, req: Watched, exc: BaseException) -> None:
        span = self._end(req)
        if span is None:
            return
        if span.is_recording():
            error = from_exception(exc)
            span.set_attribute("error.type", str(error.code))
            span.set_attribute("rpc.response.status_code", str(error.code))
            span.set_status(trace.StatusCode.ERROR, error.message)
        span.end()

    def _end(self, req: Watched) -> Span | None:
        span = self.requests.pop(req.id, None)
        if span is not None and self.turn_requests.get(req.id) is span:
            del self.turn_requests[req.id]
        return span

    def turn(self, prompt: Prompt) -> Prompt:
        return _traced_prompt(prompt, self.tracer, self.turn_requests, self.turns)

    def outgoing(self, method: str, params: Any) -> Any:
        """The current trace context goes in ``params._meta`` of what the agent sends the client."""
        if trace.get_current_span().get_span_context().is_valid:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier and (params is None or type(params) is dict):
                params = dict(params or {})
                meta = params.get("_meta")
                params["_meta"] = {**meta, **carrier} if type(meta) is dict else carrier
        return params


def _traced_prompt(
    prompt: Prompt, tracer: Tracer, spans: dict[str | int, Span], turns: dict[str | int, Span]
) -> Prompt:
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


__all__ = ["SCOPE", "ConnectionTracer", "Tracing"]
