"""What the system says about another process: its CPU time, whether it is running, its resident memory.

Linux: the process CPU-time clock and /proc. The bench reads its agents
through these, from outside, so no agent needs a hook for them.
"""

from __future__ import annotations

import asyncio
import time

#: clock_getcpuclockid's clock type for a process's whole CPU time.
_CPUCLOCK_SCHED = 2
#: Seconds between two looks at whether the agent still runs, before its CPU clock is read.
IDLE_POLL_S = 0.0002
#: Seconds the agent may keep running before its CPU clock is read anyway.
IDLE_WAIT_S = 1.0


def cpu_ns(pid: int) -> int | None:
    """CPU time process ``pid`` has run so far (all threads), in ns; see ``idle_cpu_ns``.

    Read through the process's CPU-time clock (clock_getcpuclockid's
    encoding: ``(~pid << 3) | CPUCLOCK_SCHED``); None where the system
    does not offer it. Unlike a rate, it does not depend on whether the
    scheduler gave the agent a core of its own or the driver's.
    """
    try:
        return time.clock_gettime_ns(((~pid) << 3) | _CPUCLOCK_SCHED)
    except (OSError, AttributeError, OverflowError):
        return None


async def idle_cpu_ns(pid: int) -> int | None:
    """``cpu_ns`` once the process sleeps (at most ``IDLE_WAIT_S`` later).

    Read from another process, that clock counts a running slice only at
    the next scheduler tick or switch (4 ms steps here): a burst the agent
    served in one slice read 0 µs, and every burst lost the slice still
    running at its end (the start callbacks after the last answer, say).
    Once the agent sleeps in its event loop the clock is exact.
    """
    deadline = time.monotonic() + IDLE_WAIT_S
    for _ in range(int(IDLE_WAIT_S / IDLE_POLL_S)):  # no event tells another process's state
        if not running(pid) or time.monotonic() > deadline:
            break
        await asyncio.sleep(IDLE_POLL_S)
    return cpu_ns(pid)


def running(pid: int) -> bool:
    """Whether process ``pid`` is running or waiting for a CPU (state R in /proc); False where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    end = stat.rfind(b")")  # the command name may hold spaces and parentheses
    return stat[end + 2 : end + 3] == b"R"


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid``; OSError if /proc cannot be read, ValueError if it has no VmRSS."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for pid {pid}")


__all__ = ["IDLE_POLL_S", "IDLE_WAIT_S", "cpu_ns", "idle_cpu_ns", "rss_bytes", "running"]
