"""The README's set-up block runs the main job on a machine without Node.js, and names what the tests need.

The block runs in ``sh`` with stand-ins for ``pip`` and ``acp-fast`` (each records that it ran) and no
``npm`` on PATH: the benchmark must run all the same.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _setup_block() -> str:
    section = README.split("## Set-up", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "no sh block under Set-up"
    return match.group(1)


@pytest.mark.parametrize("npm", ["missing", "failing"])
def test_the_setup_block_runs_the_bench_without_npm(tmp_path: Path, npm: str) -> None:
    sh = shutil.which("sh")
    assert sh is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "ran"
    stubs = {"pip": "exit 0", "acp-fast": 'echo "acp-fast $*" >> "$RAN"'}
    if npm == "failing":
        stubs["npm"] = "echo 'npm: no network' >&2; exit 1"
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!{sh}\n{body}\n")
        stub.chmod(0o755)
    (bin_dir / "sh").symlink_to(sh)
    work = tmp_path / "checkout"
    (work / "tests" / "interop").mkdir(parents=True)
    subprocess.run(
        [sh, "-c", _setup_block()], cwd=work, env={"PATH": str(bin_dir), "RAN": str(log)},
        capture_output=True, text=True, timeout=60,
    )
    assert log.exists() and "acp-fast bench --quick" in log.read_text(), "the set-up never ran the benchmark"


def test_the_readme_names_every_program_a_test_skips_without() -> None:
    """Each program a test looks up with ``need_tool`` or ``shutil.which`` is named in the README's table."""
    named = re.findall(r"need_tool\(\"([\w-]+)\"|shutil\.which\(\"([\w-]+)\"\)", _test_sources())
    programs = {a or b for a, b in named} - {"sh", "echo", "chromium-browser", "chromedriver", "python3"}
    table = README.split("| Program |", 1)[1].split("\n\n", 1)[0]
    for program in programs | {"chromium-driver"}:
        label = {"node": "Node.js", "promtool": "promtool"}.get(program, f"`{program}`")
        assert label in table, f"{program} is not named in the README's table of what the tests need"


def _test_sources() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "tests").rglob("*.py")))
