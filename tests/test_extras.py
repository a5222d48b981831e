"""A missing optional extra is one line naming what to install and exit 2, never a traceback.

Each case blocks the extra's modules in a fresh interpreter (``sys.modules[name] =
None`` makes any import of it fail, as on a plain install) and runs the real
entry point.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_fast.extras import EXTRAS, MissingExtra, install_hint, missing, require

ROOT = Path(__file__).resolve().parent.parent

SDK_AGENT = """
class SdkShaped:
    async def initialize(self, **kwargs): ...
    async def new_session(self, **kwargs): ...
    async def prompt(self, **kwargs): ...
"""


def _run_blocked(blocked: tuple[str, ...], code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )


def _one_line_hint(proc: subprocess.CompletedProcess[str], extra: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert install_hint(extra) in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("module", EXTRAS["server"])
def test_listen_without_the_server_extra_is_one_line_and_exit_2(module: str, tmp_path: Path) -> None:
    proc = _run_blocked(
        (module,), "from acp_fast.cli import main\nmain(['demo', '--listen', '127.0.0.1:0'])", tmp_path
    )
    line = _one_line_hint(proc, "server")
    assert f"({module} is not installed)" in line


def test_importing_hosting_without_the_extra_raises_missing_extra_naming_it(tmp_path: Path) -> None:
    code = (
        "from acp_fast.extras import MissingExtra\n"
        "try:\n    from acp_fast.hosting import run_host\n"
        "except MissingExtra as exc:\n    print(exc.extra, isinstance(exc, ImportError), exc)\n"
    )
    proc = _run_blocked(("picows",), code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("server True "), proc.stdout
    assert install_hint("server") in proc.stdout


def test_serving_an_sdk_agent_without_the_compat_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "sdk_shaped.py").write_text(SDK_AGENT)
    proc = _run_blocked(("acp",), "from acp_fast.cli import main\nmain(['serve', 'sdk_shaped:SdkShaped'])", tmp_path)
    _one_line_hint(proc, "compat")


def test_an_agent_module_importing_compat_without_the_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "uses_compat.py").write_text("from acp_fast.compat import run_agent\nclass A: ...\n")
    proc = _run_blocked(("acp",), "from acp_fast.cli import main\nmain(['serve', 'uses_compat:A'])", tmp_path)
    _one_line_hint(proc, "compat")


def test_validate_without_its_extra_names_the_install_command(tmp_path: Path) -> None:
    proc = _run_blocked(("jsonschema",), "from acp_fast.cli import main\nmain(['demo', '--validate'])", tmp_path)
    _one_line_hint(proc, "validate")


def test_require_and_missing_follow_what_is_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing("server") is None
    require("server", "a test")
    monkeypatch.setitem(sys.modules, "multidict", None)
    assert missing("server") == "multidict"
    with pytest.raises(MissingExtra) as info:
        require("server", "a test")
    assert info.value.extra == "server" and info.value.name == "multidict"
    assert str(info.value) == f"a test needs the 'server' extra (multidict is not installed): {install_hint('server')}"


def test_the_pure_python_fallback_is_logged_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from acp_fast.agent import serve

    serve.warn_if_fallback.cache_clear()
    monkeypatch.setattr(serve, "FALLBACK_REASON", "the compiled framer is not installed (test)")
    try:
        with caplog.at_level("WARNING", logger=serve.log.name):
            serve.warn_if_fallback()
            serve.warn_if_fallback()
        hits = [r for r in caplog.records if "pure-Python framer" in r.getMessage()]
        assert len(hits) == 1 and "(test)" in hits[0].getMessage()
    finally:
        serve.warn_if_fallback.cache_clear()
