"""Runs the TypeScript SDK Streamable HTTP interop test (``ts_http_client.test.mjs``) as part of pytest.

The Node test starts ``ACP_FAST_PYTHON -m acp_fast demo --listen``; it is set
to this interpreter. Skipped locally without node or node_modules, failed
under CI, where .ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NEEDED = [HERE / "node_modules" / "@agentclientprotocol" / "sdk"]


@pytest.mark.slow
def test_interop_typescript_sdk_streamable_http_clients_against_demo_listen() -> None:
    node = shutil.which("node")
    missing = [p for p in NEEDED if not p.is_dir()]
    if node is None or missing:
        reason = "node is not installed" if node is None else f"{missing[0]} is missing (run `npm ci` in {HERE})"
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(f"TypeScript Streamable HTTP interop cannot run under CI: {reason}")
        pytest.skip(reason)
    env = {**os.environ, "ACP_FAST_PYTHON": sys.executable}
    proc = subprocess.run(
        [node, "--test", "ts_http_client.test.mjs"],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
        check=False,
    )
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout}\n{proc.stderr}"
