"""``--workers N``: N processes share one port (SO_REUSEPORT), one event loop each, supervised.

The kernel spreads new connections over the workers; each worker is a
complete host (its own limits, drain and health endpoints; the limits are
per worker, so the process-wide numbers multiply by N). The supervisor does
no network work: it starts the workers (forked, so the agent factory needs
no pickling), starts a new one when one dies, and on SIGTERM/SIGINT passes
the signal on and waits for all of them to drain, killing what outlives the
drain bound plus a margin. A worker that fails before it ever served is not
restarted (it would fail again, for ever): the group stops with its reason.
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
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import FrameType

log = logging.getLogger(__name__)

#: A worker that served and died sooner than this after its start is restarted only after this
#: long, so a worker that keeps dying at once does not spin the supervisor.
RESTART_BACKOFF_S = 1.0

#: How often the supervisor looks at its workers while nothing happens (it wakes on each exit).
SUPERVISE_TICK_S = 1.0

#: Beyond the drain bound, seconds the supervisor waits for workers before killing them.
STOP_MARGIN_S = 2.0

#: The signals that stop a worker by draining it.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


class WorkerFailedToStart(Exception):
    """A worker's host raised before it served: the group stops, and this one line says why."""


#: A worker's exit status when its host raised before serving (its reason went to the supervisor).
WORKER_START_FAILED = 2


def run_workers(n: int, serve: Callable[[], int | None], drain_bound_s: float) -> int:
    """Run ``serve`` (a blocking host loop) in ``n`` forked workers until a signal; returns an exit code.

    Raises :class:`WorkerFailedToStart` once the group has stopped, when a
    worker's ``serve`` raised: ``run_host`` returns a status once it has
    served, so an exception out of it is a start that failed (a port taken,
    an address refused), which a restart would only repeat.
    """
    return _Supervisor(n, serve).run(drain_bound_s)


class _Supervisor:
    """The workers of one group, each with the pipe on which it reports a failed start."""

    def __init__(self, n: int, serve: Callable[[], int | None]) -> None:
        self.n = n
        self.serve = serve
        self.ctx = multiprocessing.get_context("fork")
        self.workers: dict[int, tuple[BaseProcess, float, Connection]] = {}
        self.stopping = False
        self.failure: str | None = None

    def start(self, slot: int) -> None:
        """Start a worker with SIGTERM/SIGINT held, so no signal falls between its start and its record.

        Held in the supervisor, a signal that arrives meanwhile is handled once
        the worker is recorded, and so is passed on to it; the worker inherits
        the mask and keeps the signal pending until its loop's handlers exist
        (``run_host`` releases it), so a worker told to stop while starting
        drains instead of dying unhandled or being killed at the bound.
        """
        reader, writer = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(
            target=_worker_main, args=(self.serve, writer), name=f"acp-fast-worker-{slot}", daemon=False
        )
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            proc.start()
            self.workers[slot] = (proc, time.monotonic(), reader)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            writer.close()

    def stop(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        self.stopping = True
        for proc, _, _ in self.workers.values():
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)

    def run(self, drain_bound_s: float) -> int:
        previous = {sig: signal.signal(sig, self.stop) for sig in STOP_SIGNALS}
        try:
            for slot in range(self.n):
                self.start(slot)
            while not self.stopping:
                sentinels = [proc.sentinel for proc, _, _ in self.workers.values()]
                multiprocessing.connection.wait(sentinels, timeout=SUPERVISE_TICK_S)
                self._replace_dead()
            status = self._join(drain_bound_s)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for _, _, reader in self.workers.values():
                reader.close()
        if self.failure is not None:
            raise WorkerFailedToStart(self.failure)
        return status

    def _replace_dead(self) -> None:
        """Restart each worker that died after serving; one that never served stops the group."""
        for slot, (proc, started, reader) in list(self.workers.items()):
            if self.stopping or proc.is_alive():
                continue
            proc.join()
            reason = _reason(reader)
            if reason is not None:
                self.failure = f"worker {slot} could not start: {reason}"
                self.stop()
                return
            log.warning("worker %d (pid %s) exited with %s; starting a new one", slot, proc.pid, proc.exitcode)
            reader.close()
            if time.monotonic() - started < RESTART_BACKOFF_S:
                time.sleep(RESTART_BACKOFF_S)
            if not self.stopping:
                self.start(slot)

    def _join(self, drain_bound_s: float) -> int:
        """Wait for every worker to drain, killing what outlives the bound; 0 if all ended cleanly."""
        deadline = time.monotonic() + drain_bound_s + STOP_MARGIN_S
        clean = True
        for proc, _, _ in self.workers.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.error("worker pid %s outlived the drain bound; killing it", proc.pid)
                proc.kill()
                proc.join()
            # -SIGTERM: a worker still starting up when the signal came had nothing to drain.
            clean = clean and proc.exitcode in (0, -signal.SIGTERM, WORKER_START_FAILED)
        return 0 if clean else 1


def _reason(reader: Connection) -> str | None:
    """What a dead worker reported before exiting; None if it died without a word (it had served)."""
    try:
        return str(reader.recv()) if reader.poll() else None
    except EOFError:  # the pipe closed unwritten: the worker served, or was killed
        return None


def _worker_main(serve: Callable[[], int | None], report: Connection) -> None:
    """A worker: ``serve`` runs with the stop signals held; it releases them once it can drain (run_host does).

    An exception out of ``serve`` is a failed start: its one-line reason goes
    to the supervisor, which says it once for the group, instead of a traceback
    per worker.
    """
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)  # the worker's loop installs its own handlers
    try:
        status = serve()
    except Exception as exc:
        report.send(" ".join(f"{type(exc).__name__}: {exc}".split()))
        raise SystemExit(WORKER_START_FAILED) from None
    finally:
        report.close()
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
