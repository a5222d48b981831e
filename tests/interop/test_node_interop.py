"""Runs the TypeScript SDK interop test (``node --test`` in tests/interop) as part of pytest.

The Node test spawns ``ACP_FAST_PYTHON -m acp_fast demo``; it is set to this
interpreter so both sides test the same installation. Without node_modules
(``npm ci`` not run) the test is skipped locally, but fails under CI, where
.ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SDK = HERE / "node_modules" / "@agentclientprotocol" / "sdk"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.mark.slow
def test_interop_typescript_sdk_client_against_demo() -> None:
    node = shutil.which("node")
    if node is None or not SDK.is_dir():
        reason = "node is not installed" if node is None else f"{SDK} is missing (run `npm ci` in {HERE})"
        if _in_ci():
            pytest.fail(f"TypeScript interop cannot run under CI: {reason}")
        pytest.skip(reason)
    env = {**os.environ, "ACP_FAST_PYTHON": sys.executable}
    proc = subprocess.run(
        [node, "--test", "ts_sdk_client.test.mjs"],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
        check=False,
    )
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout}\n{proc.stderr}"
