"""Per-request CPU of the inline path, in process: µs per pipelined request, optionally profiled.

    python benchmarks/per_request.py [--method set_mode|new|stream|prompt] [--impl acp_fast|compat] [--n 100000]
        [--chunk 256] [--profile] [--gc-default] [--metrics | --compare-metrics]

Feeds ``n`` pipelined requests, ``chunk`` lines per read, through the product
read path (ReadProtocol -> LineFramer -> Connection -> AgentServer with the
demo agent -> Writer) into an in-memory sink on uvloop, and prints the
median (and min) CPU µs per request over five runs. The collector is set up as
``acp-fast demo`` sets it (``gc.freeze`` and ``YOUNG_GC_THRESHOLD``, see
agent/serve.py) unless ``--gc-default`` keeps CPython's defaults. Issue 15's end-to-end numbers come from
``acp-fast bench``; this isolates the connection layer from the pipes.

``--method stream`` sends prompts of the demo's ``stream 1000 0`` (1,000
updates each, no pacing) instead, and reports CPU µs per update and updates
per CPU second. ``--method prompt`` sends ``stream 0 0`` prompts, one per
session on ``PROMPT_SESSIONS`` sessions per read (admission, task, answer: the
background path's cost per request). ``--impl compat`` serves the SDK demo agent
(acp_fast/bench/sdk_demo_agent.py) through ``acp_fast.compat`` instead of the
native demo agent. ``--metrics`` serves with Prometheus metrics on (the
connection's requests timed, as ``--metrics`` does); ``--compare-metrics``
alternates runs off and on in the same process and prints both medians, their
ratio and the median of the paired ratios (each on run against the off run
beside it, which cancels drift on a shared machine; issue 24's cost check).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dispatch import _close, _lines, _request, _setup

from acp_fast.agent.serve import YOUNG_GC_THRESHOLD


def _chunks(method: str, n: int, chunk: int, session: str, first_id: int) -> list[bytes]:
    if method == "set_mode":
        params = {"sessionId": session, "modeId": "code"}
        name = "session/set_mode"
    else:
        params = {"cwd": "/tmp", "mcpServers": []}
        name = "session/new"
    return [
        _lines([_request(first_id + i + j, name, params) for j in range(min(chunk, n - i))])
        for i in range(0, n, chunk)
    ]


STREAM_WORDS = 1000
PROMPT_SESSIONS = 32  # one prompt per session at a time (R07); the pool's default size (R08)


def _prompt_chunks(ids: list[str], n: int) -> list[bytes]:
    prompt = [{"type": "text", "text": "stream 0 0"}]
    rounds = max(1, n // len(ids))
    return [
        _lines(
            [
                _request(1000 + r * len(ids) + i, "session/prompt", {"sessionId": s, "prompt": prompt})
                for i, s in enumerate(ids)
            ]
        )
        for r in range(rounds)
    ]


def run(method: str, n: int, chunk: int, profile: bool, metrics: bool = False, impl: str = "acp_fast") -> float:
    w, ids = _setup("uvloop", impl, PROMPT_SESSIONS if method == "prompt" else 1)
    if metrics:
        from acp_fast.observability.metrics import Metrics

        assert w.server is not None
        Metrics().attach(None, w.server)
    if method == "stream":
        prompt = {"sessionId": ids[0], "prompt": [{"type": "text", "text": f"stream {STREAM_WORDS} 0"}]}
        chunks = [_lines([_request(1000 + i, "session/prompt", prompt)]) for i in range(max(1, n // STREAM_WORDS))]
        n = len(chunks) * STREAM_WORDS  # the cost is per update
    elif method == "prompt":
        chunks = _prompt_chunks(ids, n)
        n = len(chunks) * len(ids)
    else:
        chunks = _chunks(method, n, chunk, ids[0], 1000)
    sizes = [c.count(b"\n") for c in chunks]
    prof = cProfile.Profile() if profile else None
    t0 = time.process_time()  # CPU time: the shared machine makes wall time noisy
    if prof is not None:
        prof.enable()
    for c, k in zip(chunks, sizes, strict=True):
        got = w.round(c, k)
        assert len(got) == k and b'"result"' in got[-1], got[-1]
    if prof is not None:
        prof.disable()
    elapsed = time.process_time() - t0
    _close(w)
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return elapsed / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", choices=["set_mode", "new", "stream", "prompt"], default="set_mode")
    ap.add_argument("--impl", choices=["acp_fast", "compat"], default="acp_fast", help="native or an SDK agent")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--gc-default", action="store_true", help="keep CPython's collector settings")
    ap.add_argument("--metrics", action="store_true", help="with Prometheus metrics on")
    ap.add_argument("--compare-metrics", action="store_true", help="alternate runs with metrics off and on")
    a = ap.parse_args()
    if not a.gc_default:  # as the served agent runs (run_agent with freeze_gc, the CLI's default)
        gc.freeze()
        gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    if a.method == "new":
        a.n = min(a.n, 9000)  # one connection holds at most Limits.max_sessions (10,000)
    if a.profile:
        run(a.method, a.n, a.chunk, True, a.metrics, a.impl)
        return
    if a.compare_metrics:
        off: list[float] = []
        on: list[float] = []
        for _ in range(a.runs):  # interleaved, so drift on a shared machine hits both alike
            off.append(run(a.method, a.n, a.chunk, False, False, a.impl))
            on.append(run(a.method, a.n, a.chunk, False, True, a.impl))
        m_off, m_on = statistics.median(off), statistics.median(on)
        unit = "us CPU/update" if a.method == "stream" else "us CPU/request"
        print(f"{a.method}: metrics off median {m_off:.3f}, on {m_on:.3f} {unit}: {100 * (m_on / m_off - 1):+.1f} %")
        paired = statistics.median(b / o for o, b in zip(off, on, strict=True))  # each on run against the off beside it
        print(f"median of the {a.runs} paired ratios: {100 * (paired - 1):+.1f} %")
        if a.method == "stream":
            print(f"updates per CPU second: off {1e6 / m_off:,.0f}, on {1e6 / m_on:,.0f}")
        print(orjson.dumps({"method": a.method, "off": off, "on": on}).decode())
        return
    us = [run(a.method, a.n, a.chunk, False, a.metrics, a.impl) for _ in range(a.runs)]
    runs = ", ".join(f"{u:.3f}" for u in us)
    print(f"{a.method}: median {statistics.median(us):.3f}, min {min(us):.3f} us CPU/request (runs {runs})")
    print(orjson.dumps({"method": a.method, "median_us": statistics.median(us), "runs": us}).decode())


if __name__ == "__main__":
    main()
