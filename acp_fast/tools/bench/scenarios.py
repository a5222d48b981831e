"""The measured scenarios: one function per kind of round, each identical for every target.

All prompts are ``stream N DELAY_MS``; the control request is the target's
cheap request (``session/set_mode`` or ``_echo``, see probe.py). Each
function returns a Latency or a Rate whose ``correct`` says every answer was
the expected one, so a wrong implementation cannot look fast.
"""

from __future__ import annotations

import asyncio
import random
import time

from .probe import CHEAP, ENDLESS, LONG_PROMPT_DELAY_MS, NEW_SESSION, Support
from .process import AgentProcess, Response, prompt_params
from .stats import Latency, Rate

_NOW = time.perf_counter_ns
#: The driver's own CPU clock: a pipelined row whose driver spends as much per request as the
#: agent measures the driver as much as the agent (its answers are parsed here, in Python).
_DRIVER_CPU = time.process_time_ns

#: Sessions streaming at full speed in the busy variants (plus the measured one).
BUSY_STREAMS = 31
#: Prompts run at once in the 32-prompt scenarios (the default pool size).
PROMPTS_AT_ONCE = 32
#: Chunk period of the prompts held open by the memory scenario.
IDLE_PROMPT_DELAY_MS = 1000
#: Updates each busy prompt must have streamed before the measured rounds start.
BUSY_WARMUP_UPDATES = 50


def _stop_reason(msg: dict[str, object]) -> object:
    result = msg.get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


async def cancel_rounds(a: AgentProcess, sid: str, reps: int, rng: random.Random) -> Latency:
    """Start a long prompt, let it stream, cancel it; time cancel written -> "cancelled" read."""
    out = Latency()
    for _ in range(reps):
        seen = a.watch(sid)
        _, fut = a.start_request("session/prompt", prompt_params(sid, f"stream {ENDLESS} {LONG_PROMPT_DELAY_MS}"))
        await a.streaming(seen, fut)
        await asyncio.sleep(rng.uniform(0, LONG_PROMPT_DELAY_MS / 1000))  # land anywhere in the chunk period
        sent = a.notify("session/cancel", {"sessionId": sid})
        arrived, msg = await a.wait(fut, "the cancelled prompt's response")
        out.samples_ns.append(arrived - sent)
        if _stop_reason(msg) == "cancelled":
            out.correct += 1
    return out


async def control_rounds(a: AgentProcess, sid: str, reps: int, sup: Support) -> Latency:
    """Cheap request round trips, one at a time, while ``sid`` runs a long prompt."""
    out = Latency()
    seen = a.watch(sid)
    _, fut = a.start_request("session/prompt", prompt_params(sid, f"stream {ENDLESS} {LONG_PROMPT_DELAY_MS}"))
    await a.streaming(seen, fut)
    for i in range(reps):
        ns, msg = await a.request(sup.cheap_method, sup.cheap_params(sid, i))
        out.samples_ns.append(ns)
        if "result" in msg:
            out.correct += 1
    a.notify("session/cancel", {"sessionId": sid})
    _, msg = await a.wait(fut, "the long prompt's response")
    if _stop_reason(msg) != "cancelled":
        out.correct = 0
    return out


async def start_busy(a: AgentProcess, sessions: list[str]) -> list[asyncio.Future[Response]]:
    """Start endless full-speed prompts on ``sessions`` and wait until all of them stream."""
    base = a.updates
    futs = [a.start_request("session/prompt", prompt_params(s, f"stream {ENDLESS} 0"))[1] for s in sessions]
    await a.updates_reach(base + BUSY_WARMUP_UPDATES * len(sessions), futs)
    return futs


async def stop_prompts(a: AgentProcess, sessions: list[str], futs: list[asyncio.Future[Response]]) -> bool:
    for s in sessions:
        a.notify("session/cancel", {"sessionId": s})
    answers = [await a.wait(f, "a cancelled prompt") for f in futs]
    return all(_stop_reason(m) == "cancelled" for _, m in answers)


def _cpu_spent(before: int | None, after: int | None) -> int | None:
    return after - before if before is not None and after is not None else None


async def throughput_requests(a: AgentProcess, sid: str, n: int, sup: Support) -> Rate:
    params = [sup.cheap_params(sid, 0), sup.cheap_params(sid, 1)]
    cpu, mine = await a.idle_cpu_ns(), _DRIVER_CPU()
    start = _NOW()
    p = await a.pipeline(sup.cheap_method, lambda i: params[i % 2], n)
    mine = _DRIVER_CPU() - mine
    return Rate(n, (p.last_ns - start) / 1e9, p.ok == n, _cpu_spent(cpu, await a.idle_cpu_ns()), mine)


async def throughput_sessions(a: AgentProcess, n: int) -> Rate:
    """Pipelined ``session/new``: the per-request cost of a method that does real work in an agent."""
    cpu, mine = await a.idle_cpu_ns(), _DRIVER_CPU()
    start = _NOW()
    p = await a.pipeline("session/new", lambda _i: NEW_SESSION, n)
    mine = _DRIVER_CPU() - mine
    return Rate(n, (p.last_ns - start) / 1e9, p.ok == n, _cpu_spent(cpu, await a.idle_cpu_ns()), mine)


async def barrier(a: AgentProcess, sid: str, sup: Support) -> None:
    """One cheap round trip, so what the agent wrote before it has been read; a no-op without one."""
    if sup.has(CHEAP):
        await a.result(sup.cheap_method, sup.cheap_params(sid, 1))


async def throughput_updates(a: AgentProcess, sessions: list[str], each: int, sup: Support) -> Rate:
    await barrier(a, sessions[0], sup)
    base = a.updates
    start = _NOW()
    futs = [a.start_request("session/prompt", prompt_params(s, f"stream {each} 0"))[1] for s in sessions]
    answers = [await a.wait(f, "a streaming prompt") for f in futs]
    last = max(t for t, _ in answers)
    got = a.updates - base
    total = each * len(sessions)
    ended = all(_stop_reason(m) == "end_turn" for _, m in answers)
    # Session-start announcements may still trickle in; anything else is wrong.
    return Rate(total, (last - start) / 1e9, ended and total <= got <= total + len(sessions))
