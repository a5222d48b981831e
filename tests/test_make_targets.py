"""The make targets the README names work after the README's set-up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def test_make_bench_compares_with_a_baseline_saved_on_another_machine() -> None:
    """The saved baseline's machine_info differs from any other machine's: a warning, never an error."""
    proc = subprocess.run(
        ["make", "-s", "bench", "BENCH_FILES=benchmarks/bench_codec.py",
         "BENCH_LIMIT=--benchmark-max-time=0.001 --benchmark-min-rounds=1 --benchmark-warmup=off"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout
    assert "INTERNALERROR" not in proc.stdout + proc.stderr


def test_make_lint_without_the_lint_tools_names_the_extra(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "make", "echo"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    proc = subprocess.run(
        [str(bare / "make"), "-s", "lint"], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PATH": str(bare)},
    )
    assert proc.returncode != 0
    assert "pip install -e '.[test,lint]'" in proc.stdout + proc.stderr


def test_make_help_lists_every_target() -> None:
    proc = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert listed == {"compile", "debug", "help", "test", "bench", "bench-baseline", "lint", "clean"}, proc.stdout


@pytest.mark.parametrize("target", ["", "compile", "debug"])
def test_installing_targets_refuse_outside_a_virtual_environment(tmp_path: Path, target: str) -> None:
    """Outside a venv the python first on PATH is the system's: nothing is installed into it."""
    system = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if Path(p).exists()), None)
    if system is None:
        pytest.skip("no system python3")
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(system)
    for tool in ("sh", "make", "echo"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    proc = subprocess.run(
        [str(bare / "make"), "-s", *([target] if target else [])], cwd=ROOT, capture_output=True, text=True,
        timeout=60, env={"PATH": str(bare)},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "activate a virtual environment first" in proc.stdout + proc.stderr
    assert "pip" not in proc.stdout + proc.stderr.replace("python", "")


@pytest.mark.slow
def test_make_debug_builds_in_a_fresh_venv_of_the_readme(tmp_path: Path) -> None:
    """A fresh venv's setuptools predates pyproject's license field and it has no Cython: pip builds instead."""
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    proc = subprocess.run(["make", "-s", "debug"], cwd=tree, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert list((tree / "acp_fast" / "wire").glob("_framing*.so")), "the extension was not built in place"
    assert (tree / "acp_fast" / "wire" / "_framing.html").exists(), "not a debug build (no annotation)"
