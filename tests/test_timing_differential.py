"""The compiled request timings and their pure-Python spec agree.

``observability/_timing.pyx`` does per answered request what
``_timing_py.py`` says: the same buckets (``value <= bound``, +Inf last),
the same sums, the same labels and watched names, the same refusals of bad
bounds. Durations go through ``since`` with a start read from each twin's own
clock, so the vectors are values handed to ``Histogram.observe`` plus the
label and watch behaviour of ``Timings``.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.observability import _timing_py, timing
from acp_fast.observability.metrics import REQUEST_BUCKETS, buckets, method_label

try:
    from acp_fast.observability import _timing as _timing_c
except ImportError:  # pragma: no cover - the CI build always has it
    _timing_c = None  # type: ignore[assignment]

pytestmark = pytest.mark.c_extension

BOUNDS = (0.0001, 0.001, 0.01, 1.0)
#: Each bound, either side of it, and the values past both ends.
EDGES = [v for b in BOUNDS for v in (b, b * (1 - 1e-12), b * (1 + 1e-12))] + [-1.0, 0.0, 1e9, float("inf")]


def _twins() -> list[ModuleType]:
    assert _timing_c is not None, "the compiled timings are not built"
    return [_timing_c, _timing_py]


def _state(h: Any) -> tuple[tuple[float, ...], list[int], float]:
    return h.bounds, h.counts(), h.total


def test_the_live_implementation_is_the_compiled_one() -> None:
    assert timing.IMPLEMENTATION == "c"
    assert timing.Timings.__module__ == timing.Histogram.__module__ == "acp_fast.observability._timing"


def test_edges_land_in_the_same_buckets() -> None:
    states = []
    for mod in _twins():
        h = mod.Histogram(BOUNDS)
        for v in EDGES:
            h.observe(v)
        states.append(_state(h))
    assert states[0] == states[1]
    counts = states[0][1]
    assert counts == [4, 3, 3, 3, 3]  # a value equal to a bound is in that bound's bucket
    assert sum(counts) == len(EDGES)


@settings(max_examples=300, deadline=None)
@given(
    bounds=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=32, unique=True).map(sorted),
    values=st.lists(st.floats(allow_nan=False), max_size=60),
)
def test_any_values_agree(bounds: list[float], values: list[float]) -> None:
    c, py = (mod.Histogram(bounds) for mod in _twins())
    for v in values:
        c.observe(v)
        py.observe(v)
    assert c.counts() == py.counts()
    assert c.total == py.total or (c.total != c.total and py.total != py.total)  # the same sum, NaN included


@pytest.mark.parametrize(
    "bounds",
    [(), tuple(float(i) for i in range(33)), (1.0, 1.0), (2.0, 1.0), (float("nan"),), (1.0, float("inf"))],
    ids=["empty", "33 bounds", "repeated", "descending", "nan", "inf"],
)
def test_bad_bounds_are_refused_alike(bounds: tuple[float, ...]) -> None:
    messages = []
    for mod in _twins():
        with pytest.raises(ValueError) as caught:
            mod.Histogram(bounds)
        with pytest.raises(ValueError):
            mod.Timings(bounds, method_label)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_timings_label_watch_and_last_alike() -> None:
    names = ["session/set_mode", "session/prompt", "_x/one", "_x/two", "nope", "session/set_mode", "initialize"]
    seen = []
    for mod in _twins():
        t = mod.Timings(REQUEST_BUCKETS, method_label, {"session/prompt"})
        watched = []
        for name in names:
            watched.append(t.since(name, mod.now() - 0.03))
            assert t.last >= 0.03
        hs = t.histograms()
        seen.append((watched, [(label, sum(h.counts())) for label, h in hs]))
        for _label, h in hs:  # each answer 30 ms or more after its start: no bucket below 30 ms holds any
            below = [n for bound, n in zip(REQUEST_BUCKETS, h.counts(), strict=False) if bound < 0.03]
            assert sum(below) == 0 and sum(h.counts()) > 0
    assert seen[0] == seen[1]
    watched, counted = seen[0]
    assert watched == [False, True, False, False, False, False, False]
    # unknown names share bounded labels; no label is a raw unknown name
    assert counted == [
        ("_extension", 2),
        ("initialize", 1),
        ("session/prompt", 1),
        ("session/set_mode", 2),
        ("unknown", 1),
    ]


def test_both_clocks_are_the_monotonic_clock() -> None:
    for mod in _twins():
        before = time.monotonic()
        reading = mod.now()
        after = time.monotonic()
        assert before - 0.001 <= reading <= after + 0.001, (mod.__name__, before, reading, after)


def test_buckets_are_cumulative_with_inf_last() -> None:
    for mod in _twins():
        h = mod.Histogram(BOUNDS)
        for v in (0.00005, 0.0005, 0.0005, 5.0):
            h.observe(v)
        assert buckets(h) == [("0.0001", 1), ("0.001", 3), ("0.01", 3), ("1.0", 3), ("+Inf", 4)]
