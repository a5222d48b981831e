"""Prometheus metrics (acp_fast/observability/metrics.py): the exposition after a real session over loopback.

Each test drives a host on 127.0.0.1 with a WebSocket client, scrapes
``GET /metrics`` over a real socket and parses the text with
``prometheus_client``'s own parser: names, labels, values, and the bound on
label values (no session or connection id ever becomes a label).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from acp_fast.hosting import AcpHost, bearer_token
from tests.host_helpers import wait_counts_zero, with_host
from tests.ws_helpers import WsClient

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def http_get(port: int, path: str = "/metrics", headers: str = "") -> tuple[int, bytes]:
    """One HTTP/1.1 GET over loopback; returns (status, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n".encode())
    data = await reader.read()  # the server closes after the answer
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def samples(text: bytes) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def _session(host: AcpHost) -> tuple[WsClient, str]:
    c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
    await c.initialize()
    return c, await c.new_session()


def test_exposition_after_a_session(run: Any) -> None:
    """Requests by method/lane/outcome, prompts by stop reason, the cancel latency, refusals, bad input, closes."""
    found: dict[str, Samples] = {}

    async def body(host: AcpHost) -> None:
        c, sid = await _session(host)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 2 0"}]}
        short = await c.request("session/prompt", prompt)
        assert short["result"] == {"stopReason": "end_turn"}
        long_id = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]}
        )
        await c.wait_for(lambda: c.updates(sid))  # the turn is running
        busy = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
        assert busy["error"]["code"] == -32000
        await c.notify("session/cancel", {"sessionId": sid})
        assert (await c.response(long_id))["result"] == {"stopReason": "cancelled"}
        await c.send_raw("this is not json")
        await c.wait_for(lambda: any(m.get("error", {}).get("code") == -32700 for m in c.messages))
        unknown = await c.request(f"made/up/{sid}")  # a client-chosen name must not become a label
        assert unknown["error"]["code"] == -32601
        status, text = await http_get(host.port)
        assert status == 200
        found["live"] = samples(text)
        await c.close()
        await wait_counts_zero(host)
        found["after"] = samples((await http_get(host.port))[1])
        found["sid"] = {(sid, frozenset()): 0.0}

    run(with_host(body, metrics=True))
    live, after = found["live"], found["after"]
    (sid, _), = found["sid"]
    count = "acp_request_duration_seconds_count"
    assert value(live, count, method="initialize", lane="control", outcome="ok") == 1
    assert value(live, count, method="session/new", lane="control", outcome="ok") == 1
    assert value(live, count, method="session/prompt", lane="background", outcome="ok") == 2
    assert value(live, count, method="session/prompt", lane="background", outcome="-32000") == 1
    assert value(live, count, method="unknown", lane="none", outcome="-32601") == 1
    assert value(live, "acp_prompt_duration_seconds_count", stop_reason="end_turn") == 1
    assert value(live, "acp_prompt_duration_seconds_count", stop_reason="cancelled") == 1
    assert value(live, "acp_cancel_latency_seconds_count") == 1
    assert value(live, "acp_cancel_latency_seconds_bucket", le="+Inf") == 1
    assert value(live, "acp_requests_refused_total", reason="session_busy") == 1
    assert value(live, "acp_bad_input_total", code="-32700") == 1
    assert value(live, "acp_connections", transport="websocket") == 1
    assert value(live, "acp_sessions", state="attached") == 1
    assert value(live, "acp_running_prompts") == 0
    assert value(live, "acp_connections_accepted_total") == 1
    assert value(after, "acp_connections", transport="websocket") == 0
    assert value(after, "acp_websocket_closes_total", code="1000") == 1
    # Bounded cardinality: no label value carries the session id or anything the client named freely.
    labels = {v for (_name, pairs) in live for _k, v in pairs}
    assert not any(sid in v or "made/up" in v for v in labels), labels


def test_metrics_listen_serves_on_its_own_port_only(run: Any) -> None:
    """``metrics_listen``: GET /metrics on its own port; the hosting port then answers /metrics 404."""

    async def body(host: AcpHost) -> None:
        assert host.metrics_port and host.metrics_port != host.port
        status, text = await http_get(host.metrics_port)
        assert status == 200 and b"acp_connections" in text
        assert (await http_get(host.metrics_port, "/other"))[0] == 404
        assert (await http_get(host.port))[0] == 404

    run(with_host(body, metrics_listen="127.0.0.1:0"))


def test_metrics_on_the_hosting_port_pass_the_auth_hook(run: Any) -> None:
    """With an auth hook, GET /metrics on the hosting port needs the credential, as /acp does."""

    async def body(host: AcpHost) -> None:
        assert (await http_get(host.port))[0] == 401
        status, text = await http_get(host.port, headers="Authorization: Bearer s3cret\r\n")
        assert status == 200 and b"acp_request_duration_seconds" in text

    run(with_host(body, metrics=True, authorize=bearer_token("s3cret")))


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )


def test_metrics_off_import_nothing() -> None:
    """A host without metrics or --otel never imports prometheus_client, opentelemetry or observability/."""
    done = _python(
        """
        import sys
        from acp_fast.hosting import AcpHost
        from acp_fast.demo import DemoAgent
        import acp_fast.cli
        host = AcpHost(DemoAgent)
        assert host.metrics is None
        assert host.tracing is None
        bad = [m for m in sys.modules if m.startswith(("prometheus_client", "opentelemetry", "acp_fast.observability"))]
        assert not bad, bad
        """
    )
    assert done.returncode == 0, done.stderr


def test_missing_extra_is_one_line() -> None:
    """Metrics asked for without prometheus_client: the extras' one-line refusal, naming the extra."""
    done = _python(
        """
        import sys
        sys.modules["prometheus_client"] = None
        from acp_fast.cli import main
        main(["demo", "--listen", "127.0.0.1:0", "--metrics"])
        """
    )
    assert done.returncode == 2
    assert "needs the 'metrics' extra" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_metrics_listen_for_a_stdio_agent() -> None:
    """``acp-fast demo --metrics-listen 127.0.0.1:0`` over stdio: its requests show up on its own port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_fast", "demo", "--metrics-listen", "127.0.0.1:0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stderr.readline().decode()  # the banner names the bound port
        assert "metrics at http://127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.flush()
        assert b'"result"' in proc.stdout.readline()
        status, text = asyncio.run(asyncio.wait_for(http_get(port), 30))
        found = samples(text)
        assert status == 200
        initialize = {"method": "initialize", "lane": "control", "outcome": "ok"}
        assert value(found, "acp_request_duration_seconds_count", **initialize) == 1
        assert value(found, "acp_connections", transport="stdio") == 1
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()
        proc.stderr.close()


def test_bad_metrics_listen_is_one_line() -> None:
    """A --metrics-listen that is no HOST:PORT: one line, exit status non-zero, no traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "acp_fast", "demo", "--listen", "127.0.0.1:0", "--metrics-listen", "unix:/tmp/m.sock"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "--metrics-listen" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_turn_the_watchdog_answered_for_is_counted_orphaned(run: Any) -> None:
    """A turn that ignores its cancel: answered by the watchdog (R30) and shown as orphaned until it ends."""
    from acp_fast.wire.limits import Limits
    from tests.watchdog_agents import IgnoresCancel

    agents: list[IgnoresCancel] = []
    found: list[Samples] = []

    def factory() -> IgnoresCancel:
        agents.append(IgnoresCancel())
        return agents[-1]

    async def body(host: AcpHost) -> None:
        c, sid = await _session(host)
        rid = await c.request_nowait("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "once"}]})
        await agents[0].started.wait()
        await c.notify("session/cancel", {"sessionId": sid})
        assert (await c.response(rid))["result"] == {"stopReason": "cancelled"}
        found.append(samples((await http_get(host.port))[1]))
        agents[0].release.set()
        await agents[0].exited.wait()
        await c.close()
        await wait_counts_zero(host)
        found.append(samples((await http_get(host.port))[1]))

    run(with_host(body, factory, limits=Limits(cancel_grace_s=0.05), metrics=True))
    assert value(found[0], "acp_orphaned_turns") == 1
    assert value(found[0], "acp_cancel_latency_seconds_count") == 1
    assert value(found[1], "acp_orphaned_turns") == 0


def test_a_request_is_timed_from_its_read_so_a_wait_behind_another_counts(run: Any) -> None:
    """Durations start when the read that delivered a request was framed, not when it was taken up.

    B is read while A holds the ordered control lane, so B waits in the inbox until A is answered;
    its duration includes that wait. Bounds are read from the timings' own clock: the set_mode
    histogram's sum is at least (release - A's read) + (release - B's read), and at most the time
    from each read to both answers having arrived.
    """
    from acp_fast.demo import DemoAgent
    from acp_fast.observability.timing import now

    entered, release = asyncio.Event(), asyncio.Event()

    class HoldsMode(DemoAgent):
        async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
            if mode_id == "hold":
                entered.set()
                await release.wait()

    bounds: dict[str, float] = {}

    async def body(host: AcpHost) -> None:
        c, sid = await _session(host)
        assert host.metrics is not None
        (server,) = host.metrics.servers.values()
        stamp = server.conn.instrument
        assert stamp is not None
        a = await c.request_nowait("session/set_mode", {"sessionId": sid, "modeId": "hold"})
        await entered.wait()
        read_a = stamp.at
        b = await c.request_nowait("session/set_mode", {"sessionId": sid, "modeId": "code"})
        for _ in range(100_000):  # B's read is framed (and stamped) while A still holds the lane
            if stamp.at != read_a:
                break
            await asyncio.sleep(0)
        read_b = stamp.at
        assert read_b > read_a
        await asyncio.sleep(0.02)  # makes B's wait long enough that timing it from its dispatch would fail below
        released = now()
        release.set()
        assert "result" in await c.response(a) and "result" in await c.response(b)
        arrived = now()
        (h,) = [h for label, h in host.metrics.recorder.timings.histograms() if label == "session/set_mode"]
        bounds.update(total=h.total, count=sum(h.counts()), low=(released - read_a) + (released - read_b))
        bounds["high"] = (arrived - read_a) + (arrived - read_b)
        await c.close()

    run(with_host(body, HoldsMode, metrics=True))
    assert bounds["count"] == 2
    assert bounds["low"] <= bounds["total"] <= bounds["high"], bounds
