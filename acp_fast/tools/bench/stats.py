"""The one percentile definition of the project's benchmarks, and the two measured quantities.

Every tool that prints a p50 or p99 (``acp-fast bench``,
``benchmarks/load_32_streams.py``) calls :func:`percentile`, so a p99 in one
table means the same as a p99 in another, and the output names the
definition (:data:`PERCENTILE_DEFINITION`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: How percentiles are computed, printed next to every table that shows one.
PERCENTILE_DEFINITION = (
    "percentiles interpolate linearly between the closest ranks "
    "(statistics.quantiles(n=100, method='inclusive'); p0 = min, p100 = max)"
)


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (0..100) of ``values``, in any order; NaN when empty.

    The inclusive method puts p0 on the smallest and p100 on the largest
    sample, so a p99 never exceeds the max and small samples are not
    rounded up to an outlier, as a nearest-rank definition would.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    if not values:
        return float("nan")
    if q == 0:
        return float(min(values))
    if q == 100 or len(values) == 1:
        return float(max(values))
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass
class Latency:
    """Round-trip samples of one scenario and how many of the answers were right."""

    samples_ns: list[int] = field(default_factory=list)
    correct: int = 0

    def summary(self) -> dict[str, Any]:
        us = sorted(s / 1000 for s in self.samples_ns)
        return {
            "n": len(us),
            "correct": self.correct == len(us) and bool(us),
            "p50_us": percentile(us, 50),
            "p99_us": percentile(us, 99),
            "max_us": us[-1] if us else float("nan"),
            "mean_us": statistics.fmean(us) if us else float("nan"),
            "samples_us": [round(x, 2) for x in us],
        }


@dataclass(frozen=True)
class Rate:
    """``count`` events in ``seconds``; ``correct`` says every event was the expected one.

    ``cpu_ns``: CPU time the agent process ran meanwhile, when it could be read;
    ``driver_cpu_ns``: the same for the benchmark's own process.
    """

    count: int
    seconds: float
    correct: bool
    cpu_ns: int | None = None
    driver_cpu_ns: int | None = None

    @property
    def per_s(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "seconds": self.seconds, "per_s": self.per_s, "correct": self.correct}


@dataclass
class Bursts:
    """The timed bursts of one pipelined row, each after an untimed warm-up; the row's rate is their median.

    A burst lasts milliseconds to a second, and the first one a process runs
    (after start-up or after other rounds) was up to a quarter slower than
    the next ones, for the floor and the agents alike: one burst measures the
    process's history as much as its cost per message.
    """

    rates: list[Rate] = field(default_factory=list)
    warmups: list[Rate] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        per = [r.per_s for r in self.rates]
        cpu = [r.cpu_ns / 1000 / r.count for r in self.rates if r.cpu_ns is not None and r.count]
        mine = [r.driver_cpu_ns / 1000 / r.count for r in self.rates if r.driver_cpu_ns is not None and r.count]
        return {
            "count": self.rates[0].count if self.rates else 0,
            "bursts": len(per),
            "per_s": percentile(per, 50),
            "per_s_min": min(per, default=float("nan")),
            "per_s_max": max(per, default=float("nan")),
            "per_s_bursts": per,
            "warmup_per_s": [r.per_s for r in self.warmups],
            # Median over the bursts of the agent's CPU microseconds per request; absent without /proc.
            **({"cpu_us": percentile(cpu, 50), "cpu_us_bursts": cpu} if cpu and len(cpu) == len(per) else {}),
            **({"driver_cpu_us": percentile(mine, 50)} if mine and len(mine) == len(per) else {}),
            "seconds": sum(r.seconds for r in self.rates),
            "correct": bool(per) and all(r.correct for r in [*self.rates, *self.warmups]),
        }
