"""Framer throughput under pytest-benchmark: Cython vs pure Python vs a split baseline.

    python -m pytest benchmarks/bench_framing.py --benchmark-only

One group per line size (100 B, 1 KiB, 64 KiB, 1 MiB, ~8 MiB of 64 KiB
chunks each, see framing_ratios.make_case). ``extra_info`` records whether
the line count was right and the lines/s and MB/s of the median run.
framing_ratios.py prints the same comparison as a markdown table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import pytest
from framing_ratios import SIZES, implementations, make_case

IMPLS = implementations()


@cache
def _case(payload: int) -> tuple[list[bytes], int]:
    return make_case(payload)


@pytest.mark.parametrize("impl", ["acp_fast-c", "acp_fast-py", "split"])
@pytest.mark.parametrize("label", list(SIZES))
def test_framing_throughput(benchmark: Any, label: str, impl: str) -> None:
    if impl not in IMPLS:
        pytest.fail("the Cython framer is not built (pip install -e .)")
    consume: Callable[[Sequence[bytes]], int] = IMPLS[impl]
    chunks, count = _case(SIZES[label])
    benchmark.group = f"framing {label} lines, 64 KiB chunks"
    lines = benchmark(consume, chunks)
    benchmark.extra_info["correct"] = lines == count
    benchmark.extra_info["lines"] = count
    if benchmark.stats is not None:
        median = benchmark.stats.stats.median
        benchmark.extra_info["lines_per_s"] = count / median
        benchmark.extra_info["mb_per_s"] = sum(map(len, chunks)) / 1e6 / median
    assert lines == count
