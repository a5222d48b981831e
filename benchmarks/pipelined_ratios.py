"""The pipelined rows of ``acp-fast bench`` alone, repeated: acp_fast demo against the echo floor.

    python benchmarks/pipelined_ratios.py [--reps 5] [--pipelined 15000] [--new-sessions 8000] [--bursts 5] [--pin]
        [--agent CMD [--label NAME]]...

Runs exactly the bench's pipelined phase (``Runner.pipelined``: set_mode in
one process per target after a warm-up burst, session/new in a fresh process
per burst after a warm-up share, targets taking turns, the median of the
timed bursts) ``--reps`` times, without the rest of the run, so one change to
the dispatch path can be measured before and after in about a minute. The
ratios are taken per repetition (acp_fast ÷ floor of the same repetition);
their medians and ranges are printed, and those of the agents' CPU time per
request (acp_fast ÷ floor: above 1 means acp_fast spends more), then the raw
figures as JSON. An ``--agent`` runs in the same rounds (the bench's test
protocol, see README.md) and gets its own set_mode and session/new ratios to
the floor, e.g. ``demo_bound_agent.py``, the least a Python agent can spend
on the demo's session/new.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace

import orjson
import uvloop

from acp_fast.tools.bench.probe import probe
from acp_fast.tools.bench.runner import FULL, Options, Runner
from acp_fast.tools.bench.targets import NO_HOOK_SCENARIO, select_targets

ROWS = {"set_mode": "requests_per_s", "session/new": "sessions_per_s", "session/new, no hook": NO_HOOK_SCENARIO}


async def _main(a: argparse.Namespace) -> None:
    sizes = replace(FULL, pipelined=a.pipelined, new_sessions=a.new_sessions, bursts=a.bursts)
    labels: list[str | None] = [*a.label, *[None] * (len(a.agent) - len(a.label))]
    targets = select_targets(["acp_fast", "floor"], list(zip(a.agent, labels, strict=False)))
    extra = [t.name for t in targets if t.external]
    runner = Runner(Options(sizes, targets, pin=a.pin))
    for t in runner.opts.targets:
        runner.support[t.name] = await probe(t, 10.0)
    ratios: dict[str, list[float]] = {row: [] for row in ROWS}
    ratios.update({f"{row} {name}": [] for name in extra for row in ("set_mode", "session/new")})
    cpu: dict[str, list[float]] = {row: [] for row in ROWS}
    raw: list[dict[str, float]] = []
    for rep in range(a.reps):
        runner.results.clear()
        await runner.pipelined()
        got: dict[str, float] = {}
        for row, scenario in ROWS.items():
            per = runner.results[scenario]
            if not (per["acp_fast"]["correct"] and per["floor"]["correct"]):
                raise SystemExit(f"{row}: wrong answers in repetition {rep + 1}")
            mine, floor = per["acp_fast"]["per_s"], per["floor"]["per_s"]
            ratios[row].append(mine / floor)
            got[f"acp_fast {row}"], got[f"floor {row}"] = mine, floor
            for who in ("acp_fast", "floor"):
                if "driver_cpu_us" in per[who]:
                    got[f"driver for {who} {row} cpu_us"] = per[who]["driver_cpu_us"]
            if "cpu_us" in per["acp_fast"] and "cpu_us" in per["floor"]:
                mine_cpu, floor_cpu = per["acp_fast"]["cpu_us"], per["floor"]["cpu_us"]
                cpu[row].append(mine_cpu / floor_cpu)
                got[f"acp_fast {row} cpu_us"], got[f"floor {row} cpu_us"] = mine_cpu, floor_cpu
        for name in extra:
            for row in ("set_mode", "session/new"):
                theirs = runner.results[ROWS[row]].get(name, {})
                if theirs.get("correct") and "per_s" in theirs:
                    ratios[f"{row} {name}"].append(theirs["per_s"] / got[f"floor {row}"])
                    got[f"{name} {row}"] = theirs["per_s"]
                    if "cpu_us" in theirs:
                        got[f"{name} {row} cpu_us"] = theirs["cpu_us"]
                    if "driver_cpu_us" in theirs:
                        got[f"driver for {name} {row} cpu_us"] = theirs["driver_cpu_us"]
        raw.append(got)
        print(f"rep {rep + 1}: " + "; ".join(f"{row} {r[-1]:.2f}x" for row, r in ratios.items()), file=sys.stderr)
    for row, values in ratios.items():
        if not values:
            continue
        who = "acp_fast" if row in ROWS else row.rsplit(" ", 1)[1]
        print(
            f"{row}: {who}/floor median {statistics.median(values):.2f}x "
            f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} reps)"
        )
        if cpu.get(row):
            c = cpu[row]
            print(f"{row}: agent CPU per request, acp_fast/floor median {statistics.median(c):.2f}x "
                  f"(range {min(c):.2f}-{max(c):.2f})")
    med = {k: statistics.median(r[k] for r in raw) for k in raw[0]}
    print("median req/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items()))
    print(orjson.dumps({"ratios": ratios, "raw": raw}).decode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pipelined", type=int, default=FULL.pipelined)
    ap.add_argument("--new-sessions", type=int, default=FULL.new_sessions)
    ap.add_argument("--bursts", type=int, default=FULL.bursts)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--agent", action="append", default=[], help="also run this agent command (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="column name of the --agent of the same rank")
    uvloop.run(_main(ap.parse_args()))


if __name__ == "__main__":
    main()
