"""Runs the TypeScript SDK interop tests (``node --test`` in tests/interop) as part of pytest.

Each Node test starts ``ACP_FAST_PYTHON -m acp_fast demo`` (over stdio, or
with ``--listen`` for the WebSocket and Streamable HTTP clients; the
MCP-over-ACP one serves tests/test_r17_mcp_scoped.py's agent instead); it is
set to this interpreter so both sides test the same installation. Without node or
node_modules (``npm ci`` not run) a test is skipped locally, but fails under
CI, where .ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MODULES = HERE / "node_modules"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "packages"),
    [
        ("ts_sdk_client.test.mjs", ("@agentclientprotocol/sdk",)),  # stdio, against `acp-fast demo`
        ("ts_ws_client.test.mjs", ("@agentclientprotocol/sdk", "ws")),  # createWebSocketStream, `demo --listen`
        ("ts_http_client.test.mjs", ("@agentclientprotocol/sdk",)),  # createHttpStream, `demo --listen`
        ("ts_sdk_current.test.mjs", ("@agentclientprotocol/sdk",)),  # systemPrompt, notices, plan operations
        ("ts_mcp_scoped.test.mjs", ("@agentclientprotocol/sdk",)),  # R17: the SDK's MCP binding, both roles
    ],
    ids=["stdio", "websocket", "streamable-http", "schema-1.34-kinds", "mcp-over-acp"],
)
def test_interop_typescript_sdk_clients_against_demo(script: str, packages: tuple[str, ...]) -> None:
    node = shutil.which("node")
    missing = [MODULES / p for p in packages if not (MODULES / p).is_dir()]
    if node is None or missing:
        reason = "node is not installed" if node is None else f"{missing[0]} is missing (run `npm ci` in {HERE})"
        if _in_ci():
            pytest.fail(f"TypeScript interop ({script}) cannot run under CI: {reason}")
        pytest.skip(reason)
    env = {**os.environ, "ACP_FAST_PYTHON": sys.executable}
    proc = subprocess.run(
        [node, "--test", script],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
        check=False,
    )
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout}\n{proc.stderr}"
