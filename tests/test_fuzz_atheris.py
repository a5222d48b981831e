"""R25: a short, bounded atheris pass over the framer harness (fuzz/fuzz_framer.py).

The harness's ``test_one_input`` is reused as it is; only the driver differs
from ``fuzz_framer.py``'s ``main``: it instruments just ``acp_fast`` (atheris'
``instrument_all`` takes ~40 s here) and takes a fixed seed and run count, so
the pass is reproducible. It runs in a subprocess because libFuzzer owns the
process (it exits on the first finding). A planted framer bug proves the
driver reports findings.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris", reason="atheris is not installed (pip install -e '.[test]' brings it on Linux)")

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 300  # turns a hang into a failure; a pass takes a few seconds

DRIVER = """
import importlib.util, sys
import atheris
with atheris.instrument_imports(include=["acp_fast"]):
    import acp_fast.wire.frames, acp_fast.wire._framing_py
if sys.argv.pop(1) == "plant-bug":  # frames of one feed come out reversed
    cls = acp_fast.wire._framing_py.LineFramer
    feed = cls.feed
    cls.feed = lambda self, data: feed(self, data)[::-1]
spec = importlib.util.spec_from_file_location("fuzz_framer", "fuzz/fuzz_framer.py")
harness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(harness)
atheris.Setup(sys.argv, harness.test_one_input)
atheris.Fuzz()
"""


def _fuzz(tmp_path: Path, mode: str, runs: int) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus"  # libFuzzer adds findings to it: never the checked-in one
    shutil.copytree(ROOT / "fuzz" / "corpus", corpus)
    return subprocess.run(
        [sys.executable, "-c", DRIVER, mode, str(corpus), f"-runs={runs}", "-seed=25", "-max_len=4096",
         f"-artifact_prefix={tmp_path}/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def test_r25_atheris_finds_nothing_in_20000_runs(tmp_path: Path) -> None:
    result = _fuzz(tmp_path, "clean", 20_000)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done 20000 runs" in result.stderr, result.stderr[-4000:]


def test_r25_atheris_driver_reports_a_planted_framer_bug(tmp_path: Path) -> None:
    result = _fuzz(tmp_path, "plant-bug", 2_000)
    report = result.stdout + result.stderr  # atheris prints the Python traceback on stdout
    assert result.returncode != 0, report[-4000:]
    assert "AssertionError: acp_fast.wire._framing_py" in report, report[-4000:]
    assert list(tmp_path.glob("crash-*")), "libFuzzer saved no crash input"
