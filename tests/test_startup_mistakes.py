"""The start-up rule: a mistake at start-up is one line on stderr and exit status 2; nothing is served.

Each case runs the real ``acp-fast`` in a subprocess on 127.0.0.1 and asserts
the status, exactly one stderr line naming the mistake, no traceback, and that
nothing listens on the port afterwards. ``RUN_BOUND_S`` is a hang guard (a
process still running then has served, which is the failure), not a timed assertion.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: Seconds a refused start may take before the test calls it served; generous, for a loaded machine.
RUN_BOUND_S = 60.0

AGENTS = '''
from acp_fast import Agent


class NeedsArgs(Agent):
    def __init__(self, model: str) -> None:
        super().__init__()


class NotAnAgent:
    pass
'''


@dataclass(frozen=True)
class Ports:
    """A free port (nothing listens on it) and a busy one (bound by the test, not listening)."""

    free: int
    busy: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ports() -> Iterator[Ports]:
    holder = socket.socket()  # bound without SO_REUSEADDR, never listening: a bind fails, a connect is refused
    holder.bind(("127.0.0.1", 0))
    try:
        yield Ports(free=_free_port(), busy=int(holder.getsockname()[1]))
    finally:
        holder.close()


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    (tmp_path / "agents.py").write_text(AGENTS)
    (tmp_path / "broken.py").write_text("from acp_fast import Agent\n\nclass Broken(Agent)\n    pass\n")
    (tmp_path / "needs_dep.py").write_text("import acp_fast_test_not_installed_dep\n")
    return tmp_path


LISTEN = ["--listen", "127.0.0.1:{free}"]

#: (id, argv after ``acp-fast``, what the one line must say)
CASES = [
    ("module-missing", ["serve", "no_such_module_here:Agent", *LISTEN], "cannot import module 'no_such_module_here'"),
    ("class-missing", ["serve", "agents:Missing", *LISTEN], "has no attribute 'Missing'"),
    ("syntax-error", ["serve", "broken:Broken"], "importing 'broken' failed"),
    ("syntax-error-listen", ["serve", "broken:Broken", *LISTEN], "importing 'broken' failed"),
    ("missing-dependency", ["serve", "needs_dep:Agent", *LISTEN], "needs 'acp_fast_test_not_installed_dep'"),
    ("constructor-needs-arguments", ["serve", "agents:NeedsArgs"], "cannot construct agents:NeedsArgs"),
    ("constructor-needs-arguments-listen", ["serve", "agents:NeedsArgs", *LISTEN], "cannot construct"),
    (
        "constructor-needs-arguments-workers",
        ["serve", "agents:NeedsArgs", "--listen", "127.0.0.1:{free}", "--workers", "2"],
        "cannot construct",
    ),
    ("not-an-agent-listen", ["serve", "agents:NotAnAgent", *LISTEN], "is not an acp_fast Agent"),
    ("listen-url", ["demo", "--listen", "http://127.0.0.1:{free}"], "not a URL"),
    ("unix-missing-directory", ["demo", "--listen", "unix:{tmp}/missing/acp.sock"], "does not exist"),
    ("unix-directory-refuses-sockets", ["demo", "--listen", "unix:/sys/acp-fast-test.sock"], "cannot make a socket"),
    ("port-99999", ["demo", "--listen", "127.0.0.1:99999"], "port 99999 is out of range"),
    ("port-65536", ["demo", "--listen", "127.0.0.1:65536"], "port 65536 is out of range"),
    ("port-in-use", ["demo", "--listen", "127.0.0.1:{busy}"], "Address already in use"),
    ("port-in-use-workers", ["demo", "--listen", "127.0.0.1:{busy}", "--workers", "2"], "Address already in use"),
    ("host-unresolved", ["demo", "--listen", "no-such-host.invalid:{free}"], "does not resolve"),
    ("metrics-port-in-use", ["demo", *LISTEN, "--metrics-listen", "127.0.0.1:{busy}"], "--metrics-listen"),
    ("metrics-port-in-use-stdio", ["demo", "--metrics-listen", "127.0.0.1:{busy}"], "Address already in use"),
    ("sqlite-bad-path", ["demo", *LISTEN, "--session-store", "sqlite:{tmp}/missing/s.db"], "cannot open"),
    ("redis-port-not-a-number", ["demo", *LISTEN, "--session-store", "redis://127.0.0.1:notaport/0"], "notaport"),
    ("redis-no-server", ["demo", *LISTEN, "--session-store", "redis://127.0.0.1:{busy}/0"], "no answer"),
    ("max-background-negative", ["demo", "--max-background", "-1"], "--max-background"),
    ("max-line-bytes-zero", ["demo", "--max-line-bytes", "0"], "--max-line-bytes"),
    (
        "low-water-above-high-water",
        ["demo", "--write-low-water", "2048", "--write-high-water", "1024"],
        "--write-low-water (2048) must not exceed --write-high-water (1024)",
    ),
    ("ping-interval-negative", ["demo", *LISTEN, "--ping-interval-s", "-1"], "--ping-interval-s"),
    ("workers-zero", ["demo", *LISTEN, "--workers", "0"], "--workers must be at least 1"),
    ("workers-negative", ["demo", *LISTEN, "--workers", "-1"], "--workers must be at least 1"),
    ("workers-without-listen", ["demo", "--workers", "2"], "--workers needs --listen"),
    ("access-log-without-listen", ["demo", "--access-log", "text"], "--access-log needs --listen"),
    ("session-store-without-listen", ["demo", "--session-store", "memory"], "--session-store needs --listen"),
]


def _run(argv: list[str], cwd: Path, *, module: bool = True) -> subprocess.CompletedProcess[str]:
    """``acp-fast ARGV`` (``python ARGV`` unless ``module``); still running after the bound: killed and failed."""
    proc = subprocess.Popen(
        [sys.executable, *(("-m", "acp_fast") if module else ()), *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its workers share its process group
    )
    try:
        out, err = proc.communicate(timeout=RUN_BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"still running after {RUN_BOUND_S}s (it served instead of refusing); stderr: {err[-2000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(("argv", "says"), [pytest.param(a, s, id=i) for i, a, s in CASES])
def test_a_start_up_mistake_is_one_line_and_status_2(
    argv: list[str], says: str, ports: Ports, agents_dir: Path
) -> None:
    filled = [a.format(free=ports.free, busy=ports.busy, tmp=agents_dir) for a in argv]
    done = _run(filled, agents_dir)
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert says in lines[0], lines[0]
    assert "serving" not in lines[0]
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert _refused(ports.free) and _refused(ports.busy)  # nothing listens, worker or otherwise
    assert not (agents_dir / "missing").exists()


def test_a_worker_that_never_served_stops_the_group(tmp_path: Path) -> None:
    """A worker whose host raises before serving is not restarted: the group stops with its one-line reason.

    The CLI's probes refuse a busy port before forking, so the supervisor is
    driven directly, with a host that always fails to start.
    """
    script = (
        "import sys\n"
        "from acp_fast.hosting.workers import WorkerFailedToStart, run_workers\n"
        "def serve():\n"
        "    raise OSError(98, 'Address already in use')\n"
        "try:\n"
        "    run_workers(2, serve, 1.0)\n"
        "except WorkerFailedToStart as exc:\n"
        "    sys.stderr.write(f'{exc}\\n')\n"
        "    raise SystemExit(2) from None\n"
    )
    done = _run(["-c", script], tmp_path, module=False)
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert "could not start: OSError: [Errno 98] Address already in use" in lines[0], lines[0]
    assert done.returncode == 2, done.stderr
