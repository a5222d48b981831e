"""OpenTelemetry traces (acp_fast/observability/tracing.py), recorded by the SDK's in-memory exporter.

A host with ``tracer_provider`` serves a WebSocket client over loopback. A
prompt carrying ``_meta.traceparent`` yields a server span whose parent is
that remote span, a turn span under it, the agent's own span under the turn
(the context is current inside ``prompt``), and an agent->client request whose
``_meta.traceparent`` names the agent's span. A cancelled turn carries the
cancel as an event and ``cancelled`` as its finish reason.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from tests.host_helpers import wait_counts_zero, with_host
from tests.ws_helpers import PROTOCOL_VERSION, WsClient

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
REMOTE_PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{REMOTE_PARENT}-01"


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _agent(provider: TracerProvider) -> type[DemoAgent]:
    class SpanningAgent(DemoAgent):
        """The demo, with a span of its own around each turn (as an LLM call would be)."""

        async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> Any:
            with trace.get_tracer("test.agent", tracer_provider=provider).start_as_current_span("llm.call"):
                return await super().prompt(session_id, prompt, **kwargs)

    return SpanningAgent


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _child(spans: tuple[ReadableSpan, ...], name: str, parent: ReadableSpan) -> ReadableSpan:
    (child,) = [s for s in _by_name(spans, name) if s.parent and s.parent.span_id == parent.context.span_id]
    return child


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def test_a_prompt_with_traceparent_nests_turn_agent_and_outgoing_request(run: Any) -> None:
    provider, exporter = _provider()
    agent_cls = _agent(provider)
    seen: dict[str, Any] = {}

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        c.auto_answer = lambda msg: {"content": "hello"} if msg["method"] == "fs/read_text_file" else None
        caps = {"fs": {"readTextFile": True}}
        init = await c.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": caps})
        assert "result" in init
        sid = await c.new_session()
        params = {
            "sessionId": sid,
            "prompt": [{"type": "text", "text": "read /tmp/notes.txt"}],
            "_meta": {"traceparent": TRACEPARENT},
        }
        done = await c.request("session/prompt", params)
        assert done["result"]["stopReason"] == "end_turn"
        seen["outgoing"] = next(m for m in c.messages if m.get("method") == "fs/read_text_file")
        before = len(c.updates(sid))
        long_id = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]}
        )
        await c.wait_for(lambda: len(c.updates(sid)) > before)  # the second turn is running
        await c.notify("session/cancel", {"sessionId": sid})
        assert (await c.response(long_id))["result"] == {"stopReason": "cancelled"}
        bad = await c.request("session/set_mode", {"sessionId": "no-such-session", "modeId": "code"})
        assert "error" in bad
        seen["sid"] = sid
        seen["bad_code"] = bad["error"]["code"]
        await c.close()
        await wait_counts_zero(host)

    run(with_host(body, agent_cls, tracer_provider=provider))
    spans = exporter.get_finished_spans()
    sid = seen["sid"]
    first, second = _by_name(spans, "session/prompt")
    # The server span: a child of the client's remote span, in its trace.
    assert first.kind is trace.SpanKind.SERVER
    assert _hex(first.context.trace_id, 32) == TRACE_ID
    assert first.parent is not None and _hex(first.parent.span_id, 16) == REMOTE_PARENT
    attrs = dict(first.attributes or {})
    assert attrs["acp.method.name"] == "session/prompt"
    assert attrs["gen_ai.conversation.id"] == sid
    assert attrs["network.transport"] == "tcp" and attrs["acp.transport"] == "websocket"
    assert attrs["jsonrpc.request.id"]
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("end_turn",)
    # The turn under the request, the agent's own span under the turn.
    turn_first = _child(spans, "invoke_agent", first)
    llm = _child(spans, "llm.call", turn_first)
    assert llm.context.trace_id == first.context.trace_id
    assert dict(turn_first.attributes or {})["gen_ai.conversation.id"] == sid
    # The agent->client request carries the agent span's context.
    outgoing = seen["outgoing"]["params"]["_meta"]["traceparent"]
    assert outgoing.split("-")[1] == TRACE_ID and outgoing.split("-")[2] == _hex(llm.context.span_id, 16)
    # The cancelled turn: a new trace (no traceparent), the cancel as an event, 'cancelled' as its finish reason.
    assert second.parent is None
    assert [e.name for e in second.events] == ["cancel"]
    turn_second = _child(spans, "invoke_agent", second)
    assert tuple(dict(turn_second.attributes or {})["gen_ai.response.finish_reasons"]) == ("cancelled",)
    assert [e.name for e in turn_second.events] == ["cancel"]
    # An error answer: error.type and an error status.
    (bad,) = _by_name(spans, "session/set_mode")
    assert dict(bad.attributes or {})["error.type"] == str(seen["bad_code"])
    assert bad.status.status_code is trace.StatusCode.ERROR


def test_metrics_and_traces_together(run: Any) -> None:
    """Both on: the traced request type wraps the timed one; a prompt is counted and traced."""
    pytest.importorskip("prometheus_client")
    provider, exporter = _provider()
    scraped: list[bytes] = []

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        text = [{"type": "text", "text": "stream 2 0"}]
        params = {"sessionId": sid, "prompt": text, "_meta": {"traceparent": TRACEPARENT}}
        assert (await c.request("session/prompt", params))["result"] == {"stopReason": "end_turn"}
        assert host.metrics is not None
        scraped.append(host.metrics.exposition()[0])
        await c.close()
        await wait_counts_zero(host)

    run(with_host(body, metrics=True, tracer_provider=provider))
    assert b'acp_prompt_duration_seconds_count{stop_reason="end_turn"} 1.0' in scraped[0]
    (span,) = _by_name(exporter.get_finished_spans(), "session/prompt")
    assert _hex(span.context.trace_id, 32) == TRACE_ID


def test_a_drain_is_an_event_on_the_running_turn(run: Any) -> None:
    provider, exporter = _provider()

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        rid = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]}
        )
        await c.wait_for(lambda: c.updates(sid))
        await host.drain()  # what SIGTERM does
        assert (await c.response(rid))["result"] == {"stopReason": "cancelled"}

    run(with_host(body, tracer_provider=provider))
    spans = exporter.get_finished_spans()
    (request,) = _by_name(spans, "session/prompt")
    turn = _child(spans, "invoke_agent", request)
    assert "drain" in [e.name for e in request.events]
    assert "drain" in [e.name for e in turn.events]
