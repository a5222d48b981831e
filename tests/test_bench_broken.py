"""``acp-fast bench`` refuses what it cannot do with a non-zero status and the reason: an ``--agent`` that
never opens a session (its own stderr shown), ``--plot`` without matplotlib. Real subprocesses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_bench_tool import TINY

BROKEN = [
    # (the --agent command, a line of the agent's own error that must be shown)
    (f"{sys.executable} -c 'import no_such_module_here'", "ModuleNotFoundError: No module named 'no_such_module_here'"),
    (f"{sys.executable} -c 'raise SystemExit(\"agent: config file missing\")'", "agent: config file missing"),
    ("no-such-agent-command-here", "no-such-agent-command-here"),
]


@pytest.mark.parametrize(("command", "shown"), BROKEN, ids=["import-error", "exit-message", "not-found"])
def test_an_agent_that_cannot_start_fails_the_run_with_its_own_error(
    tmp_path: Path, command: str, shown: str
) -> None:
    argv = ["--targets", "", "--agent", command, "--label", "broken", "--probe-timeout", "5", *TINY,
            "--json", str(tmp_path / "bench.json"), "--no-plot"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "bench", *argv], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "acp-fast bench: broken could not be benchmarked" in proc.stderr, proc.stderr[-3000:]
    assert shown in proc.stderr, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" not in proc.stderr.split("could not be benchmarked")[0]


def test_plot_without_matplotlib_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['matplotlib'] = None; from acp_fast.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", hide, "bench", "--quick", "--plot", str(tmp_path / "cdf.png")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        "acp-fast bench: --plot needs matplotlib, which is not installed: pip install matplotlib (the plot extra)"
    )
    assert not (tmp_path / "cdf.png").exists()
