"""How much `acp-fast bench` moves between runs: the spread table and how often each goal was met.

    python benchmarks/spread.py bench-results/run1.json bench-results/run2.json ...

Reads the JSON of several full runs (``acp-fast bench --json FILE``) and prints,
per row of the bench's table, the range and median of each same-run ratio
(acp_fast against the SDK and the floor), of acp_fast's value and of the
floor's, then for each goal the number of runs that met it. An ``--agent``
column found in every run (``--label bound``, say) gets its own ratio to the
floor. Ratios are taken
within a run and only then summarised, so a slow machine in one run does not
mix with a fast one in another.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import orjson

from acp_fast.tools.bench.report import ROWS, goals


def _value(results: dict[str, Any], scenario: str, target: str, key: str) -> float | None:
    cell = results.get(scenario, {}).get(target, {})
    value = cell.get(key) if isinstance(cell, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _span(values: list[float], fmt: str, unit: str = "") -> str:
    if not values:
        return "-"
    low, high, mid = min(values), max(values), statistics.median(values)
    return f"{fmt.format(mid)}{unit} ({fmt.format(low)} to {fmt.format(high)}{unit})"


def _ratio_span(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} to {max(values):.2f}x (median {statistics.median(values):.2f})"


def main(paths: list[str]) -> int:
    if len(paths) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    runs = [orjson.loads(Path(p).read_bytes())["results"] for p in paths]
    # ``--agent`` columns present in every run get a column of their own ratio to the floor.
    names = [
        {t for cells in r.values() if isinstance(cells, dict) for t in cells} - {"acp_fast", "sdk", "floor", "bare"}
        for r in runs
    ]
    extra = sorted(set.intersection(*names)) if names else []
    print(f"{len(runs)} runs; each cell: median (range); ratios are taken within a run\n")
    heads = "".join(f" {x} ÷ floor |" for x in extra)
    print("| metric | acp_fast ÷ sdk | acp_fast ÷ floor | acp_fast | floor |" + heads)
    print("|---|---|---|---|---|" + "---|" * len(extra))
    for label, scenario, key, _lower, fmt in ROWS:
        if not any(scenario in r for r in runs):
            continue
        ours, floor, vs_sdk, vs_floor = [], [], [], []
        for r in runs:
            a, s, f = (_value(r, scenario, t, key) for t in ("acp_fast", "sdk", "floor"))
            if a is not None:
                ours.append(a)
            if f is not None:
                floor.append(f)
            if a is not None and s:
                vs_sdk.append(a / s)
            if a is not None and f:
                vs_floor.append(a / f)
        cells = [label, _ratio_span(vs_sdk), _ratio_span(vs_floor), _span(ours, fmt), _span(floor, fmt)]
        for x in extra:
            pairs = ((_value(r, scenario, x, key), _value(r, scenario, "floor", key)) for r in runs)
            cells.append(_ratio_span([v / f for v, f in pairs if v is not None and f]))
        print("| " + " | ".join(cells) + " |")
    print()
    counts: dict[str, list[bool | None]] = {}
    for r in runs:
        for goal in goals(r):
            counts.setdefault(goal.text, []).append(goal.met)
    for text, mets in counts.items():
        print(f"- {text}: met in {sum(1 for m in mets if m)} of {len(mets)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
