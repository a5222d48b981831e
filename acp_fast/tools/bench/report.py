"""What ``acp-fast bench`` prints: the table, the goals, the latency CDF plot and the run's metadata.

A target that could not take part in a scenario shows ``unsupported`` in its
cell, one that failed shows ``FAILED``; a goal whose comparison needs a
target that did not run, or a row it could not fill, is ``n/a``, never met.
"""

from __future__ import annotations

import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from .cancel_ignored import GOAL_OVER_GRACE_MS
from .cancel_ignored import describe as describe_cancel_ignored
from .process import log
from .runner import Options
from .scenarios import BUSY_STREAMS, PROMPTS_AT_ONCE
from .stats import PERCENTILE_DEFINITION, percentile
from .targets import BARE, BARE_IMPORTS, NO_HOOK_SCENARIO

# (label, scenario, key, lower is better, format)
ROWS: list[tuple[str, str, str, bool, str]] = [
    ("cancel idle p50 (us)", "cancel_idle", "p50_us", True, "{:,.0f}"),
    ("cancel idle p99 (us)", "cancel_idle", "p99_us", True, "{:,.0f}"),
    ("cancel idle max (us)", "cancel_idle", "max_us", True, "{:,.0f}"),
    ("cancel 31 busy p50 (us)", "cancel_busy", "p50_us", True, "{:,.0f}"),
    ("cancel 31 busy p99 (us)", "cancel_busy", "p99_us", True, "{:,.0f}"),
    ("cancel 31 busy max (us)", "cancel_busy", "max_us", True, "{:,.0f}"),
    ("set_mode idle p50 (us)", "control_idle", "p50_us", True, "{:,.0f}"),
    ("set_mode idle p99 (us)", "control_idle", "p99_us", True, "{:,.0f}"),
    ("set_mode 31 busy p50 (us)", "control_busy", "p50_us", True, "{:,.0f}"),
    ("set_mode 31 busy p99 (us)", "control_busy", "p99_us", True, "{:,.0f}"),
    ("pipelined set_mode (req/s)", "requests_per_s", "per_s", False, "{:,.0f}"),
    ("pipelined session/new (req/s)", "sessions_per_s", "per_s", False, "{:,.0f}"),
    ("pipelined session/new, no start hook (req/s)", NO_HOOK_SCENARIO, "per_s", False, "{:,.0f}"),
    ("pipelined set_mode, agent CPU (us/req)", "requests_per_s", "cpu_us", True, "{:,.2f}"),
    ("pipelined session/new, agent CPU (us/req)", "sessions_per_s", "cpu_us", True, "{:,.2f}"),
    ("pipelined session/new, no start hook, agent CPU (us/req)", NO_HOOK_SCENARIO, "cpu_us", True, "{:,.2f}"),
    ("updates/s, 1 prompt", "updates_per_s_1", "per_s", False, "{:,.0f}"),
    (f"updates/s, {PROMPTS_AT_ONCE} prompts", f"updates_per_s_{PROMPTS_AT_ONCE}", "per_s", False, "{:,.0f}"),
    ("handshake p50 (ms)", "handshake", "p50_ms", True, "{:,.1f}"),
    ("RSS at start (MiB)", "memory", "rss_start_mib", True, "{:,.1f}"),
    ("RSS per open session (KiB)", "memory", "per_session_kib", True, "{:,.2f}"),
    ("RSS per running prompt (KiB)", "memory", "per_prompt_kib", True, "{:,.1f}"),
    # --cancel-ignored: session/cancel -> answer when the agent swallows the cancel (bench/cancel_ignored.py)
    ("cancel, agent ignores it p50 (ms)", "cancel_ignored", "p50_ms", True, "{:,.1f}"),
    ("cancel, agent ignores it p99 (ms)", "cancel_ignored", "p99_ms", True, "{:,.1f}"),
    ("cancel, agent ignores it max (ms)", "cancel_ignored", "max_ms", True, "{:,.1f}"),
    # --hosting: over WebSocket (acp_fast: `demo --listen`; floor: a bare picows echo round trip)
    ("WS set-up: upgrade+initialize+session/new (/s)", "ws_setup_per_s", "per_s", False, "{:,.0f}"),
    ("WS RSS per idle connection (KiB)", "ws_idle_rss", "kib_per_conn", True, "{:,.1f}"),
    ("WS cancel p50 (us; floor: echo)", "ws_cancel", "p50_us", True, "{:,.0f}"),
    ("WS cancel p99 (us; floor: echo)", "ws_cancel", "p99_us", True, "{:,.0f}"),
    # the floor here: a bare picows+orjson agent answering the same prompts (bench/ws_floor.py)
    ("WS cancel p50 (us; floor: agent)", "ws_cancel_vs_agent", "p50_us", True, "{:,.0f}"),
    ("WS cancel p99 (us; floor: agent)", "ws_cancel_vs_agent", "p99_us", True, "{:,.0f}"),
    ("WS updates/s, 1 connection (floor: agent)", "ws_updates_1", "per_s", False, "{:,.0f}"),
    ("WS updates/s, 100 connections (floor: agent)", "ws_updates_100", "per_s", False, "{:,.0f}"),
    # the floor here: picows pushing pre-encoded frames in a loop, no per-update work
    ("WS updates/s, 1 connection (floor: pre-encoded push)", "ws_push_1", "per_s", False, "{:,.0f}"),
    ("WS updates/s, 100 connections (floor: pre-encoded push)", "ws_push_100", "per_s", False, "{:,.0f}"),
]


def _get(results: dict[str, dict[str, Any]], scenario: str, target: str, key: str) -> float | None:
    value = results.get(scenario, {}).get(target, {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def _cell(value: dict[str, Any] | None, key: str, fmt: str) -> str:
    if value is None:
        return "-"
    if "unsupported" in value:
        return "unsupported"
    if "error" in value:
        return "FAILED"
    v = value.get(key)
    if not isinstance(v, int | float):
        return str(value.get("note", "-"))  # what was seen instead: "no answer within 10 s"
    return fmt.format(v) + ("" if value.get("correct", True) else " (WRONG)")


def ratio_columns(names: Sequence[str]) -> list[tuple[str, str]]:
    """(numerator, denominator) pairs shown as ratio columns: acp_fast and each --agent against the SDKs and floor."""
    peers = ("sdk", "ts-sdk", "floor")
    tops = [n for n in names if n not in peers]
    return [(a, b) for a in tops for b in peers if b in names]


def table(results: dict[str, dict[str, Any]], names: Sequence[str]) -> str:
    ratios = ratio_columns(names)
    head = ["metric", *names, *(f"{a}/{b}" for a, b in ratios)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for label, scenario, key, _lower, fmt in ROWS:
        if scenario not in results:  # a run without --hosting, or --hosting alone
            continue
        per = results.get(scenario, {})
        cells = [label, *(_cell(per.get(n), key, fmt) for n in names)]
        cells += [_ratio(_get(results, scenario, a, key), _get(results, scenario, b, key)) for a, b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    bare = _get(results, "handshake", BARE, "p50_ms")
    if bare is not None:
        lines.append(f'| bare `python -c "{BARE_IMPORTS}"` p50 (ms) | {bare:,.1f} |' + " |" * (len(head) - 2))
    return "\n".join(lines)


def notes(results: dict[str, dict[str, Any]], names: Sequence[str], cheap: dict[str, str]) -> list[str]:
    """Lines under the table: the percentile definition, each target's control request, what it could not do."""
    out = [f"p50/p99: {PERCENTILE_DEFINITION}."]
    timed = [v["bursts"] for v in results.get("requests_per_s", {}).values() if "bursts" in v]
    if timed:
        out.append(
            f"pipelined rows: the median of {max(timed)} timed bursts per target, each after an untimed warm-up "
            "in its process (set_mode: one process per target, one warm-up burst; session/new: a fresh process "
            "per burst, an eighth of a burst first); targets take turns round by round, the same for every target."
        )
    if NO_HOOK_SCENARIO in results:
        out.append(
            "session/new, no start hook: the acp_fast column is the demo agent without its per-session "
            "available_commands_update (acp_fast/tools/bench/quiet_demo.py), same answer, same rounds; the floor "
            "column repeats the floor's session/new row. The session/new goal is read on the demo's row."
        )
    if "cancel_ignored" in results:
        out.extend(describe_cancel_ignored(results["cancel_ignored"]))
    if any(method != "session/set_mode" for method in cheap.values()):
        out.append("control request (set_mode rows): " + ", ".join(f"{n} {m}" for n, m in cheap.items()))
    for n in names:
        why: dict[str, list[str]] = {}
        for scenario, per in results.items():
            value = per.get(n) or {}
            reason = value.get("unsupported") or value.get("error")
            if reason:
                kind = "unsupported" if "unsupported" in value else "FAILED"
                why.setdefault(f"{kind}, {reason}", []).append(scenario)
        for reason, scenarios in why.items():
            kind, _, text = reason.partition(", ")
            out.append(f"{n}: {kind} {', '.join(scenarios)} ({text})")
    return out


#: Resamples behind a percentile goal's spread (a bootstrap of both targets' samples, fixed seed).
BOOTSTRAP_ROUNDS = 200
#: The share of resampled (or per-burst) ratios a goal's spread leaves out on each side.
SPREAD_TAIL = 0.05


@dataclass
class Goal:
    text: str
    met: bool | None
    detail: str
    #: The same-run ratio's spread (burst by burst for rates, a bootstrap for percentiles), if known.
    spread: tuple[float, float] | None = None
    #: Measured, but the spread straddles the goal: too noisy to call it met or missed.
    undecided: bool = False

    @property
    def mark(self) -> str:
        if self.undecided:
            return " ?? "
        return "n/a " if self.met is None else ("MET " if self.met else "MISS")


def _quantile(sorted_values: Sequence[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, max(0, round(share * (len(sorted_values) - 1))))]


def _spread(results: dict[str, dict[str, Any]], scenario: str, key: str, peer: str) -> tuple[float, float] | None:
    """Where the ratio acp_fast/peer lies in this run, beyond its single figure; None if unknown."""
    mine, other = results[scenario]["acp_fast"], results[scenario][peer]
    if key == "per_s":
        a, b = mine.get("per_s_bursts"), other.get("per_s_bursts")
        if not a or not b:
            return None
        ratios = sorted(x / y for x, y in zip(a, b, strict=False) if y)
        return (_quantile(ratios, SPREAD_TAIL), _quantile(ratios, 1 - SPREAD_TAIL)) if ratios else None
    a, b = mine.get("samples_us"), other.get("samples_us")
    if not a or not b or not key.startswith("p") or not key.endswith("_us"):
        return None
    q = int(key[1:-3])
    rng = random.Random(0)
    boot = []
    for _ in range(BOOTSTRAP_ROUNDS):
        x = percentile(rng.choices(a, k=len(a)), q)
        y = percentile(rng.choices(b, k=len(b)), q)
        if y:
            boot.append(x / y)
    boot.sort()
    return (_quantile(boot, SPREAD_TAIL), _quantile(boot, 1 - SPREAD_TAIL)) if boot else None


def goals(results: dict[str, dict[str, Any]]) -> list[Goal]:
    """The project's goals for acp_fast, each against a target measured in the same run; n/a without it."""
    out: list[Goal] = []
    ran = {t for per in results.values() for t, v in per.items() if "unsupported" not in v and "error" not in v}

    def bound(text: str, scenario: str, key: str, peer: str, limit: float, at_most: bool) -> None:
        absent = [t for t in ("acp_fast", peer) if t not in ran]
        mine, other = _get(results, scenario, "acp_fast", key), _get(results, scenario, peer, key)
        if absent or mine is None or other is None or other == 0:
            out.append(Goal(text, None, f"needs {' and '.join(absent)}" if absent else "not measured"))
            return
        r = mine / other
        detail = f"{r:.2f}x ({mine:,.1f} vs {other:,.1f})"
        spread = _spread(results, scenario, key, peer)
        if spread is None:
            out.append(Goal(text, r <= limit if at_most else r >= limit, detail))
            return
        lo, hi = spread
        detail += f", spread {lo:.2f}-{hi:.2f}x"
        ok_all, ok_none = (hi <= limit, lo > limit) if at_most else (lo >= limit, hi < limit)
        if ok_all or ok_none:
            out.append(Goal(text, ok_all, detail, spread))
        else:
            out.append(Goal(text, None, detail + ": straddles the goal, too noisy to judge", spread, undecided=True))

    for kind, label in (("cancel", "cancel"), ("control", "set_mode")):
        bound(f"{label} p99 idle <= 2x floor p99 idle", f"{kind}_idle", "p99_us", "floor", 2.0, True)
        busy = f"{label} p99 {BUSY_STREAMS}-busy <= 5x floor p99 {BUSY_STREAMS}-busy"
        bound(busy, f"{kind}_busy", "p99_us", "floor", 5.0, True)
    bound("pipelined requests/s >= 0.7x floor", "requests_per_s", "per_s", "floor", 0.7, False)
    bound("pipelined requests/s >= 5x sdk", "requests_per_s", "per_s", "sdk", 5.0, False)
    bound("pipelined session/new/s >= 0.5x floor", "sessions_per_s", "per_s", "floor", 0.5, False)
    bound("updates/s (1 prompt) >= 0.7x floor", "updates_per_s_1", "per_s", "floor", 0.7, False)
    n = PROMPTS_AT_ONCE
    bound(f"updates/s ({n} prompts) >= 0.7x floor", f"updates_per_s_{n}", "per_s", "floor", 0.7, False)
    if "ws_cancel" in results:
        bound("WS cancel p50 <= 2x WS echo floor p50", "ws_cancel", "p50_us", "floor", 2.0, True)
        bound("WS cancel p99 <= 2x WS echo floor p99", "ws_cancel", "p99_us", "floor", 2.0, True)
    for conns in (1, 100):
        if f"ws_updates_{conns}" in results:
            text = f"WS updates/s ({conns} connection{'s' * (conns > 1)}) >= 0.7x WS floor agent"
            bound(text, f"ws_updates_{conns}", "per_s", "floor", 0.7, False)
    out += _plain_goals(results, ran)
    return out


def _plain_goals(results: dict[str, dict[str, Any]], ran: set[str]) -> list[Goal]:
    """Goals judged on one number, without a spread: the ignored cancel, the handshake, the sdk rows, correctness."""
    out: list[Goal] = []
    if "cancel_ignored" in results:
        text = f"cancel, agent ignores it: p99 <= cancel_grace_s + {GOAL_OVER_GRACE_MS:g} ms"
        mine, grace = (
            _get(results, "cancel_ignored", "acp_fast", "p99_ms"),
            _get(results, "cancel_ignored", "acp_fast", "grace_ms"),
        )
        if mine is None or grace is None:
            out.append(Goal(text, None, "needs acp_fast"))
        else:
            out.append(Goal(text, mine <= grace + GOAL_OVER_GRACE_MS, f"{mine:,.1f} ms vs grace {grace:,.0f} ms"))
    mine, bare = _get(results, "handshake", "acp_fast", "p50_ms"), _get(results, "handshake", BARE, "p50_ms")
    if mine is not None and bare:
        out.append(Goal("handshake <= 1.3x bare python start", mine / bare <= 1.3, f"{mine / bare:.2f}x"))
    else:
        out.append(Goal("handshake <= 1.3x bare python start", None, "needs acp_fast"))
    behind, compared = [], 0
    for label, scenario, key, lower, _fmt in ROWS:
        m, o = _get(results, scenario, "acp_fast", key), _get(results, scenario, "sdk", key)
        if m is not None and o is not None:
            compared += 1
            if m > o if lower else m < o:
                behind.append(label)
    text = "no row where acp_fast is behind the sdk"
    if not compared:
        absent = [t for t in ("acp_fast", "sdk") if t not in ran]
        out.append(Goal(text, None, f"needs {' and '.join(absent)}" if absent else "no row measured on both"))
    else:
        out.append(Goal(text, not behind, ", ".join(behind) or f"none behind in {compared} rows"))
    wrong = [f"{sc}/{t}" for sc, per in results.items() for t, v in per.items() if not v.get("correct", True)]
    out.append(Goal("every answer was correct", not wrong, ", ".join(wrong) or "all correct"))
    return out


def plot(results: dict[str, dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not importable; no plot (pip install matplotlib)")
        return False
    panels = [
        ("cancel_idle", "cancel, idle"),
        ("cancel_busy", "cancel, 31 busy"),
        ("control_idle", "set_mode, idle"),
        ("control_busy", "set_mode, 31 busy"),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (scenario, title) in zip(axes.flat, panels, strict=True):
        for target, value in results.get(scenario, {}).items():
            xs = value.get("samples_us") or []
            if xs:
                ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=target, drawstyle="steps-post")
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("latency (us, log)")
        ax.set_ylabel("fraction of requests")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("acp-fast bench: latency CDF (request or cancel written -> answer read)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def meta(opts: Options, argv: Sequence[str], seconds: float, cheap: dict[str, str]) -> dict[str, Any]:
    try:
        uv: str | None = version("uvloop")
    except PackageNotFoundError:  # pragma: no cover
        uv = None
    return {
        "argv": list(argv),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg(),
        "uvloop": uv,
        "orjson": orjson.__version__,
        "sizes": opts.sizes.__dict__,
        "targets": {
            t.name: {"argv": list(t.argv), "description": t.description, "control_request": cheap.get(t.name)}
            for t in opts.targets
        },
        "percentiles": PERCENTILE_DEFINITION,
        "pinned": opts.pin,
        "seconds": seconds,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
