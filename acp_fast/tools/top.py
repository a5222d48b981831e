"""``acp-fast top URL``: a running host's ``/metrics`` as a terminal view, refreshed every second.

It reads the same exposition Prometheus scrapes (so it needs the metrics
extra for the parser), keeps the previous scrape, and shows rates and
percentiles over the interval between the two: requests per second, p50/p99
by method (interpolated inside the histogram's buckets, as Prometheus'
``histogram_quantile`` does), the cancel latency, errors and refusals, next
to the gauges (connections, sessions, running prompts, pool slots, buffered
output, event-loop lag). Ctrl-C ends it with exit status 0; ``--once`` prints
one frame (two scrapes an interval apart) and exits, for scripts and tests.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

#: Seconds one scrape may take before the frame says the host is unreachable.
SCRAPE_TIMEOUT_S = 5.0
_CLEAR = "\x1b[H\x1b[2J"

Labels = tuple[tuple[str, str], ...]


@dataclass
class Scrape:
    """One exposition, by metric sample name and label set."""

    at: float
    samples: dict[str, dict[Labels, float]] = field(default_factory=lambda: defaultdict(dict))

    def get(self, name: str, **labels: str) -> float:
        return self.samples.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def total(self, name: str) -> float:
        return sum(self.samples.get(name, {}).values())


def scrape(url: str) -> Scrape:
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as resp:
        text = resp.read().decode()
    out = Scrape(time.monotonic())
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.samples[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def _buckets(s: Scrape, family: str, labels: dict[str, str]) -> list[tuple[float, float]]:
    """Cumulative (upper bound, count) pairs of one histogram series."""
    out = []
    for key, count in s.samples.get(family + "_bucket", {}).items():
        d = dict(key)
        le = d.pop("le", None)
        if le is not None and d == labels:
            out.append((math.inf if le == "+Inf" else float(le), count))
    return sorted(out)


def quantile(q: float, now: list[tuple[float, float]], before: list[tuple[float, float]]) -> float | None:
    """The q-quantile of the observations between two scrapes, interpolated linearly inside its bucket."""
    prior = dict(before)
    delta = [(le, count - prior.get(le, 0.0)) for le, count in now]
    if not delta or delta[-1][1] <= 0:
        return None
    rank = q * delta[-1][1]
    lower, below = 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if math.isinf(le):
                return lower  # beyond the last finite bound: that bound is all we know
            span = count - below
            return lower + (le - lower) * ((rank - below) / span if span else 1.0)
        lower, below = le, count
    return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def frame(url: str, now: Scrape, before: Scrape) -> str:
    """The text of one view, from two scrapes."""
    dt = max(now.at - before.at, 1e-9)
    g = now.get
    lines = [
        f"acp-fast top  {url}  {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC  (every {dt:.1f} s)",
        f"connections  websocket {g('acp_connections', transport='websocket'):.0f}  "
        f"http {g('acp_connections', transport='http'):.0f}  stdio {g('acp_connections', transport='stdio'):.0f}"
        f"    sessions  attached {g('acp_sessions', state='attached'):.0f}  "
        f"parked {g('acp_sessions', state='parked'):.0f}",
        f"running prompts {g('acp_running_prompts'):.0f}   pool slots {g('acp_pool_slots_in_use'):.0f}   "
        f"readers paused {g('acp_readers_paused'):.0f}   output buffered {_bytes(g('acp_output_buffered_bytes'))}   "
        f"loop lag {_duration(g('acp_event_loop_lag_last_seconds'))}"
        + ("   DRAINING" if g("acp_draining") else ""),
    ]
    counts = "acp_request_duration_seconds_count"
    rows: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: {"ok": 0.0, "err": 0.0})
    for key, value in now.samples.get(counts, {}).items():
        d = dict(key)
        delta = value - before.samples.get(counts, {}).get(key, 0.0)
        rows[(d.get("method", "?"), d.get("lane", "?"))]["ok" if d.get("outcome") == "ok" else "err"] += delta
    total = sum(r["ok"] + r["err"] for r in rows.values())
    errors = sum(r["err"] for r in rows.values())
    refused = {
        dict(k).get("reason", "?"): v - before.samples.get("acp_requests_refused_total", {}).get(k, 0.0)
        for k, v in now.samples.get("acp_requests_refused_total", {}).items()
    }
    shown = ", ".join(f"{k} {v:.0f}" for k, v in sorted(refused.items()) if v) or "none"
    lines.append(f"requests/s {total / dt:,.1f}   errors/s {errors / dt:,.1f}   refused in interval: {shown}")
    lines.append("")
    lines.append(f"{'method':<28}{'lane':<12}{'req/s':>10}{'p50':>12}{'p99':>12}{'errors':>8}")
    for (method, lane), r in sorted(rows.items(), key=lambda kv: -(kv[1]["ok"] + kv[1]["err"])):
        labels = {"method": method, "lane": lane, "outcome": "ok"}
        b_now = _buckets(now, "acp_request_duration_seconds", labels)
        b_before = _buckets(before, "acp_request_duration_seconds", labels)
        p50, p99 = quantile(0.5, b_now, b_before), quantile(0.99, b_now, b_before)
        lines.append(
            f"{method:<28}{lane:<12}{(r['ok'] + r['err']) / dt:>10,.1f}{_duration(p50):>12}{_duration(p99):>12}"
            f"{r['err']:>8.0f}"
        )
    c_now = _buckets(now, "acp_cancel_latency_seconds", {})
    c_before = _buckets(before, "acp_cancel_latency_seconds", {})
    cancels = (c_now[-1][1] if c_now else 0) - (c_before[-1][1] if c_before else 0)
    lines.append("")
    lines.append(
        f"cancel latency  p50 {_duration(quantile(0.5, c_now, c_before))}  "
        f"p99 {_duration(quantile(0.99, c_now, c_before))}  ({cancels:.0f} in interval)"
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="acp-fast top", description="A live view of a host's /metrics.")
    parser.add_argument("url", help="the metrics URL, e.g. http://127.0.0.1:8000/metrics (a bare HOST:PORT works)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    parser.add_argument("--once", action="store_true", help="print one frame (two scrapes an interval apart), exit")
    args = parser.parse_args(argv)
    url = args.url if "://" in args.url else f"http://{args.url}"
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    try:
        before = scrape(url)
        while True:
            time.sleep(args.interval)
            now = scrape(url)
            text = frame(url, now, before)
            before = now
            if args.once:
                sys.stdout.write(text)
                return 0
            sys.stdout.write(_CLEAR + text)
            sys.stdout.flush()
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 0
    except (urllib.error.URLError, OSError, ValueError) as exc:
        sys.stderr.write(f"acp-fast top: cannot read {url}: {exc}\n")
        return 1


__all__ = ["frame", "main", "quantile", "scrape"]
