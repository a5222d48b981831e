"""The command line a person meets first: ``--version`` and ``serve`` errors they can act on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import acp_fast

ROOT = Path(__file__).resolve().parent.parent


def _acp_fast(*args: str, cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-m", "acp_fast", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version_flag_prints_the_package_version(tmp_path: Path) -> None:
    done = _acp_fast("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"acp-fast {acp_fast.__version__} (framer: "), done.stdout


def test_serve_unimportable_module_is_one_line_naming_cwd_and_pythonpath(tmp_path: Path) -> None:
    done = _acp_fast("serve", "no_such_pkg.agents:Agent", cwd=tmp_path, pythonpath="/opt/nowhere")
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'no_such_pkg.agents'" in lines[0], lines[0]
    assert f"cwd {tmp_path}" in lines[0] and "PYTHONPATH=/opt/nowhere" in lines[0], lines[0]


def test_serve_module_with_a_missing_dependency_names_the_dependency(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text("import not_installed_dependency\n")
    done = _acp_fast("serve", "my_agent:Agent", cwd=tmp_path)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    assert "'not_installed_dependency'" in done.stderr and "'my_agent'" in done.stderr, done.stderr
    assert "PYTHONPATH=(unset)" in done.stderr, done.stderr


def test_serve_missing_attribute_names_the_module_file(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text("X = 1\n")
    done = _acp_fast("serve", "my_agent:Agent", cwd=tmp_path)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    assert "has no attribute 'Agent'" in done.stderr and str(tmp_path / "my_agent.py") in done.stderr


@pytest.mark.parametrize("target", ["os:path", "collections:OrderedDict", "os:getcwd"])
def test_serve_something_that_is_not_an_agent_says_so(tmp_path: Path, target: str) -> None:
    done = _acp_fast("serve", target, cwd=tmp_path)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    assert f"{target} is not an acp_fast Agent or an SDK agent" in done.stderr, done.stderr
