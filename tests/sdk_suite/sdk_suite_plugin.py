"""pytest plugin for the SDK's own test suite run by ``.ci/sdk-suite``: tallies the agent-driving tests.

A test drives an agent when it built an ``AgentSideConnection`` or called
``run_agent`` in any process (recorded by ``site/sitecustomize.py``). At the
end the plugin prints how many of those passed and names the others, and
writes the same as JSON to ``ACP_FAST_SDK_SUITE_REPORT``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        previous = _outcomes.get(report.nodeid)
        if previous in (None, "passed"):
            _outcomes[report.nodeid] = report.outcome


def pytest_terminal_summary(terminalreporter: Any) -> None:
    marks_file = os.environ.get("ACP_FAST_SDK_SUITE_MARKS")
    if not marks_file or not Path(marks_file).exists():
        return
    driving = sorted(set(Path(marks_file).read_text(encoding="utf-8").split()))
    passed = [t for t in driving if _outcomes.get(t) == "passed"]
    failed = {t: _outcomes.get(t, "not run") for t in driving if t not in passed}
    mode = os.environ.get("ACP_FAST_SDK_SUITE", "?")
    terminalreporter.write_sep("=", f"agent-driving tests ({mode}): {len(passed)} of {len(driving)} passed")
    for test, outcome in failed.items():
        terminalreporter.write_line(f"{outcome.upper():8} {test}")
    report = os.environ.get("ACP_FAST_SDK_SUITE_REPORT")
    if report:
        Path(report).write_text(
            json.dumps({"mode": mode, "driving": driving, "passed": passed, "failed": failed}, indent=1),
            encoding="utf-8",
        )
