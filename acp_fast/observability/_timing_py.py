"""Request timings in pure Python: the readable spec that ``_timing.pyx`` must match.

A :class:`Histogram` counts values per bucket (``value <= bound``, the last
bucket is +Inf) and sums them; :class:`Timings` keeps one histogram per method
label and records, per answered request, the time since its start. Both twins
are run through the same vectors by ``tests/test_timing_differential.py``.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable

#: Bucket bounds a histogram holds at most (the compiled twin's C array size).
MAX_BOUNDS = 32

#: Seconds on the monotonic clock (on Linux, the CLOCK_MONOTONIC the compiled twin reads).
now = time.perf_counter


def check_bounds(bounds: Iterable[float]) -> tuple[float, ...]:
    """``bounds`` as a tuple of floats, or ValueError: finite, strictly ascending, at most MAX_BOUNDS."""
    out = tuple(float(b) for b in bounds)
    if not out or len(out) > MAX_BOUNDS:
        raise ValueError(f"a histogram takes 1 to {MAX_BOUNDS} bucket bounds, not {len(out)}")
    for i, b in enumerate(out):
        if not math.isfinite(b):
            raise ValueError(f"bucket bound {b!r} is not finite")
        if i and b <= out[i - 1]:
            raise ValueError("bucket bounds must be strictly ascending")
    return out


class Histogram:
    """Counts per bucket (``value <= bound``, the last for +Inf) and the sum of the values observed."""

    __slots__ = ("_counts", "bounds", "total")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = check_bounds(bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def counts(self) -> list[int]:
        """Per-bucket counts, not cumulative; one more than ``bounds`` (+Inf last)."""
        return list(self._counts)

    def __repr__(self) -> str:
        return f"Histogram(bounds={self.bounds!r}, counts={self.counts()!r}, total={self.total!r})"


class Timings:
    """One histogram of durations per method label, fed one call per answer."""

    __slots__ = ("_bounds", "_by", "_label", "_watch", "last")

    def __init__(
        self, bounds: Iterable[float], label: Callable[[str], str], watch: Iterable[str] = frozenset()
    ) -> None:
        self._bounds = check_bounds(bounds)
        self._label = label
        self._watch = frozenset(watch)
        self._by: dict[str, Histogram] = {}
        self.last = 0.0

    def since(self, key: str, started: float) -> bool:
        """Record ``now() - started`` under ``key``'s label; True when ``key`` is watched (``last`` holds it)."""
        seconds = now() - started
        h = self._by.get(key)
        if h is None:
            h = self._histogram(key)
        h.observe(seconds)
        self.last = seconds
        return key in self._watch

    def _histogram(self, key: str) -> Histogram:
        label = self._label(key)
        h = self._by.get(label)
        if h is None:
            h = Histogram(self._bounds)
        self._by[label] = h
        if label == key:  # a known name is kept under itself; others pay the label call each time
            self._by[key] = h
        return h

    def histograms(self) -> list[tuple[str, Histogram]]:
        """``(label, Histogram)`` pairs, sorted by label."""
        return sorted(self._by.items())
