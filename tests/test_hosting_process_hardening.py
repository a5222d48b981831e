"""Process-level hosting hardening: run_host's exit status and gc, a worker stopped while starting.

Each case runs in a child process (signals and ``gc.freeze`` are process-wide);
waits are on the child's output and exit, bounded by ``communicate``'s timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

BOUND_S = 60.0

RUN_HOST = textwrap.dedent(
    """
    import gc, sys
    from acp_fast.demo import DemoAgent
    from acp_fast.hosting.server import ListenAddress, run_host
    before = gc.get_freeze_count()  # not 0 on every interpreter (3.12 starts with some)
    status = run_host(DemoAgent, ListenAddress(host="127.0.0.1", port=0), use_uvloop=False)
    print(f"status={status!r} frozen={gc.get_freeze_count() - before}", flush=True)
    """
)


def test_run_host_freezes_gc_only_when_asked_and_returns_its_status() -> None:
    """Like run_agent: gc.freeze is opt-in, and a clean drain returns 0 (it returned None and froze always)."""
    child = subprocess.Popen(
        [sys.executable, "-c", RUN_HOST], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert child.stderr is not None
    for _ in range(100):  # the banner says the host listens (and its signal handlers are installed)
        line = child.stderr.readline()
        if "serving ACP" in line or not line:
            break
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=BOUND_S)
    assert child.returncode == 0, err
    assert out.strip() == "status=0 frozen=0", (out, err)


WORKER = textwrap.dedent(
    """
    import os, signal, sys
    from acp_fast.hosting.workers import run_workers
    marker = sys.argv[1]

    def serve():
        # The supervisor is told to stop while this worker is still starting, before it can drain.
        os.kill(os.getppid(), signal.SIGTERM)
        # The stop signals are still held (the worker inherits the mask the supervisor starts it
        # with), so the passed-on SIGTERM waits, pending, for the worker to take it; sigtimedwait
        # takes it atomically, where a handler plus a blocking call could miss its arrival.
        got = signal.sigtimedwait({signal.SIGTERM, signal.SIGINT}, 30)  # bounded
        if got is not None and got.si_signo == signal.SIGTERM:
            open(marker, "w").write("drained")

    sys.exit(run_workers(1, serve, 5.0))
    """
)


def test_a_worker_told_to_stop_while_starting_drains(tmp_path: Path) -> None:
    """SIGTERM during a worker's start-up is held until it can drain, not taken unhandled (exit by signal)."""
    marker = tmp_path / "drained"
    child = subprocess.run(
        [sys.executable, "-c", WORKER, str(marker)], capture_output=True, text=True, timeout=BOUND_S, cwd=os.getcwd()
    )
    assert marker.exists(), (child.returncode, child.stderr[-2000:])
    assert child.returncode == 0, child.stderr[-2000:]
