"""Cancel, agent ignores it: time from ``session/cancel`` to the ``cancelled`` answer vs ``cancel_grace_s``.

    python benchmarks/cancel_ignored.py [--grace 0.1 0.5 2.0] [--rounds 3]

The agent is the one measured in the project's issue 23: its prompt loops 400
times over ``await asyncio.sleep(0.01)`` inside ``try/except CancelledError:
pass`` (``contextlib.suppress``), sending one ``agent_message_chunk`` per step. Over a real pipe
(``python -m acp_fast serve``), each round starts the prompt, sends
``session/cancel`` after its first update, and reads until the answer:
printed are the seconds that took, the updates read between the cancel and
the answer (sent before the answer: they are the client's), and the updates
read after it until a ``session/new`` round trip (R30 says none). Without
the watchdog the answer came after the whole loop (about 4.6 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

from acp_fast.agent.base import Agent

STEPS = 400
STEP_S = 0.01
NEW_SESSION = {"cwd": "/", "mcpServers": []}


class IgnoringAgent(Agent):
    """The issue's agent: every cancel swallowed, one update per step."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        for i in range(STEPS):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(STEP_S)
            await self.client.agent_message_chunk(session_id, f"step {i}")
        return "end_turn"


def _send(stdin: IO[bytes], obj: dict[str, Any]) -> None:
    stdin.write(orjson.dumps(obj) + b"\n")
    stdin.flush()


def _read(stdout: IO[bytes]) -> dict[str, Any]:
    line = stdout.readline()
    if not line:
        raise SystemExit("the agent closed stdout")
    msg: dict[str, Any] = orjson.loads(line)
    return msg


def _until(stdout: IO[bytes], rid: int) -> tuple[int, dict[str, Any]]:
    """Updates read before the answer to ``rid``, and that answer."""
    updates = 0
    while True:
        msg = _read(stdout)
        if msg.get("method") == "session/update":
            updates += 1
        elif "method" not in msg and msg.get("id") == rid:
            return updates, msg


def measure(grace: float, rounds: int) -> list[tuple[float, int, int]]:
    root = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "acp_fast", "serve", "benchmarks.cancel_ignored:IgnoringAgent"]
    cmd += ["--cancel-grace-s", str(grace), "--log-level", "error"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    rows = []
    try:
        _send(stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        _until(stdout, 1)
        rid = 1
        for _ in range(rounds):
            rid += 1
            _send(stdin, {"jsonrpc": "2.0", "id": rid, "method": "session/new", "params": NEW_SESSION})
            sid = _until(stdout, rid)[1]["result"]["sessionId"]
            rid += 1
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            _send(stdin, {"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": prompt})
            while _read(stdout).get("method") != "session/update":
                pass
            start = time.perf_counter()
            _send(stdin, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
            before, answer = _until(stdout, rid)
            took = time.perf_counter() - start
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            rid += 1
            _send(stdin, {"jsonrpc": "2.0", "id": rid, "method": "session/new", "params": NEW_SESSION})
            after, _ = _until(stdout, rid)
            rows.append((took, before, after))
    finally:
        stdin.close()
        proc.wait(30)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=float, nargs="+", default=[0.1, 0.5, 2.0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'cancel_grace_s':>14} {'cancel->answer s':>16} {'updates before':>14} {'updates after':>13}")
    for grace in args.grace:
        for took, before, after in measure(grace, args.rounds):
            print(f"{grace:>14.2f} {took:>16.3f} {before:>14} {after:>13}")


if __name__ == "__main__":
    main()
