# cython: binding=False
"""Compiled request timings: ``now``, ``Histogram`` and ``Timings``.

``_timing_py.py`` specifies the behaviour; this does the same with a C clock
read, C arrays and one C call per answered request, because timing every
request in Python (two clock reads, a float kept per request, bucketed later)
was a visible share of a pipelined control request's cost, and this is a
fraction of it. Nothing here allocates per request.
"""

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef inline double _monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)  # the clock time.perf_counter reads on Linux
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


def now():
    """Seconds on the monotonic clock: the start of a duration ``since`` measures."""
    return _monotonic()


def check_bounds(bounds):
    """``bounds`` as a tuple of floats, or ValueError: finite, strictly ascending, at most MAX_BOUNDS."""
    out = tuple(float(b) for b in bounds)
    if not out or len(out) > MAX_BOUNDS:
        raise ValueError(f"a histogram takes 1 to {MAX_BOUNDS} bucket bounds, not {len(out)}")
    for i, b in enumerate(out):
        if b != b or b in (float("inf"), float("-inf")):
            raise ValueError(f"bucket bound {b!r} is not finite")
        if i and b <= out[i - 1]:
            raise ValueError("bucket bounds must be strictly ascending")
    return out


cdef class Histogram:
    """Counts per bucket (``value <= bound``, the last for +Inf) and the sum of the values observed."""

    def __init__(self, bounds):
        cdef Py_ssize_t i
        self.bounds = check_bounds(bounds)
        self._n = len(self.bounds)
        for i in range(self._n):
            self._bounds[i] = self.bounds[i]
        for i in range(self._n + 1):
            self._counts[i] = 0
        self.total = 0.0

    cdef void _observe(self, double value) noexcept:
        cdef Py_ssize_t i = 0
        while i < self._n and value > self._bounds[i]:  # short: a control request stops at the first
            i += 1
        self._counts[i] += 1
        self.total += value

    def observe(self, double value):
        self._observe(value)

    def counts(self):
        """Per-bucket counts, not cumulative; one more than ``bounds`` (+Inf last)."""
        return [self._counts[i] for i in range(self._n + 1)]

    def __repr__(self):
        return f"Histogram(bounds={self.bounds!r}, counts={self.counts()!r}, total={self.total!r})"


cdef class Timings:
    """One histogram of durations per method label, fed one C call per answer."""

    def __init__(self, bounds, label, watch=frozenset()):
        self._bounds = check_bounds(bounds)
        self._label = label
        self._watch = frozenset(watch)
        self._by = {}
        self.last = 0.0

    def since(self, str key, double started):
        """Record ``now() - started`` under ``key``'s label; True when ``key`` is watched (``last`` holds it)."""
        cdef double seconds = _monotonic() - started
        cdef object found = self._by.get(key)
        cdef Histogram h = self._histogram(key) if found is None else <Histogram>found
        h._observe(seconds)
        self.last = seconds
        return key in self._watch

    cdef Histogram _histogram(self, str key):
        label = self._label(key)
        found = self._by.get(label)
        h = Histogram(self._bounds) if found is None else <Histogram>found
        self._by[label] = h
        if label == key:  # a known name is kept under itself; others pay the label call each time
            self._by[key] = h
        return h

    def histograms(self):
        """``(label, Histogram)`` pairs, sorted by label."""
        return sorted(self._by.items())
