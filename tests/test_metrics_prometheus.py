"""A real Prometheus (Debian's ``prometheus`` package) scrapes ``acp-fast demo --listen ... --metrics``.

The test writes a scrape config (every second, loopback), starts Prometheus
with a temporary storage directory on a free loopback port, runs a scripted
session against the demo (initialize, a new session, a prompt, a long prompt
cancelled), and reads Prometheus' HTTP API until the request counter and the
cancel-latency histogram it stored have moved. The waits are bounded (they
turn a hang into a failure; nothing is timed). Under ``CI=true`` a missing
``prometheus`` binary fails the test: ``.ci/run`` installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from tests.store_helpers import free_port, need_tool
from tests.ws_helpers import WsClient

#: How long Prometheus gets to start and to scrape what the session did (a hang guard, not a measurement).
WAIT_S = 60.0


@contextlib.contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bytes(resp.read())
    except OSError:
        return None


def _wait_until(what: str, check: object, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.25)
    raise AssertionError(f"{what} never happened; log:\n{log.read_text(errors='replace')[-3000:]}")


def _query(port: int, expr: str) -> float:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = _get(url)
    if body is None:
        return -1.0
    result = json.loads(body)["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


async def _scripted_session(port: int) -> None:
    c = await WsClient.open(f"ws://127.0.0.1:{port}/acp")
    await c.initialize()
    sid = await c.new_session()
    done = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 3 0"}]})
    assert done["result"] == {"stopReason": "end_turn"}
    long_id = await c.request_nowait(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]}
    )
    await c.wait_for(lambda: c.updates(sid))
    await c.notify("session/cancel", {"sessionId": sid})
    assert (await c.response(long_id))["result"] == {"stopReason": "cancelled"}
    await c.close()


def test_a_real_prometheus_scrapes_the_demo(tmp_path: Path) -> None:
    prometheus = need_tool("prometheus", "apt-get install prometheus")
    acp_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: acp\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{acp_port}']\n"
    )
    demo = [sys.executable, "-m", "acp_fast", "demo", "--listen", f"127.0.0.1:{acp_port}", "--metrics"]
    prom = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    with _process(demo, tmp_path / "demo.log") as demo_proc, _process(prom, tmp_path / "prom.log") as prom_proc:
        _wait_until(
            "the demo answering /metrics",
            lambda: _get(f"http://127.0.0.1:{acp_port}/metrics") is not None,
            demo_proc,
            tmp_path / "demo.log",
        )
        _wait_until(
            "a first scrape stored in Prometheus",
            lambda: _query(prom_port, 'up{job="acp"}') == 1.0,
            prom_proc,
            tmp_path / "prom.log",
        )
        requests = 'sum(acp_request_duration_seconds_count{job="acp"})'
        cancels = 'sum(acp_cancel_latency_seconds_count{job="acp"})'
        assert _query(prom_port, requests) == 0.0
        assert _query(prom_port, cancels) == 0.0
        asyncio.run(asyncio.wait_for(_scripted_session(acp_port), WAIT_S))
        _wait_until(
            "the request counter and the cancel latency moving in Prometheus",
            lambda: _query(prom_port, requests) >= 4 and _query(prom_port, cancels) >= 1,
            prom_proc,
            tmp_path / "prom.log",
        )
        by_method = 'acp_request_duration_seconds_count{job="acp",method="session/prompt",outcome="ok"}'
        assert _query(prom_port, by_method) == 2.0
        stopped = 'acp_prompt_duration_seconds_count{job="acp",stop_reason="cancelled"}'
        assert _query(prom_port, stopped) == 1.0
