"""Soak: one million messages and ten thousand sessions opened and closed in one agent process.

    python benchmarks/soak.py [--sessions 10000] [--per-session 100] [--window 16]

Runs ``acp-fast serve benchmarks.soak:SoakAgent``: the demo agent plus one
extension method, ``_soak/stats``, that reports from inside the process
the number of asyncio tasks, the connection's counters and the session
table size (measured without changing the product: the probe lives here).
SoakAgent also drops the demo's per-session history on ``session/close``,
so what is measured is the runtime, not the demo's application state.

Each session sends ``per-session`` messages: session/new, one prompt
(``stream 5 0``), set_mode / set_config_option / session/list requests and
session/cancel notifications, then session/close; every other session
closes while its prompt still runs (the cancel path). ``window`` sessions run
at once. Resident memory (VmRSS from /proc) and the probe are sampled after
a warm-up and every 1000 sessions; the check is that tasks and counters go
back to their baseline and RSS stops growing. Prints one JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))

from load_32_streams import AgentPipe, rss_kib

from acp_fast.demo import DemoAgent


class SoakAgent(DemoAgent):
    """The demo agent with a stats probe and state freed on close."""

    def __init__(self) -> None:
        super().__init__(pace_ms=0)
        self._n = 0

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self._n += 1
        sid = f"soak-{self._n}"
        self.cwd[sid] = cwd
        self.history[sid] = []
        return {"sessionId": sid, **self._session_state()}

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.cwd.pop(session_id, None)
        self.history.pop(session_id, None)

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        # A prompt cancelled by session/close before its task ran still executes the
        # demo's code up to its first await, which re-creates the history entry.
        try:
            return await super().prompt(session_id, prompt, **kwargs)
        finally:
            if session_id not in self.cwd:
                self.history.pop(session_id, None)

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        if method != "_soak/stats":
            return await super().ext_method(method, params)
        import gc

        gc.collect()
        conn = self.client._conn
        return {
            "tasks": len(asyncio.all_tasks()),
            "counts": conn.counts,
            "demo_sessions": len(self.cwd),
            "gc_objects": len(gc.get_objects()),
        }


async def one_session(agent: AgentPipe, k: int, per_session: int) -> None:
    resp = await agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    sid = resp["result"]["sessionId"]
    prompt = agent.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 5 0"}]})
    assert prompt is not None
    if k % 2:
        await prompt  # the other half closes while the prompt may still run
    for j in range(per_session - 3):
        kind = j % 4
        if kind == 0:
            agent.send("session/set_mode", {"sessionId": sid, "modeId": "code" if j % 8 else "ask"}, wait=False)
        elif kind == 1:
            agent.send("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "demo-large"},
                       wait=False)
        elif kind == 2:
            agent.send("session/list", {"cwd": "/nowhere"}, wait=False)
        else:
            agent.notify("session/cancel", {"sessionId": sid})
    resp = await agent.call("session/close", {"sessionId": sid})
    if "result" not in resp:
        agent.problems.append(f"close failed: {resp}")
    resp = await prompt
    if resp.get("result", {}).get("stopReason") not in ("end_turn", "cancelled"):
        agent.problems.append(f"prompt failed: {resp}")


async def stats(agent: AgentPipe) -> dict[str, Any]:
    resp = await agent.call("_soak/stats", {})
    return {"rss_kib": rss_kib(agent.proc.pid), **resp["result"]}


async def main(sessions: int, per_session: int, window: int) -> int:
    agent = await AgentPipe.start("serve", "benchmarks.soak:SoakAgent")
    await agent.call("initialize", {"protocolVersion": 1})
    samples: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(window)
    warmup = min(500, sessions // 10)

    async def run(k: int) -> None:
        async with sem:
            await one_session(agent, k, per_session)

    done = 0
    checkpoints = sorted({warmup, *range(1000, sessions + 1, 1000), sessions})
    for stop in checkpoints:
        await asyncio.gather(*(run(k) for k in range(done, stop)))
        done = stop
        if agent.unanswered():
            agent.problems.append(f"unanswered: {sorted(agent.unanswered())[:10]}")
        samples.append({"sessions_done": done, "messages_out": agent.messages_out,
                        "t_s": round(time.perf_counter() - t0, 1), **await stats(agent)})
    elapsed = time.perf_counter() - t0
    rc = await agent.close()
    base, last = samples[0], samples[-1]
    problems = list(agent.problems)
    if rc != 0:
        problems.append(f"agent exit status {rc}")
    if last["tasks"] != base["tasks"] or last["counts"] != base["counts"]:
        problems.append(f"tasks/counters did not return to baseline: {base} -> {last}")
    if last["gc_objects"] - base["gc_objects"] > 100:  # one leaked object per session would be ~9500
        problems.append(f"live objects grew: {base['gc_objects']} -> {last['gc_objects']}")
    if last["demo_sessions"] != 0:
        problems.append(f"{last['demo_sessions']} sessions still open")
    summary = {
        "sessions": sessions,
        "messages_sent": agent.messages_out,
        "messages_received": agent.messages_in,
        "seconds": round(elapsed, 1),
        "messages_per_s": round((agent.messages_out + agent.messages_in) / elapsed),
        "rss_growth_after_warmup_kib": last["rss_kib"] - base["rss_kib"],
        "samples": samples,
        "problems": problems[:20],
        "ok": not problems,
    }
    print(json.dumps(summary, indent=1))
    return 0 if not problems else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--per-session", type=int, default=100, help="client messages per session (>= 3)")
    p.add_argument("--window", type=int, default=16, help="sessions in flight at once")
    a = p.parse_args()
    sys.exit(asyncio.run(main(a.sessions, a.per_session, a.window)))
