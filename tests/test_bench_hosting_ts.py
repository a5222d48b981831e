"""The hosting bench's TypeScript SDK target (``ts-sdk``): it measures, and without node it is one unsupported line.

The smoke test starts tests/interop/ts_bench_agent.mjs (the official SDK's
``AcpServer`` on Node with ``ws``) and runs a small hosting measurement
against it, so the path ``hosting_idle.py --ts`` and ``acp-fast bench
--hosting`` take cannot rot. Skipped without node; without the interop
node_modules skipped locally and failed under CI, where .ci/run installs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from acp_fast.tools.bench import driver, hosting, hosting_ts


def _need_ts_agent() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    why = hosting_ts.missing()
    if why is not None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(f"the TypeScript hosting target cannot run under CI: {why}")
        pytest.skip(why)


def test_the_ts_agent_script_is_found_in_the_checkout() -> None:
    """The bench finds the agent script from its own module, wherever that module sits in the package."""
    assert Path(__file__).resolve().parent / "interop" / "ts_bench_agent.mjs" == hosting_ts.AGENT


@pytest.mark.slow
def test_ts_sdk_target_measures_setup_rss_and_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("picows")
    _need_ts_agent()
    monkeypatch.setattr(hosting_ts, "MEASURE_TIMEOUT_S", 60.0)  # a hang guard only; the run takes a few seconds
    rows = asyncio.run(hosting_ts.run_ts_hosting(connections=6, cancels=3))
    assert set(rows) == set(hosting_ts.SCENARIOS)
    setup = rows["ws_setup_per_s"][hosting_ts.TARGET]
    assert setup["n"] == 6 and setup["per_s"] > 0, setup
    rss = rows["ws_idle_rss"][hosting_ts.TARGET]
    assert rss["n"] == 6 and isinstance(rss["kib_per_conn"], float), rss  # RSS growth of 6 connections may read 0
    cancel = rows["ws_cancel"][hosting_ts.TARGET]
    assert cancel["correct"] is True, cancel  # every prompt was answered stopReason "cancelled"
    assert 0 < cancel["p50_us"] <= cancel["p99_us"], cancel


def test_ts_sdk_target_without_node_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosting_ts.shutil, "which", lambda _name: None)
    rows = asyncio.run(hosting_ts.run_ts_hosting(connections=6, cancels=3))
    why = "node/ts sdk not found: node is not on PATH"
    assert rows == {scenario: {hosting_ts.TARGET: {"unsupported": why}} for scenario in hosting_ts.SCENARIOS}


def test_ts_sdk_target_without_node_modules_names_the_missing_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosting_ts.shutil, "which", lambda _name: "/usr/bin/node")
    agent = tmp_path / "ts_bench_agent.mjs"
    agent.write_text("")
    monkeypatch.setattr(hosting_ts, "AGENT", agent)
    why = hosting_ts.missing()
    assert why is not None and why.startswith("node/ts sdk not found: ")
    assert str(tmp_path / "node_modules" / "@agentclientprotocol" / "sdk") in why


def test_bench_hosting_shows_an_unsupported_ts_sdk_column_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def measured(connections: int, cancels: int, updates: int = 0) -> dict[str, dict[str, Any]]:
        return {
            "ws_setup_per_s": {"acp_fast": {"per_s": 100.0, "n": connections, "correct": True}},
            "ws_idle_rss": {"acp_fast": {"kib_per_conn": 20.0, "n": connections, "correct": True}},
            "ws_cancel": {
                "acp_fast": {"p50_us": 50.0, "p99_us": 90.0, "correct": True},
                "floor": {"p50_us": 20.0, "p99_us": 30.0, "correct": True},
            },
        }

    monkeypatch.setattr(hosting, "missing_extra", lambda: None)
    monkeypatch.setattr(hosting, "run_hosting", measured)
    monkeypatch.setattr(hosting_ts.shutil, "which", lambda _name: None)
    out = tmp_path / "bench.json"
    assert driver.main(["--targets", "", "--hosting", "--json", str(out), "--no-plot"]) == 0
    why = "node/ts sdk not found: node is not on PATH"
    results = json.loads(out.read_text())["results"]
    for scenario in hosting_ts.SCENARIOS:
        assert results[scenario]["ts-sdk"] == {"unsupported": why}
        assert results[scenario]["acp_fast"]["correct"] is True
    captured = capsys.readouterr()
    assert f"hosting: ts-sdk unsupported: {why}" in captured.err
    assert "| metric | acp_fast | floor | ts-sdk |" in captured.out
    assert f"ts-sdk: unsupported ws_setup_per_s, ws_idle_rss, ws_cancel ({why})" in captured.out


def _fake_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    """Points the target at a node script of ours, as if node_modules were there."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    agent = tmp_path / "agent.mjs"
    agent.write_text(source)
    monkeypatch.setattr(hosting_ts, "AGENT", agent)
    monkeypatch.setattr(hosting_ts, "missing", lambda: None)


def test_ts_sdk_agent_that_exits_at_start_gives_failed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_agent(tmp_path, monkeypatch, "process.exit(3);\n")
    rows = asyncio.run(hosting_ts.run_ts_hosting(connections=2, cancels=1))
    for scenario in hosting_ts.SCENARIOS:
        value = rows[scenario][hosting_ts.TARGET]
        assert value["correct"] is False and "exited with 3" in value["error"], value


def test_ts_sdk_agent_that_never_answers_is_cut_off_by_the_hang_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("picows")
    # Completes the WebSocket upgrade, then never answers `initialize`: only the guard ends the measurement.
    silent = """
import { createHash } from "node:crypto";
import { createServer } from "node:http";
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
const server = createServer((_req, res) => res.end());
server.on("upgrade", (req, socket) => {
  const accept = createHash("sha1")
    .update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
    .digest("base64");
  const head = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade"];
  socket.write([...head, `Sec-WebSocket-Accept: ${accept}`, "", ""].join("\\r\\n"));
  socket.resume();
});
server.listen(port, "127.0.0.1");
"""
    _fake_agent(tmp_path, monkeypatch, silent)
    monkeypatch.setattr(hosting_ts, "MEASURE_TIMEOUT_S", 1.0)
    rows = asyncio.run(hosting_ts.run_ts_hosting(connections=2, cancels=1))
    for scenario in hosting_ts.SCENARIOS:
        value = rows[scenario][hosting_ts.TARGET]
        assert value["correct"] is False and value["error"].startswith("TimeoutError"), value
