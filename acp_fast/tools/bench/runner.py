"""The run: probe every target, then the same scenarios on each, in the same order, side by side.

A scenario a target cannot take part in (see probe.py) is recorded as
``{"unsupported": reason}``; one that fails while measured (an error answer,
a closed pipe, a wait past its timeout) as ``{"correct": false, "error":
reason}``, after which the process is killed and the next scenario gets a
fresh one. Either way the run goes on: one bad target costs its own rows.

The pipelined rows run apart from the others, in fresh processes, with an
untimed warm-up burst and interleaved timed bursts for every target alike
(see Runner.pipelined).
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from .probe import ENDLESS, NEW_SESSION, PROBE_TIMEOUT_S, Support, probe
from .process import WAIT_TIMEOUT_S, AgentProcess, BenchError, log, prompt_params
from .scenarios import (
    BUSY_STREAMS,
    IDLE_PROMPT_DELAY_MS,
    PROMPTS_AT_ONCE,
    barrier,
    cancel_rounds,
    control_rounds,
    start_busy,
    stop_prompts,
    throughput_requests,
    throughput_sessions,
    throughput_updates,
)
from .stats import Bursts, Rate, percentile
from .targets import BARE, BARE_IMPORTS, NO_HOOK_SCENARIO, Target, quiet_demo_target


@dataclass(frozen=True)
class Sizes:
    cancels: int
    controls: int
    pipelined: int
    updates_one: int
    updates_each: int
    sessions: int
    new_sessions: int
    handshakes: int
    ws_connections: int
    bursts: int
    #: Rounds of "cancel, agent ignores it" (--cancel-ignored; the SDK column runs at most 3: ~4 s each).
    ignored_cancels: int = 30


QUICK = Sizes(
    cancels=40,
    controls=40,
    pipelined=4000,
    updates_one=8000,
    updates_each=250,
    sessions=200,
    new_sessions=2000,
    handshakes=3,
    ws_connections=200,
    bursts=3,
    ignored_cancels=5,
)
# pipelined and new_sessions are per timed burst, `bursts` of them per row (Runner.pipelined).
# A session/new burst runs in its own process after an untimed warm-up share, and its sessions stay
# open: new_sessions stays under acp_fast's default of 10,000 sessions per connection (session_budget).
FULL = Sizes(
    cancels=300,
    controls=300,
    pipelined=15000,
    updates_one=60000,
    updates_each=2000,
    sessions=2000,
    new_sessions=8000,
    handshakes=10,
    ws_connections=2000,
    bursts=5,
)


#: Sessions a session/new process opens untimed before its timed burst, as a share of the burst.
SESSION_WARMUP_SHARE = 8


def warmup_sessions(sizes: Sizes) -> int:
    return max(1, sizes.new_sessions // SESSION_WARMUP_SHARE)


def session_budget(sizes: Sizes) -> int:
    """Sessions one process of the session/new row holds at its end (the handshake's included)."""
    return warmup_sessions(sizes) + sizes.new_sessions + 1


@dataclass(frozen=True)
class Options:
    sizes: Sizes
    targets: list[Target]
    pin: bool = False
    seed: int = 1
    timeout: float = WAIT_TIMEOUT_S
    probe_timeout: float = PROBE_TIMEOUT_S


#: One measured step: (process, its first session id, the scenarios it may run) -> results by scenario.
Step = Callable[[AgentProcess, str, Collection[str]], Awaitable[dict[str, dict[str, Any]]]]
#: One burst of a pipelined row: (process, its first session id, its support) -> the burst's rate.
Burst = Callable[[AgentProcess, str, Support], Awaitable[Rate]]


@dataclass(frozen=True)
class Lane:
    """One process's part in a pipelined row: which target runs, and where its result goes."""

    target: Target
    scenario: str
    column: str
    support: Support


class Runner:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.results: dict[str, dict[str, Any]] = {}
        self.support: dict[str, Support] = {}
        self.failures = 0
        self.rng = random.Random(opts.seed)

    def put(self, scenario: str, target: str, value: dict[str, Any]) -> None:
        self.results.setdefault(scenario, {})[target] = value
        shown = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in value.items() if k != "samples_us"}
        log(f"  {target:9} {scenario}: {shown}")

    def unsupported(self, scenario: str, target: str, why: str) -> None:
        self.results.setdefault(scenario, {})[target] = {"unsupported": why}

    def failed(self, scenario: str, target: str, why: str) -> None:
        self.failures += 1
        self.results.setdefault(scenario, {})[target] = {"correct": False, "error": why}
        log(f"  {target:9} {scenario}: FAILED {why}")

    async def spawn(self, target: Target) -> tuple[AgentProcess, str]:
        a = AgentProcess(target, self.opts.timeout)
        await a.start(pin_cpu=1 if self.opts.pin else None)
        try:
            _, sid = await a.handshake()
        except BenchError:
            await a.close(grace=0.0)
            raise
        return a, sid

    async def finish(self, a: AgentProcess) -> None:
        code = await a.close()
        if code not in (0, None):
            log(f"{a.target.name} exited with {code}; stderr tail:\n{a.stderr_tail()}")

    async def run(self) -> None:
        if self.opts.pin:
            os.sched_setaffinity(0, {0})
        for t in self.opts.targets:
            log(f"{t.name}: probing what it supports")
            self.support[t.name] = await probe(t, self.opts.probe_timeout)
        log("handshake vs bare python start")
        await self.handshakes(self.opts.sizes.handshakes)
        for t in self.opts.targets:
            log(f"{t.name}: idle latency and update throughput")
            await self.steps(t, self.idle_steps())
        log(f"pipelined requests: 1 warm-up and {self.opts.sizes.bursts} timed bursts per target, interleaved")
        await self.pipelined()
        for t in self.opts.targets:
            log(f"{t.name}: latency with {BUSY_STREAMS} sessions streaming at full speed")
            await self.steps(t, [(("cancel_busy", "control_busy"), self.busy)])
        for t in self.opts.targets:
            log(f"{t.name}: memory")
            await self.steps(t, [(("memory",), self.memory)])

    async def steps(self, t: Target, steps: list[tuple[tuple[str, ...], Step]]) -> None:
        """Run ``steps`` in one process of ``t``, skipping what it lacks, respawning after a failure."""
        sup = self.support[t.name]
        a: AgentProcess | None = None
        sid = ""
        try:
            for scenarios, step in steps:
                runnable = []
                for scenario in scenarios:
                    why = sup.why_not(scenario)
                    if why is None:
                        runnable.append(scenario)
                    else:
                        self.unsupported(scenario, t.name, why)
                if not runnable:
                    continue
                try:
                    if a is None:
                        a, sid = await self.spawn(t)
                    values = await step(a, sid, runnable)
                except BenchError as exc:
                    for scenario in runnable:
                        self.failed(scenario, t.name, str(exc).split("; stderr tail:")[0])
                    if a is not None:
                        await a.close(grace=0.0)
                        a = None
                    continue
                for scenario, value in values.items():
                    self.put(scenario, t.name, value)
        finally:
            if a is not None:
                await self.finish(a)

    async def handshakes(self, reps: int) -> None:
        bare = Target(BARE, (sys.executable, "-c", BARE_IMPORTS), f'python -c "{BARE_IMPORTS}"')
        able = []
        for t in self.opts.targets:
            why = self.support[t.name].why_not("handshake")
            if why is None:
                able.append(t)
            else:
                self.unsupported("handshake", t.name, why)
        samples: dict[str, list[int]] = {t.name: [] for t in [bare, *able]}
        for _ in range(reps):
            b = AgentProcess(bare, self.opts.timeout)
            await b.start()
            await b.wait_exit()
            samples[BARE].append(b.exited_ns - b.spawned_ns)
            await b.close()
            for t in list(able):
                a = AgentProcess(t, self.opts.timeout)
                try:
                    await a.start()
                    ns, _ = await a.handshake()
                except BenchError as exc:
                    await a.close(grace=0.0)
                    self.failed("handshake", t.name, str(exc).split("; stderr tail:")[0])
                    able.remove(t)
                    del samples[t.name]
                    continue
                samples[t.name].append(ns)
                await self.finish(a)
        for name, values in samples.items():
            ms = sorted(v / 1e6 for v in values)
            self.put("handshake", name, {"n": len(ms), "p50_ms": percentile(ms, 50), "min_ms": ms[0], "correct": True})

    def idle_steps(self) -> list[tuple[tuple[str, ...], Step]]:
        s = self.opts.sizes

        def one(scenario: str, run: Callable[[AgentProcess, str, Support], Awaitable[Any]]) -> Step:
            async def step(a: AgentProcess, sid: str, _wanted: Collection[str]) -> dict[str, dict[str, Any]]:
                return {scenario: (await run(a, sid, self.support[a.target.name])).summary()}

            return step

        async def more_sessions(a: AgentProcess, sid: str, sup: Support) -> Any:
            more = [sid] + [await a.new_session() for _ in range(PROMPTS_AT_ONCE - 1)]
            return await throughput_updates(a, more, s.updates_each, sup)

        return [
            (("cancel_idle",), one("cancel_idle", lambda a, sid, _sup: cancel_rounds(a, sid, s.cancels, self.rng))),
            (("control_idle",), one("control_idle", lambda a, sid, sup: control_rounds(a, sid, s.controls, sup))),
            (
                ("updates_per_s_1",),
                one("updates_per_s_1", lambda a, sid, sup: throughput_updates(a, [sid], s.updates_one, sup)),
            ),
            ((f"updates_per_s_{PROMPTS_AT_ONCE}",), one(f"updates_per_s_{PROMPTS_AT_ONCE}", more_sessions)),
        ]

    async def pipelined(self) -> None:
        """The pipelined rows, measured the same way for every target: warm-up first, timed bursts interleaved.

        set_mode: one fresh process per target; ``bursts + 1`` rounds of one
        burst per target, the first round an untimed warm-up. session/new:
        sessions stay open, and one connection of acp_fast holds 10,000 by
        default, so every timed burst gets a fresh process that first opens
        SESSION_WARMUP_SHARE of a burst untimed. Either way the order of the
        targets rotates every round, so a slow spell of the shared machine
        hits every target rather than whichever ran then, and the row's rate
        is the median of the timed bursts. With acp_fast among the targets the
        session/new rounds also run the demo without its start announcement
        (quiet_demo.py) for the framework-only row.
        """
        s = self.opts.sizes
        warm_sessions = warmup_sessions(s)

        async def requests(a: AgentProcess, sid: str, sup: Support) -> Rate:
            return await throughput_requests(a, sid, s.pipelined, sup)

        async def sessions(a: AgentProcess, _sid: str, _sup: Support) -> Rate:
            return await throughput_sessions(a, s.new_sessions)

        async def sessions_warmup(a: AgentProcess, _sid: str, _sup: Support) -> Rate:
            return await throughput_sessions(a, warm_sessions)

        lanes = [Lane(t, "requests_per_s", t.name, self.support[t.name]) for t in self.opts.targets]
        await self.rounds("requests_per_s", lanes, requests, requests, fresh=False)
        lanes = [Lane(t, "sessions_per_s", t.name, self.support[t.name]) for t in self.opts.targets]
        demo = next((t for t in self.opts.targets if t.name == "acp_fast" and not t.external), None)
        if demo is not None:
            lanes.append(Lane(quiet_demo_target(demo.argv[0]), NO_HOOK_SCENARIO, "acp_fast", self.support["acp_fast"]))
        await self.rounds("sessions_per_s", lanes, sessions_warmup, sessions, fresh=True)
        floor = self.results.get("sessions_per_s", {}).get("floor")
        if NO_HOOK_SCENARIO in self.results and floor is not None and "per_s" in floor:
            # The floor has no start hook: its session/new row is already the like-for-like reference.
            self.results[NO_HOOK_SCENARIO]["floor"] = {**floor, "same_as": "sessions_per_s"}

    async def rounds(self, kind: str, lanes: list[Lane], warmup: Burst, burst: Burst, *, fresh: bool) -> None:
        """Timed ``burst`` rounds over ``lanes``, each burst after an untimed ``warmup`` in its process.

        ``fresh``: a new process per timed burst (warm-up, burst, exit);
        otherwise one process per lane for the whole row, warmed up once in
        an extra first round. A lane whose burst fails is out of the row.
        """
        running: list[Lane] = []
        for lane in lanes:
            why = lane.support.why_not(kind)
            if why is None:
                running.append(lane)
            else:
                self.unsupported(lane.scenario, lane.column, why)
        got = {lane.target.name: Bursts() for lane in running}
        live: dict[str, tuple[AgentProcess, str]] = {}
        try:
            for rnd in range(self.opts.sizes.bursts + (0 if fresh else 1)):
                k = rnd % len(running) if running else 0
                for lane in running[k:] + running[:k]:
                    name = lane.target.name
                    if name not in got:  # failed in an earlier round
                        continue
                    a: AgentProcess | None = None
                    try:
                        if name not in live:
                            live[name] = await self.spawn(lane.target)
                        a, sid = live[name]
                        if fresh or rnd == 0:
                            got[name].warmups.append(await warmup(a, sid, lane.support))
                            if not fresh:
                                continue
                        got[name].rates.append(await burst(a, sid, lane.support))
                    except BenchError as exc:
                        self.failed(lane.scenario, lane.column, str(exc).split("; stderr tail:")[0])
                        del got[name]
                        if a is not None:
                            del live[name]
                            await a.close(grace=0.0)
                        continue
                    if fresh:
                        del live[name]
                        await self.finish(a)
        finally:
            for a, _ in live.values():
                await self.finish(a)
        for lane in running:
            if lane.target.name in got:
                self.put(lane.scenario, lane.column, got[lane.target.name].summary())

    async def busy(self, a: AgentProcess, sid: str, wanted: Collection[str]) -> dict[str, dict[str, Any]]:
        s = self.opts.sizes
        sup = self.support[a.target.name]
        busy = [await a.new_session() for _ in range(BUSY_STREAMS)]
        futs = await start_busy(a, busy)
        out = {"cancel_busy": (await cancel_rounds(a, sid, s.cancels, self.rng)).summary()}
        if "control_busy" in wanted:
            out["control_busy"] = (await control_rounds(a, sid, s.controls, sup)).summary()
        ok = await stop_prompts(a, busy, futs)
        for value in out.values():
            value["correct"] = value["correct"] and ok
        return out

    async def memory(self, a: AgentProcess, sid: str, _wanted: Collection[str]) -> dict[str, dict[str, Any]]:
        s = self.opts.sizes
        sup = self.support[a.target.name]
        await barrier(a, sid, sup)
        rss0 = a.rss_bytes()
        p = await a.pipeline("session/new", lambda _i: NEW_SESSION, s.sessions, keep=True)
        await barrier(a, sid, sup)
        rss1 = a.rss_bytes()
        ids = [str(r["sessionId"]) for r in (p.results or []) if isinstance(r, dict) and "sessionId" in r]
        ids = ids[:PROMPTS_AT_ONCE]
        if not ids:
            raise BenchError(f"{a.target.name}: none of {s.sessions} pipelined session/new was answered with a session")
        base = a.updates
        futs = [
            a.start_request("session/prompt", prompt_params(i, f"stream {ENDLESS} {IDLE_PROMPT_DELAY_MS}"))[1]
            for i in ids
        ]
        await a.updates_reach(base + len(ids), futs)
        await barrier(a, sid, sup)
        rss2 = a.rss_bytes()
        ok = await stop_prompts(a, ids, futs)
        value = {
            "rss_start_mib": rss0 / 2**20,
            "per_session_kib": (rss1 - rss0) / s.sessions / 1024,
            "per_prompt_kib": (rss2 - rss1) / len(ids) / 1024,
            "sessions": s.sessions,
            "prompts": len(ids),
            "correct": p.ok == s.sessions and ok,
        }
        return {"memory": value}


__all__ = ["FULL", "QUICK", "Options", "Runner", "Sizes", "session_budget"]
