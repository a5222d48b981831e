"""``acp-fast bench --hosting``: the WebSocket scenario runs end to end, and is skipped with one line without picows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_fast.extras import install_hint
from acp_fast.tools.bench import driver, hosting


@pytest.mark.slow
def test_hosting_scenario_measures_acp_fast_and_the_echo_floor(tmp_path: Path) -> None:
    pytest.importorskip("picows")
    out = tmp_path / "bench.json"
    argv = ["--targets", "", "--hosting", "--ws-connections", "20", "--cancels", "3", "--updates-one", "400"]
    argv += ["--json", str(out), "--no-plot"]
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "bench", *argv], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert results["ws_setup_per_s"]["acp_fast"]["n"] == 20
    assert results["ws_setup_per_s"]["acp_fast"]["per_s"] > 0
    assert results["ws_idle_rss"]["acp_fast"]["n"] == 20
    for target in ("acp_fast", "floor"):
        value = results["ws_cancel"][target]
        assert value["correct"] is True and value["p50_us"] > 0, (target, value)
    for scenario in ("ws_cancel_vs_agent",):
        for target in ("acp_fast", "floor"):
            value = results[scenario][target]
            assert value["correct"] is True and value["p50_us"] > 0, (scenario, target, value)
    for scenario in ("ws_updates_1", "ws_updates_100", "ws_push_1", "ws_push_100"):
        for target in ("acp_fast", "floor"):
            assert results[scenario][target]["per_s"] > 0, (scenario, target)
    assert results["ws_updates_1"]["acp_fast"] == results["ws_push_1"]["acp_fast"]  # one measurement, two floors
    assert "| WS cancel p50 (us; floor: echo) |" in proc.stdout
    assert "| WS updates/s, 1 connection (floor: agent) |" in proc.stdout
    assert "| WS updates/s, 100 connections (floor: pre-encoded push) |" in proc.stdout
    assert "WS updates/s (100 connections) >= 0.7x WS floor agent" in proc.stdout
    assert "| cancel idle p50 (us) |" not in proc.stdout  # no stdio target ran, so no stdio rows
    assert "WS cancel p50 <= 2x WS echo floor p50" in proc.stdout


def test_hosting_without_the_server_extra_is_one_unsupported_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = f"needs the server extra ({install_hint('server')}): picows is not installed"
    monkeypatch.setattr(hosting, "missing_extra", lambda: reason)
    out = tmp_path / "bench.json"
    assert driver.main(["--targets", "", "--hosting", "--json", str(out), "--no-plot"]) == 0
    results = json.loads(out.read_text())["results"]
    for scenario in hosting.SCENARIOS:
        assert results[scenario]["acp_fast"] == {"unsupported": reason}
    captured = capsys.readouterr()
    assert f"hosting: skipped ({reason})" in captured.err
