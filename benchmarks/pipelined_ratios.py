"""Pipelined set_mode and session/new, acp_fast demo against the echo floor, in one run.

    python benchmarks/pipelined_ratios.py [--reps 5] [--pipelined 30000] [--new-sessions 8000] [--pin]

The two throughput rows of ``acp-fast bench`` (same driver, same scenario
functions, same counts as the full run) without the rest of the run, so one
change to the dispatch path can be measured before and after in a minute.
Each repetition spawns a fresh process per target, alternating the targets,
and the ratios are taken per repetition (acp_fast ÷ floor of the same
repetition); the medians and spreads of those are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import orjson
import uvloop

from acp_fast.bench.probe import probe
from acp_fast.bench.process import AgentProcess
from acp_fast.bench.scenarios import throughput_requests, throughput_sessions
from acp_fast.bench.targets import builtin_targets


async def _one(target_name: str, pipelined: int, new_sessions: int, pin: bool) -> tuple[float, float]:
    target = builtin_targets(sys.executable)[target_name]
    sup = await probe(target, 10.0)
    rates: list[float] = []
    for scenario in ("requests", "sessions"):
        a = AgentProcess(target, 60.0)
        await a.start(pin_cpu=1 if pin else None)
        try:
            _, sid = await a.handshake()
            if scenario == "requests":
                rate = await throughput_requests(a, sid, pipelined, sup)
            else:
                rate = await throughput_sessions(a, new_sessions)
            if not rate.correct:
                raise RuntimeError(f"{target_name} {scenario}: wrong answers")
            rates.append(rate.count / rate.seconds)
        finally:
            await a.close()
    return rates[0], rates[1]


async def _main(a: argparse.Namespace) -> None:
    rows: dict[str, list[float]] = {"set_mode": [], "session/new": []}
    raw: list[dict[str, float]] = []
    for rep in range(a.reps):
        order = ("acp_fast", "floor") if rep % 2 == 0 else ("floor", "acp_fast")
        got = {name: await _one(name, a.pipelined, a.new_sessions, a.pin) for name in order}
        (fr, fs), (lr, ls) = got["acp_fast"], got["floor"]
        rows["set_mode"].append(fr / lr)
        rows["session/new"].append(fs / ls)
        raw.append({"acp_fast_set_mode": fr, "floor_set_mode": lr, "acp_fast_new": fs, "floor_new": ls})
        print(
            f"rep {rep + 1}: set_mode {fr:,.0f} vs {lr:,.0f} req/s ({fr / lr:.2f}x); "
            f"session/new {fs:,.0f} vs {ls:,.0f} req/s ({fs / ls:.2f}x)",
            file=sys.stderr,
            flush=True,
        )
    for name, ratios in rows.items():
        print(
            f"{name}: acp_fast/floor median {statistics.median(ratios):.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} reps)"
        )
    med = {k: statistics.median(r[k] for r in raw) for k in raw[0]}
    print("median req/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items()))
    print(orjson.dumps({"ratios": rows, "raw": raw}).decode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pipelined", type=int, default=30000)
    ap.add_argument("--new-sessions", type=int, default=8000)
    ap.add_argument("--pin", action="store_true")
    uvloop.run(_main(ap.parse_args()))


if __name__ == "__main__":
    main()
