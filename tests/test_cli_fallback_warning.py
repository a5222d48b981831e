"""A build without a compiler is visible where a user looks: ``acp-fast --version`` warns on stderr.

pip shows the build's own warning only with ``-v``. A missing extension is simulated in a real subprocess
by blocking its import; ``ACP_FAST_NO_EXTENSIONS=1`` is a choice, not a fault, and gets no warning.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HIDE = "import sys; sys.modules['acp_fast.wire._framing'] = None; from acp_fast.cli import main; main()"
PLAIN = "from acp_fast.cli import main; main()"
WARNING = "WARNING: acp-fast runs on the pure-Python framer and decoder"

CASES = [
    # (code, ACP_FAST_NO_EXTENSIONS, the framer --version names, whether it warns)
    (HIDE, "", "python", True),
    (HIDE, "1", "python", False),
    (PLAIN, "1", "python", False),
]


@pytest.mark.parametrize(("code", "no_ext", "framer", "warns"), CASES, ids=["missing", "missing-and-chosen", "chosen"])
def test_version_warns_only_when_the_compiled_framer_is_missing(
    code: str, no_ext: str, framer: str, warns: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ACP_FAST_NO_EXTENSIONS"}
    if no_ext:
        env["ACP_FAST_NO_EXTENSIONS"] = no_ext
    done = subprocess.run(
        [sys.executable, "-c", code, "--version"], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert f"(framer: {framer})" in done.stdout
    lines = done.stderr.splitlines()
    if warns:
        assert len(lines) == 1 and lines[0].startswith(WARNING), done.stderr
        assert "reinstall with a C compiler" in lines[0]
    else:
        assert WARNING not in done.stderr, done.stderr
