"""deploy/prometheus-alerts.yml and deploy/grafana-dashboard.json: valid, and naming only metrics the host exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from acp_fast.hosting import AcpHost
from tests.host_helpers import with_host
from tests.store_helpers import need_tool

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
RULES = DEPLOY / "prometheus-alerts.yml"
DASHBOARD = DEPLOY / "grafana-dashboard.json"


def test_promtool_accepts_the_alert_rules() -> None:
    promtool = need_tool("promtool", "Debian's prometheus package")
    done = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def _families(run: Any) -> set[str]:
    found: list[bytes] = []

    async def body(host: AcpHost) -> None:
        assert host.metrics is not None
        found.append(host.metrics.exposition()[0])

    run(with_host(body, metrics=True))
    return _named(" ".join(re.findall(r"^# TYPE (\w+) ", found[0].decode(), re.M)))


def _named(text: str) -> set[str]:
    """Metric families named in ``text`` (the project's own name, acp_fast, is not one)."""
    return {re.sub(r"_(bucket|count|sum|total)$", "", m) for m in re.findall(r"\bacp_[a-z_]+", text)} - {"acp_fast"}


def test_the_dashboard_and_the_rules_name_exported_metrics(run: Any) -> None:
    families = _families(run)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for source, text in (("dashboard", exprs), ("alert rules", RULES.read_text())):
        named = _named(text)
        assert named, source
        assert named <= families, f"{source} names metrics the host does not export: {sorted(named - families)}"
