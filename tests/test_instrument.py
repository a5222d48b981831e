"""The peer layer's one instrumentation seam (acp_fast/peer/instrument.py), and what it replaced.

A recording ``Instrument`` on a served connection sees each event where it
happens: a request in, its result or error out, a cancel, a bad line, a prompt
turn around the agent's ``prompt``, an outgoing request's params. Refusals are
counted by ``ServerBusy.reason``, whatever the message says. Tracing watches
a connection without replacing anything on the live agent or connection. The
compiled-or-pure switch answers None for every extension when they are off.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from acp_fast.peer.instrument import Instrument, Prompt, Watched, attach
from acp_fast.wire.errors import ServerBusy, from_exception
from tests.helpers import Harness, close_and_check, prompt_params
from tests.host_helpers import with_host
from tests.test_metrics import http_get, samples, value
from tests.ws_helpers import WsClient


class Recording(Instrument):
    """Writes down every hook call, in order."""

    def __init__(self) -> None:
        super().__init__(sees_arrivals=True)
        self.events: list[tuple[Any, ...]] = []

    def request_in(self, req: Watched) -> None:
        assert req.arrived == self.at  # stamped from the read that delivered it
        self.events.append(("in", req.method))

    def answered(self, req: Watched, result: Any) -> None:
        self.events.append(("answered", req.method))

    def failed(self, req: Watched, exc: BaseException) -> None:
        self.events.append(("failed", req.method, from_exception(exc).code))

    def cancelled(self, req: Watched) -> None:
        assert req.cancelled_at > 0
        self.events.append(("cancelled", req.method))

    def bad_line(self, code: int) -> None:
        self.events.append(("bad line", code))

    def turn(self, prompt: Prompt) -> Prompt:
        async def around(**kwargs: Any) -> Any:
            self.events.append(("turn starts", kwargs["session_id"] is not None))
            try:
                return await prompt(**kwargs)
            finally:
                self.events.append(("turn ends",))

        return around

    def outgoing(self, method: str, params: Any) -> Any:
        self.events.append(("out", method))
        return {**params, "_meta": {"seen": True}}


def test_an_instrument_sees_each_event_where_it_happens(run: Any) -> None:
    recording = Recording()

    async def body() -> None:
        h = Harness(DemoAgent(pace_ms=0))
        attach(h.conn, recording)  # before the connection reads anything
        await h.initialize()
        sid = await h.new_session()
        assert "result" in await h.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
        assert (await h.call("no/such_method", {}))["error"]["code"] == -32601
        h.send_raw(b"not json\n")
        await h.wait_for(lambda: any(m.get("error", {}).get("code") == -32700 for m in h.messages))
        assert (await h.call("session/prompt", prompt_params(sid, "stream 2 0")))["result"]["stopReason"] == "end_turn"
        streamed = len(h.updates(sid))
        long_id = h.request("session/prompt", prompt_params(sid, "stream 100000 1"))
        await h.wait_for(lambda: len(h.updates(sid)) > streamed)  # the turn's body is running
        h.notify("session/cancel", {"sessionId": sid})
        assert (await h.response(long_id))["result"] == {"stopReason": "cancelled"}
        pending = h.conn.send_request("x/ask", {"q": 1})
        (sent,) = await h.wait_for(lambda: h.outgoing_requests("x/ask"))
        assert sent["params"] == {"q": 1, "_meta": {"seen": True}}  # the instrument's params went out
        h.send({"jsonrpc": "2.0", "id": sent["id"], "result": {}})
        assert await pending == {}
        await close_and_check(h)

    run(body())
    assert recording.events == [
        ("in", "initialize"), ("answered", "initialize"),
        ("in", "session/new"), ("answered", "session/new"),
        ("in", "session/set_mode"), ("answered", "session/set_mode"),
        ("in", "no/such_method"), ("failed", "no/such_method", -32601),
        ("bad line", -32700),
        ("in", "session/prompt"), ("turn starts", True), ("turn ends",), ("answered", "session/prompt"),
        ("in", "session/prompt"), ("turn starts", True), ("cancelled", "session/prompt"), ("turn ends",),
        ("answered", "session/prompt"),
        ("out", "x/ask"),
    ]  # fmt: skip


class RateLimited(DemoAgent):
    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        if mode_id == "busy":
            raise ServerBusy("the model provider asks us to slow down", reason="process_prompts")
        await super().set_session_mode(session_id, mode_id, **kwargs)


def test_a_refusal_is_counted_by_its_typed_reason_not_its_wording(run: Any) -> None:
    found: dict[str, Any] = {}

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        refused = await c.request("session/set_mode", {"sessionId": sid, "modeId": "busy"})
        assert refused["error"]["code"] == -32000
        found.update(samples((await http_get(host.port))[1]))
        await c.close()

    run(with_host(body, RateLimited, metrics=True))
    assert value(found, "acp_requests_refused_total", reason="process_prompts") == 1
    assert value(found, "acp_requests_refused_total", reason="other") == 0


def test_tracing_replaces_nothing_on_the_live_agent_or_connection(run: Any) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    patched: list[str] = []

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        assert host.metrics is not None
        (server,) = host.metrics.servers.values()
        patched.extend(name for name in ("prompt",) if name in vars(server.agent))
        patched.extend(name for name in ("send_request", "send_notification") if name in vars(server.conn))
        result = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert result["result"]["stopReason"] == "end_turn"
        await c.close()

    run(with_host(body, metrics=True, tracer_provider=provider))
    assert patched == []
    names = [s.name for s in exporter.get_finished_spans()]
    assert "invoke_agent" in names and "session/prompt" in names  # the turn is still traced


def test_the_extensions_switch_answers_none_for_every_module_when_off() -> None:
    code = (
        "from acp_fast.wire import extensions as e\n"
        "assert e.DISABLED and e.load('acp_fast.wire._framing') is None and e.MISSING == {}\n"
        "import acp_fast.wire.framing as f, acp_fast.wire.jsonrpc as j, acp_fast.agent.methods as m\n"
        "import acp_fast.observability.timing as t\n"
        "print(f.IMPLEMENTATION, j.DECODE_IMPLEMENTATION, m.WALK_IMPLEMENTATION, t.IMPLEMENTATION, f.FALLBACK_REASON)\n"
    )
    env = {"ACP_FAST_NO_EXTENSIONS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["python", "python", "python", "python", "None"]


def test_a_missing_extension_is_answered_none_with_its_reason() -> None:
    from acp_fast.wire import extensions

    if extensions.DISABLED:
        pytest.skip("ACP_FAST_NO_EXTENSIONS=1: load answers None before trying")
    assert extensions.load("acp_fast.wire._no_such_extension") is None
    assert "_no_such_extension" in extensions.MISSING["acp_fast.wire._no_such_extension"]
    assert extensions.implementation(None) == "python"
    assert extensions.implementation(asyncio) == "c"
