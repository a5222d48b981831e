"""Smoke run of ``acp-fast bench`` with tiny counts: every scenario runs and every answer is right.

It runs the floor and the SDK peer agent from where the package ships them
(acp_fast/tools/bench/), as an installed wheel would. It checks that the driver,
the SDK demo agent and the floor still speak the protocol (each cancel
answered "cancelled", each set_mode answered, every streamed update
counted), never how fast they are: timings are not asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_fast.tools.bench.stats import PERCENTILE_DEFINITION
from acp_fast.tools.bench.targets import AGENTS_DIR, FLOOR_SCRIPT, NO_HOOK_SCENARIO, SDK_SCRIPT

SCENARIOS = [
    "handshake",
    "cancel_idle",
    "control_idle",
    "requests_per_s",
    "sessions_per_s",
    "updates_per_s_1",
    "updates_per_s_32",
    "cancel_busy",
    "control_busy",
    "memory",
]
TINY = ["--cancels", "3", "--controls", "3", "--pipelined", "300", "--updates-one", "40",
        "--updates-each", "3", "--sessions", "5", "--new-sessions", "50", "--handshakes", "1",
        "--bursts", "2"]  # fmt: skip


@pytest.mark.slow
def test_bench_runs_every_scenario_on_every_target_with_correct_answers(tmp_path: Path) -> None:
    assert FLOOR_SCRIPT.exists() and SDK_SCRIPT.exists()
    assert AGENTS_DIR.parts[-3:] == ("acp_fast", "tools", "bench")
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "bench", *TINY, "--json", str(out), "--no-plot"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    results = report["results"]
    for scenario in SCENARIOS:
        targets = set(results[scenario])
        assert {"acp_fast", "sdk", "floor"} <= targets, (scenario, targets)
        for target, value in results[scenario].items():
            assert value["correct"] is True, (scenario, target, value)
    for target in ("acp_fast", "sdk", "floor"):
        assert results["cancel_idle"][target]["n"] == 3
        assert results["requests_per_s"][target]["count"] == 300
        assert results["sessions_per_s"][target]["count"] == 50
        for scenario in ("requests_per_s", "sessions_per_s"):
            assert results[scenario][target]["bursts"] == 2 and len(results[scenario][target]["per_s_bursts"]) == 2
            assert results[scenario][target]["cpu_us"] > 0  # Linux: the agent's CPU time from /proc
            assert results[scenario][target]["driver_cpu_us"] > 0  # the bench's own, beside it
    # The framework-only session/new row: the demo without its start hook, the floor's row beside it.
    no_hook = results[NO_HOOK_SCENARIO]
    assert set(no_hook) == {"acp_fast", "floor"} and no_hook["acp_fast"]["correct"] is True
    assert no_hook["floor"]["per_s"] == results["sessions_per_s"]["floor"]["per_s"]
    assert "pipelined session/new, no start hook (req/s)" in proc.stdout
    assert "bare" in results["handshake"]
    assert {g["text"] for g in report["goals"]} >= {"every answer was correct"}
    assert "| metric | acp_fast | sdk | floor |" in proc.stdout
    assert PERCENTILE_DEFINITION in proc.stdout and report["meta"]["percentiles"] == PERCENTILE_DEFINITION
    assert "unsupported" not in proc.stdout
