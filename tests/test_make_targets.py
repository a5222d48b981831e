"""The make targets the README names work after the README's set-up."""

from __future__ import annotations

import shutil
import subprocess
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
