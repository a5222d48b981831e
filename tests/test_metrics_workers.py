"""``--workers 2 --metrics``: whichever worker a scrape reaches answers for the whole group."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from acp_fast.observability.group import merge
from tests.store_helpers import free_port
from tests.ws_helpers import WsClient

CONNECTIONS = 6
SCRAPES = 6


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_one_scrape_sees_every_worker(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "host.log").open("wb")
    args = [sys.executable, "-m", "acp_fast", "demo", "--listen", f"127.0.0.1:{port}", "--workers", "2", "--metrics"]
    host = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:

        async def scenario() -> list[dict[Any, float]]:
            for _ in range(400):  # both workers listening: each prints its banner
                if (tmp_path / "host.log").read_text().count("serving ACP") == 2:
                    break
                await asyncio.sleep(0.05)
            clients = [await WsClient.open(f"ws://127.0.0.1:{port}/acp") for _ in range(CONNECTIONS)]
            for c in clients:
                await c.initialize()
            scrapes = [await asyncio.to_thread(_scrape, port) for _ in range(SCRAPES)]
            for c in clients:
                await c.close()
            return scrapes

        scrapes = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        host.terminate()
        assert host.wait(timeout=30) == 0
        log.close()
    workers: set[str] = set()
    for found in scrapes:
        assert found[("acp_connections_accepted_total", ())] == CONNECTIONS
        assert found[("acp_connections", (("transport", "websocket"),))] == CONNECTIONS
        initialize = (("lane", "control"), ("method", "initialize"), ("outcome", "ok"))
        assert found[("acp_request_duration_seconds_count", initialize)] == CONNECTIONS
        cpu = {dict(labels)["worker"] for (name, labels) in found if name == "process_cpu_seconds_total"}
        assert len(cpu) == 2, cpu
        workers |= cpu
    assert len(workers) == 2


def test_merge_sums_counters_and_buckets_and_keeps_process_series_per_worker() -> None:
    a = (
        b"# HELP acp_bad_input_total x\n# TYPE acp_bad_input_total counter\n"
        b'acp_bad_input_total{code="-32700"} 2.0\n'
        b"# HELP acp_cancel_latency_seconds y\n# TYPE acp_cancel_latency_seconds histogram\n"
        b'acp_cancel_latency_seconds_bucket{le="0.1"} 1.0\nacp_cancel_latency_seconds_bucket{le="+Inf"} 2.0\n'
        b"acp_cancel_latency_seconds_count 2.0\nacp_cancel_latency_seconds_sum 0.5\n"
        b"# HELP acp_event_loop_lag_last_seconds z\n# TYPE acp_event_loop_lag_last_seconds gauge\n"
        b"acp_event_loop_lag_last_seconds 0.25\n"
        b"# HELP process_cpu_seconds_total c\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n"
    )
    b = a.replace(b"} 2.0\n", b"} 3.0\n").replace(b"lag_last_seconds 0.25", b"lag_last_seconds 0.5")
    merged = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(merge([("1", a), ("2", b)]).decode())
        for s in f.samples
    }
    assert merged[("acp_bad_input_total", (("code", "-32700"),))] == 5.0
    assert merged[("acp_cancel_latency_seconds_bucket", (("le", "0.1"),))] == 2.0
    assert merged[("acp_cancel_latency_seconds_bucket", (("le", "+Inf"),))] == 5.0
    assert merged[("acp_cancel_latency_seconds_sum", ())] == 1.0
    assert merged[("acp_event_loop_lag_last_seconds", ())] == 0.5
    assert merged[("process_cpu_seconds_total", (("worker", "1"),))] == 1.0
    assert merged[("process_cpu_seconds_total", (("worker", "2"),))] == 1.0
