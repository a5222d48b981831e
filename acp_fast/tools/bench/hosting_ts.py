"""The TypeScript SDK's ``AcpServer`` as a hosting target (``ts-sdk``), beside acp_fast and the echo floor.

``tests/interop/ts_bench_agent.mjs`` is the demo's bench behaviour written on
the official TypeScript SDK 2.4.0 and served by its ``AcpServer`` over the
``ws`` package on Node. It needs the interop folder's node_modules (``npm ci``
in ``tests/interop``), so it exists only in a checkout: from an installed
package, or without ``node``, the target is ``unsupported`` with one line
saying why, and it never fails or stalls the rest of the run. The numbers come
from hosting.py's ``measure_host``, the same client and steps as acp_fast's,
with the node process's RSS.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from .hosting import free_port, measure_host, raise_fd_limit, wait_listening

TARGET = "ts-sdk"
#: The agent script, in the checkout this package was installed from (editable) or run in.
AGENT = Path(__file__).resolve().parents[3] / "tests" / "interop" / "ts_bench_agent.mjs"
#: A hang guard over one whole measurement (a normal 2 000-connection run takes well under a minute).
MEASURE_TIMEOUT_S = 600.0
#: Seconds node gets to exit after SIGTERM before it is killed.
EXIT_TIMEOUT_S = 10.0


def missing() -> str | None:
    """Why the TypeScript target cannot run here, or None."""
    if shutil.which("node") is None:
        return "node/ts sdk not found: node is not on PATH"
    modules = AGENT.parent / "node_modules"
    for needed in (AGENT, modules / "@agentclientprotocol" / "sdk", modules / "ws"):
        if not needed.exists():
            return f"node/ts sdk not found: {needed} is missing (needs a checkout and `npm ci` in tests/interop)"
    return None


def server_argv(port: int) -> list[str]:
    return [shutil.which("node") or "node", str(AGENT), "--port", str(port)]


async def measure_ts(connections: int, cancels: int) -> dict[str, float]:
    """``measure_host`` against the TypeScript agent; raises when it does not start, fails or takes too long."""
    raise_fd_limit()  # node inherits it
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *server_argv(port), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        await wait_listening(port, proc)
        measure = measure_host(f"ws://127.0.0.1:{port}/acp", proc.pid, connections, cancels)
        return await asyncio.wait_for(measure, MEASURE_TIMEOUT_S)
    finally:
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), EXIT_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()


#: The hosting scenarios this target fills (updates/s is measured by benchmarks/hosting_idle.py --ts).
SCENARIOS = ("ws_setup_per_s", "ws_idle_rss", "ws_cancel")


def rows(result: dict[str, float], connections: int) -> dict[str, dict[str, Any]]:
    """``measure_ts``'s numbers as the bench's scenario rows for the ``ts-sdk`` column."""
    return {
        "ws_setup_per_s": {TARGET: {"per_s": result["setup_per_s"], "n": connections, "correct": True}},
        "ws_idle_rss": {TARGET: {"kib_per_conn": result["kib_per_conn"], "n": connections, "correct": True}},
        "ws_cancel": {
            TARGET: {
                "p50_us": result["cancel_p50_us"],
                "p99_us": result["cancel_p99_us"],
                "correct": result["wrong_answers"] == 0,
            }
        },
    }


async def run_ts_hosting(connections: int, cancels: int) -> dict[str, dict[str, Any]]:
    """The ``ts-sdk`` rows: measured, ``{"unsupported": why}``, or ``{"error": why}`` when the run failed."""
    why = missing()
    if why is not None:
        return {scenario: {TARGET: {"unsupported": why}} for scenario in SCENARIOS}
    try:
        result = await measure_ts(connections, max(cancels, 1))
    except Exception as exc:  # the node agent did not start, answered wrongly or hung: FAILED rows, never a crash
        error = {"correct": False, "error": f"{type(exc).__name__}: {exc}"}
        return {scenario: {TARGET: dict(error)} for scenario in SCENARIOS}
    return rows(result, connections)
