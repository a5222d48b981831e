"""A real ``redis-server`` on loopback for the session store tests (never a mock), free ports, and
``need_tool`` for any test that needs a real server binary (redis-server, prometheus, promtool)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def need_tool(name: str, install: str) -> str:
    """The tool's path; skip (fail in CI, whose .ci/run installs it) when it is missing."""
    path = shutil.which(name)
    if path is None:
        if _in_ci():
            pytest.fail(f"{name} is not installed (.ci/run installs it)")
        pytest.skip(f"{name} is not installed ({install})")
    return path


def need_redis_package() -> None:
    if importlib.util.find_spec("redis") is None:
        pytest.skip("the redis package is not installed (pip install '.[store]')")


@contextlib.contextmanager
def redis_server(tmp_path: Path) -> Iterator[int]:
    """``redis-server`` on 127.0.0.1 and a free port, no persistence; killed (its process group) at the end."""
    binary = need_tool("redis-server", "apt-get install redis-server")
    need_redis_package()
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*args, "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(400):  # until it answers PING (bounded: 20 s)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise AssertionError("redis-server never answered PING")
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
