"""``--workers N``: N processes share one port (SO_REUSEPORT), one event loop each, supervised.

The kernel spreads new connections over the workers; each worker is a
complete host (its own limits, drain and health endpoints; the limits are
per worker, so the process-wide numbers multiply by N). The supervisor does
no network work: it starts the workers (forked, so the agent factory needs
no pickling), starts a new one when one dies, and on SIGTERM/SIGINT passes
the signal on and waits for all of them to drain, killing what outlives the
drain bound plus a margin.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from types import FrameType

log = logging.getLogger(__name__)

#: A worker that dies sooner than this after its start is restarted only after this long, so a
#: worker that cannot start (bad agent import, port taken) does not spin the supervisor.
RESTART_BACKOFF_S = 1.0

#: How often the supervisor looks at its workers while nothing happens (it wakes on each exit).
SUPERVISE_TICK_S = 1.0

#: Beyond the drain bound, seconds the supervisor waits for workers before killing them.
STOP_MARGIN_S = 2.0

#: The signals that stop a worker by draining it.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


def run_workers(n: int, serve: Callable[[], int | None], drain_bound_s: float) -> int:
    """Run ``serve`` (a blocking host loop) in ``n`` forked workers until a signal; returns an exit code."""
    ctx = multiprocessing.get_context("fork")
    workers: dict[int, tuple[BaseProcess, float]] = {}
    stopping = False

    def start(slot: int) -> None:
        """Start a worker with SIGTERM/SIGINT held, so no signal falls between its start and its record.

        Held in the supervisor, a signal that arrives meanwhile is handled once
        the worker is recorded, and so is passed on to it; the worker inherits
        the mask and keeps the signal pending until its loop's handlers exist
        (``run_host`` releases it), so a worker told to stop while starting
        drains instead of dying unhandled or being killed at the bound.
        """
        proc = ctx.Process(target=_worker_main, args=(serve,), name=f"acp-fast-worker-{slot}", daemon=False)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            proc.start()
            workers[slot] = (proc, time.monotonic())
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for proc, _ in workers.values():
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        for slot in range(n):
            start(slot)
        while not stopping:
            sentinels = [proc.sentinel for proc, _ in workers.values()]
            multiprocessing.connection.wait(sentinels, timeout=SUPERVISE_TICK_S)
            for slot, (proc, started) in list(workers.items()):
                if stopping or proc.is_alive():
                    continue
                proc.join()
                log.warning("worker %d (pid %s) exited with %s; starting a new one", slot, proc.pid, proc.exitcode)
                if time.monotonic() - started < RESTART_BACKOFF_S:
                    time.sleep(RESTART_BACKOFF_S)
                if not stopping:
                    start(slot)
        deadline = time.monotonic() + drain_bound_s + STOP_MARGIN_S
        clean = True
        for proc, _ in workers.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.error("worker pid %s outlived the drain bound; killing it", proc.pid)
                proc.kill()
                proc.join()
            # -SIGTERM: a worker still starting up when the signal came had nothing to drain.
            clean = clean and proc.exitcode in (0, -signal.SIGTERM)
        return 0 if clean else 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker_main(serve: Callable[[], int | None]) -> None:
    """A worker: ``serve`` runs with the stop signals held; it releases them once it can drain (run_host does)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)  # the worker's loop installs its own handlers
    status = serve()
    if status:
        raise SystemExit(status)


@contextlib.contextmanager
def shared_session_store() -> Iterator[str]:
    """A SQLite session store in a directory made for this run (removed at exit), created before the fork.

    Without it each worker would park in its own memory and a reconnect would
    find its session with probability 1/N. The directory is on /dev/shm when
    there is one: parked sessions live a minute and die with the supervisor
    anyway, and tmpfs spares them the disk (benchmarks/session_store.py compares the two).
    """
    from .store import connect_sqlite

    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    directory = tempfile.mkdtemp(prefix="acp-fast-sessions-", dir=base)
    try:
        path = os.path.join(directory, "sessions.sqlite3")
        connect_sqlite(path, 1.0).close()  # the schema exists before any worker opens the file
        log.info("workers park sessions in %s (--session-store to choose)", path)
        yield f"sqlite:{path}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
