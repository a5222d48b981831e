"""``acp-fast demo`` run by hand at a terminal says, on one stderr line, how to talk to it; piped, it says nothing.

The terminal is a real pty on stdin; Ctrl-D on it is the end of input, so the demo ends by itself.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

HINT = "to talk to it yourself run: acp-fast client -- acp-fast demo"
BOUND_S = 60.0


def _demo(stdin: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "acp_fast", "demo"], stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _first_stderr_line(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + BOUND_S
    while b"\n" not in seen:
        ready, _, _ = select.select([proc.stderr], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"nothing on stderr; so far {seen!r}"
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.mark.parametrize("stdin", ["terminal", "pipe"])
def test_demo_hints_at_the_client_on_a_terminal_only(stdin: str) -> None:
    if stdin == "terminal":
        controller, tty = os.openpty()
        proc = _demo(tty)
        os.close(tty)
        try:
            line = _first_stderr_line(proc)
            assert line.decode().count("\n") == 1 and HINT in line.decode(), line
            os.write(controller, b"\x04")  # Ctrl-D: the end of the demo's input
            assert proc.wait(timeout=BOUND_S) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()
            os.close(controller)
    else:
        proc = _demo(subprocess.PIPE)
        _, err = proc.communicate(b"", timeout=BOUND_S)
        assert proc.returncode == 0
        assert b"acp-fast client" not in err, err
