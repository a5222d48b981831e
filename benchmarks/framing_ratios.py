"""Framer throughput ratios as a markdown table: Cython vs a split baseline and vs pure Python.

    python benchmarks/framing_ratios.py [--repeat 15] [--cpu 1]

Each case is ~8 MiB of lines of one payload size (100 B, 1 KiB, 64 KiB,
1 MiB, each plus b"\\n", so lines drift across chunk boundaries) pre-cut into
64 KiB bytes chunks. Every implementation consumes the same chunks; the
reported time is the median of ``--repeat`` runs, and the line count is
checked so a wrong implementation cannot look fast. bench_framing.py times
the same cases under pytest-benchmark.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from collections.abc import Callable, Sequence

from acp_fast.wire import _framing_py

try:
    from acp_fast.wire import _framing as _framing_c
except ImportError:
    _framing_c = None  # type: ignore[assignment]

CHUNK = 64 * 1024
TOTAL = 8 * 1024 * 1024
SIZES = {"100 B": 100, "1 KiB": 1024, "64 KiB": 64 * 1024, "1 MiB": 1024 * 1024}


def make_case(payload: int) -> tuple[list[bytes], int]:
    """Chunks of ~TOTAL bytes of JSON-looking lines of ``payload`` bytes, and the line count."""
    prefix = b'{"jsonrpc":"2.0","method":"session/update","params":"'
    line = prefix + b"x" * (payload - len(prefix) - 2) + b'"}\n'
    count = max(1, TOTAL // len(line))
    stream = line * count
    return [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)], count


def framer_consumer(cls: type) -> Callable[[Sequence[bytes]], int]:
    """Feed every chunk to a fresh framer; return how many lines came out."""

    def consume(chunks: Sequence[bytes]) -> int:
        framer = cls()
        lines = 0
        for chunk in chunks:
            lines += len(framer.feed(chunk))
        framer.close()
        return lines

    return consume


def split_consumer(chunks: Sequence[bytes]) -> int:
    """Baseline: ``chunk.split(b"\\n")`` per chunk, carrying the partial last piece.

    The pieces of a line cut by chunk boundaries are collected in a list and
    joined once its ``\\n`` arrives (no quadratic concatenation). It does less
    than a framer: no ``\\r`` stripping, no empty-line skipping, no limit, and
    it copies every line into new bytes.
    """
    lines = 0
    pending: list[bytes] = []
    for chunk in chunks:
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            pending.append(chunk)
            continue
        if pending:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            pending = []
        tail = parts.pop()
        if tail:
            pending.append(tail)
        lines += len(parts)
    return lines


def implementations() -> dict[str, Callable[[Sequence[bytes]], int]]:
    impls = {"split": split_consumer, "acp_fast-py": framer_consumer(_framing_py.LineFramer)}
    if _framing_c is not None:
        impls["acp_fast-c"] = framer_consumer(_framing_c.LineFramer)
    return impls


def median_seconds(fn: Callable[[Sequence[bytes]], int], chunks: list[bytes], repeat: int) -> float:
    runs = timeit.repeat(lambda: fn(chunks), number=1, repeat=repeat)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--cpu", type=int, help="pin to this CPU (Linux)")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    impls = implementations()
    if "acp_fast-c" not in impls:
        print("the Cython framer is not built (pip install -e .)", file=sys.stderr)
        return 1
    columns = ["line size", "lines", "split MB/s", "C MB/s", "Python MB/s", "C lines/s"]
    print("| " + " | ".join([*columns, "C / split", "C / Python"]) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, payload in SIZES.items():
        chunks, count = make_case(payload)
        mb = sum(map(len, chunks)) / 1e6
        t: dict[str, float] = {}
        for name, fn in impls.items():
            got = fn(chunks)
            if got != count:
                raise AssertionError(f"{name} framed {got} lines of {label}, expected {count}")
            t[name] = median_seconds(fn, chunks, args.repeat)
        c, py, split = t["acp_fast-c"], t["acp_fast-py"], t["split"]
        print(
            f"| {label} | {count} | {mb / split:,.0f} | {mb / c:,.0f} | {mb / py:,.0f} "
            f"| {count / c:,.0f} | {split / c:.2f}x | {py / c:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
