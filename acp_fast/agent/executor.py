"""The default executor of a process acp_fast runs: worker threads that cannot hold its exit.

``loop.run_in_executor(None, ...)`` and ``asyncio.to_thread`` run on the
loop's default executor. asyncio's own is a ``ThreadPoolExecutor``: its
threads are joined, without a bound, when the loop closes (``Runner.close``
waits for them, on 3.12+ for five minutes, on 3.11 for ever) and again when
the interpreter exits (``concurrent.futures`` and ``threading`` both join such
threads at exit). A body blocked in a thread on a call that never returns
would keep the process alive however bounded the rest of the shutdown is
(R14). Here the workers are daemon threads that no exit-time join waits for,
and shutting the pool down waits ``join_s`` for them: a thread still busy
then is named with its stack, once, and left behind, and the process exits
anyway (with status 1, as for an abandoned task).
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Worker threads at most, the figure asyncio's own default executor uses:
#: the work it takes is blocking I/O more than computation.
DEFAULT_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(ThreadPoolExecutor):
    """At most ``max_workers`` daemon threads; ``shutdown(wait=True)`` waits ``join_s`` for them, no longer.

    Work waits in a queue the loop's callers bound (each submission is an
    awaiting task, and those are bounded by the background pool and the
    spawn limit), as asyncio's default executor does. It is a
    ``ThreadPoolExecutor`` because asyncio takes no other kind as the default
    executor; ``submit`` and ``shutdown`` are its own, on state of its own.
    """

    def __init__(self, join_s: float, max_workers: int = DEFAULT_WORKERS, name: str = "acp-fast-worker") -> None:
        super().__init__(max_workers, name)  # starts no thread
        self.join_s = join_s
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Threads still busy when ``shutdown`` stopped waiting for them: left behind.
        self.stuck: list[threading.Thread] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._workers) < self._max:
                thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._workers)}", daemon=True)
                thread.start()
                self._workers.append(thread)
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args, kwargs = item
            del item  # nothing of a finished call stays referenced while the thread waits
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the caller's to see, as with any executor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let the workers finish what is queued; with ``wait``, give them ``join_s``, then leave the rest.

        Only the first call waits; asyncio calls it again when the loop closes.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._workers)
        if cancel_futures:
            self._cancel_queued()
        for _ in threads:
            self._queue.put(None)
        if not wait:
            return
        deadline = time.monotonic() + self.join_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.stuck = [thread for thread in threads if thread.is_alive()]
        if self.stuck:
            self._cancel_queued()
            for _ in self.stuck:  # a stuck thread that returns after all still finds its way out
                self._queue.put(None)
            self._report()

    def _cancel_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[0].cancel()

    def _report(self) -> None:
        """Name each stuck thread with its stack, once: the line that says why the exit status is 1."""
        frames = sys._current_frames()
        for thread in self.stuck:
            frame = frames.get(thread.ident) if thread.ident is not None else None
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "  (no stack)\n"
            log.error(
                "thread %s of the default executor did not return within abort_join_s=%.3g s; "
                "exiting without it. It is stuck at:\n%s",
                thread.name,
                self.join_s,
                stack.rstrip("\n"),
            )


__all__ = ["DEFAULT_WORKERS", "DaemonThreadPool"]
