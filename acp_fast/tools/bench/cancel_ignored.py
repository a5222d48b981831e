"""Scenario "cancel, agent ignores it": time from ``session/cancel`` to the prompt's answer.

The agent is the one measured in the project's issue 23: its prompt loops
STEPS times over ``await asyncio.sleep(STEP_S)`` inside ``try/except
CancelledError: pass`` (``contextlib.suppress``), one ``agent_message_chunk``
per step: about 4 s of body that ignores every cancel. acp_fast serves it
with ``--cancel-grace-s``: the watchdog answers ``cancelled`` at the grace
(goal: p99 <= grace + 5 ms) and drops what the body still sends. The
official SDK runs the same body (sdk_ignoring_agent.py); it has no such
bound, so its row says when its answer came, or that none came within the
bounded wait.

Each round, over real pipes: session/new, a prompt, ``session/cancel``
right after its first update, then read until the answer (timed from the
cancel written to the answer read) and a session/new round trip, counting
that session's updates read after the answer (R30: none from acp_fast).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

import orjson

from ...agent.base import Agent
from .stats import percentile
from .targets import AGENTS_DIR, sdk_missing

STEPS = 400
STEP_S = 0.01
#: The cancel_grace_s acp_fast runs with here (its default is 2 s; shorter keeps the rounds short).
GRACE_S = 0.5
#: The goal: acp_fast's p99 at most the grace plus this.
GOAL_OVER_GRACE_MS = 5.0
#: How long a round waits for an answer before it reports none.
WAIT_S = 10.0
#: How long starting the agent, session/new and a prompt's first update may take (a loaded machine).
SETUP_WAIT_S = 60.0
#: At most this many SDK rounds: each lasts the whole body (about 4 s).
SDK_ROUNDS = 3
SCENARIO = "cancel_ignored"
IGNORING_AGENT = "acp_fast.tools.bench.cancel_ignored:IgnoringAgent"
SDK_SCRIPT = AGENTS_DIR / "sdk_ignoring_agent.py"
_NEW = {"cwd": "/", "mcpServers": []}


class IgnoringAgent(Agent):
    """Issue 23's agent: every cancel swallowed, one update per step."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        for i in range(STEPS):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(STEP_S)
            await self.client.agent_message_chunk(session_id, f"step {i}")
        return "end_turn"


class _Peer:
    """One agent process over pipes; reads wait at most until a deadline."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout
        self.next_id = 0

    def send(self, method: str, params: Any, request: bool = True) -> int:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        self.stdin.write(orjson.dumps(msg) + b"\n")
        return self.next_id

    async def read(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None once ``deadline`` (perf_counter) has passed."""
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        try:
            line = await asyncio.wait_for(self.stdout.readline(), left)
        except TimeoutError:
            return None
        if not line:
            raise ConnectionError("the agent closed stdout")
        msg: dict[str, Any] = orjson.loads(line)
        return msg

    async def until(self, rid: int, deadline: float) -> tuple[int, dict[str, Any] | None]:
        """Updates read before the answer to ``rid``, and that answer (None: not by ``deadline``)."""
        updates = 0
        while (msg := await self.read(deadline)) is not None:
            if msg.get("method") == "session/update":
                updates += 1
            elif "method" not in msg and msg.get("id") == rid:
                return updates, msg
        return updates, None

    async def call(self, method: str, params: Any, wait_s: float = SETUP_WAIT_S) -> dict[str, Any]:
        rid = self.send(method, params)
        _, answer = await self.until(rid, time.perf_counter() + wait_s)
        if answer is None or "result" not in answer:
            raise ConnectionError(f"{method}: no result within {wait_s} s ({answer})")
        return answer


async def _round(peer: _Peer, wait_s: float) -> tuple[float | None, int, bool]:
    """(seconds cancel -> answer or None, updates after the answer, answered cancelled)."""
    sid = (await peer.call("session/new", _NEW))["result"]["sessionId"]
    pid = peer.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    deadline = time.perf_counter() + SETUP_WAIT_S
    while (msg := await peer.read(deadline)) is not None and msg.get("method") != "session/update":
        pass
    if msg is None:
        raise ConnectionError("the prompt sent no update")
    sent = time.perf_counter()
    peer.send("session/cancel", {"sessionId": sid}, request=False)
    await peer.stdin.drain()
    _, answer = await peer.until(pid, sent + wait_s)
    if answer is None:
        return None, 0, False
    took = time.perf_counter() - sent
    cancelled = answer.get("result") == {"stopReason": "cancelled"}
    rid = peer.send("session/new", _NEW)
    after = 0
    deadline = time.perf_counter() + SETUP_WAIT_S
    while (msg := await peer.read(deadline)) is not None:
        if msg.get("method") == "session/update" and msg.get("params", {}).get("sessionId") == sid:
            after += 1
        elif "method" not in msg and msg.get("id") == rid:
            break
    return took, after, cancelled


async def measure(argv: list[str], rounds: int, wait_s: float = WAIT_S) -> dict[str, Any]:
    """``rounds`` cancels of the ignoring prompt against the agent started by ``argv``; one result dict."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 20,
    )
    peer = _Peer(proc)
    took: list[float] = []
    after = unanswered = wrong = 0
    try:
        await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        for _ in range(rounds):
            seconds, late, cancelled = await _round(peer, wait_s)
            if seconds is None:
                unanswered += 1
                break  # its body holds the session: the next rounds would only wait as long
            took.append(seconds)
            after += late
            wrong += not cancelled
    finally:
        with contextlib.suppress(Exception):
            peer.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), wait_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    ms = sorted(t * 1000 for t in took)
    out: dict[str, Any] = {"n": len(ms), "unanswered": unanswered, "updates_after_answer": after}
    out["correct"] = wrong == 0 and after == 0 and bool(ms)
    if ms:
        out.update(p50_ms=percentile(ms, 50), p99_ms=percentile(ms, 99), max_ms=ms[-1], samples_ms=ms)
    if unanswered:
        out["note"] = f"no answer within {wait_s:g} s"
        out.pop("correct")  # not a wrong answer: none
    return out


def sdk_rounds(rounds: int) -> int:
    """The SDK column's rounds for ``rounds`` of acp_fast's: a tenth, at least one, at most SDK_ROUNDS."""
    return min(SDK_ROUNDS, max(1, rounds // 10))


async def run(
    python: str, rounds: int, sdk_rounds: int, grace_s: float = GRACE_S, wait_s: float = WAIT_S
) -> dict[str, dict[str, Any]]:
    """The scenario's row: acp_fast (``serve`` with ``--cancel-grace-s``) and, unless ``sdk_rounds`` is 0, the SDK."""
    argv = [python, "-m", "acp_fast", "serve", IGNORING_AGENT, "--cancel-grace-s", str(grace_s)]
    row = {"acp_fast": await measure([*argv, "--log-level", "error"], rounds, wait_s)}
    row["acp_fast"]["grace_ms"] = grace_s * 1000
    if row["acp_fast"].get("p99_ms") is not None:
        row["acp_fast"]["over_grace_p99_ms"] = row["acp_fast"]["p99_ms"] - grace_s * 1000
    why = sdk_missing()
    if sdk_rounds <= 0:
        pass
    elif why is not None:
        row["sdk"] = {"unsupported": why}
    else:
        sdk = await measure([python, "-P", str(SDK_SCRIPT)], sdk_rounds, wait_s)
        if sdk.get("n"):
            sdk["note"] = f"answered when the body returned ({sdk['p50_ms'] / 1000:.1f} s after the cancel)"
        row["sdk"] = sdk
    return row


def describe(row: dict[str, dict[str, Any]]) -> list[str]:
    """Lines for the report: the bound, then what each column saw."""
    grace_s = float(row.get("acp_fast", {}).get("grace_ms", GRACE_S * 1000)) / 1000
    out = [
        f"cancel, agent ignores it: acp_fast runs with cancel_grace_s={grace_s:g} s; goal p99 <= grace + "
        f"{GOAL_OVER_GRACE_MS:g} ms (the body: {STEPS} x sleep({STEP_S}) with every cancel swallowed)"
    ]
    for target, value in row.items():
        if "unsupported" in value:
            out.append(f"  {target}: unsupported ({value['unsupported']})")
            continue
        seen = f"  {target}: {value.get('n', 0)} answered"
        if value.get("n"):
            seen += f", p50 {value['p50_ms']:,.1f} ms, p99 {value['p99_ms']:,.1f} ms, max {value['max_ms']:,.1f} ms"
            seen += f", {value['updates_after_answer']} updates after the answer"
        if value.get("note"):
            seen += f"; {value['note']}"
        out.append(seen)
    return out


def main() -> None:  # pragma: no cover - the wrapper script's entry
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sdk-rounds", type=int, default=3)
    ap.add_argument("--grace", type=float, default=GRACE_S)
    ap.add_argument("--wait", type=float, default=WAIT_S)
    a = ap.parse_args()
    row = asyncio.run(run(sys.executable, a.rounds, a.sdk_rounds, a.grace, a.wait))
    for line in describe(row):
        print(line)
