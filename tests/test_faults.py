"""R13, R14, R24, R26: faults end to end, over real pipes, with ``acp-fast serve tests.test_faults:FaultAgent``.

``FaultAgent`` prints markers to stderr (flushed) from its ``finally`` blocks,
so a test can see that the usage finalizer ran however the turn ended. Every
wait is on a message or a marker; the hang timeout of ``AgentProcess`` only
turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import orjson
import pytest

from acp_fast.agent.base import Agent, current_turn
from tests.helpers import AgentProcess

pytestmark = pytest.mark.slow

TARGET = "tests.test_faults:FaultAgent"


def _mark(text: str) -> None:
    print(f"MARK {text}", file=sys.stderr, flush=True)


class FaultAgent(Agent):
    """Prompt commands: ``raise MSG``, ``hang``, ``seq N PAD [DELAY_MS]``."""

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self._n = getattr(self, "_n", 0) + 1
        _mark(f"opened s{self._n}")
        return {"sessionId": f"s{self._n}"}

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        raise RuntimeError(f"control-boom-{mode_id}")

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        words = str(prompt[0].get("text", "")).split()
        outcome = "returned"
        try:
            if words[0] == "raise":
                raise RuntimeError(words[1])
            if words[0] == "hang":
                await self._hang(session_id)
            await self._seq(session_id, int(words[1]), int(words[2]), float(words[3]) / 1000 if len(words) > 3 else 0)
            return "end_turn"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            _mark(f"finalizer {session_id} {outcome} token_cancelled={current_turn().token.cancelled}")

    async def _hang(self, session_id: str) -> None:
        await self.client.agent_message_chunk(session_id, "hanging")
        while True:  # swallows every cancellation: only abandonment ends it
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                _mark(f"swallowed-cancel {session_id}")

    def _mark_first_wait(self, writer: Any) -> None:
        """Mark when an update first waits for the pipe: with one producer the update that crosses the
        high-water mark is also the one that waits, so a check before each send alone can miss it."""
        if getattr(self, "_wait_marked", False):
            return
        self._wait_marked = True
        drain = writer.drain

        async def marking_drain() -> None:
            if writer.must_wait and getattr(self, "_wait_marked", False) is not None:
                self._wait_marked = None
                _mark("paused at drain")
            await drain()

        writer.drain = marking_drain

    async def _seq(self, session_id: str, n: int, pad: int, delay_s: float) -> None:
        writer = self.client._conn.writer
        high = self.client._conn.limits.write_high_water
        self._mark_first_wait(writer)
        max_after = 0
        paused_marked = False
        try:
            for i in range(n):
                if not paused_marked and writer.buffered > high:
                    paused_marked = True  # stdout is backed up: the next update must wait (R26)
                    _mark(f"paused at {session_id}:{i}")
                await self.client.agent_message_chunk(session_id, f"seq {i} " + "x" * pad)
                max_after = max(max_after, writer.buffered)
                await asyncio.sleep(delay_s)
        finally:
            _mark(f"max_buffered {session_id} {max_after}")


def _prompt(agent: AgentProcess, session_id: str, text: str, id: Any) -> None:
    agent.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, id)


def _serve(*flags: str, read_stdout: bool = True) -> AgentProcess:
    return AgentProcess("serve", TARGET, *flags, read_stdout=read_stdout)


def test_r24_r14_handler_exception_and_a_hung_prompt_are_contained() -> None:
    with _serve("--shutdown-grace-s", "0.2", "--abort-join-s", "0.2", "--log-level", "info") as agent:
        agent.initialize()
        s1 = agent.new_session()
        _prompt(agent, s1, "raise boom-7", "p-raise")
        _, resp = agent.until_response("p-raise")
        assert resp["error"]["code"] == -32603 and resp["error"]["data"] == {"error": "RuntimeError"}, resp
        resp = agent.call("session/set_mode", {"sessionId": s1, "modeId": "x"})
        assert resp["error"]["code"] == -32603, resp
        assert agent.call("session/list")["error"]["code"] == -32601  # still serving, in order
        s2 = agent.new_session()
        _prompt(agent, s2, "hang", "p-hang")
        msg = agent.next()
        assert msg["method"] == "session/update" and msg["params"]["sessionId"] == s2, msg
        agent.close_stdin()  # EOF: cancel -> 0.2 s grace -> abort -> 0.2 s join -> abandon (R14)
        _, resp = agent.until_response("p-hang")
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.wait() == 1  # a task had to be abandoned: not a clean exit
        stdout = b"".join(agent.stdout_lines)
        assert b"Traceback" not in stdout and b"boom" not in stdout
        assert all(orjson.loads(line)["jsonrpc"] == "2.0" for line in agent.stdout_lines)
        err = agent.stderr
        assert "Traceback" in err and "RuntimeError: boom-7" in err and "RuntimeError: control-boom-x" in err
        assert f"MARK finalizer {s1} returned" in err  # a failing turn still finalizes
        assert err.count(f"MARK swallowed-cancel {s2}") == 2  # shutdown's cancel, then the abort
        assert "did not stop after abort; abandoning it" in err


def test_r13_client_dying_breaks_stdout_and_the_agent_exits_cleanly() -> None:
    with _serve(read_stdout=False) as agent:
        proc = agent.proc
        assert proc.stdin is not None and proc.stdout is not None
        agent.send_raw(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
            b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1",'
            b'"prompt":[{"type":"text","text":"seq 100000000 64"}]}}\n'
        )
        updates = 0
        while updates < 3:
            line = proc.stdout.readline()
            assert line, agent.stderr
            updates += b'"session/update"' in line
        proc.stdout.close()  # the client is gone; the agent's next write gets EPIPE
        agent.wait_stderr("MARK finalizer s1 cancelled")
        assert agent.wait() == 0
        err = agent.stderr
        assert "Traceback" not in err, err[-3000:]
        assert len(err.splitlines()) < 20, err[-3000:]  # no flood of failed writes


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_r13_signal_is_a_graceful_shutdown(sig: signal.Signals) -> None:
    with _serve() as agent:
        agent.initialize()
        sid = agent.new_session()
        _prompt(agent, sid, "seq 100000000 8 1", "p-sig")
        msg = agent.next()
        assert msg["method"] == "session/update", msg  # the prompt is running
        agent.proc.send_signal(sig)
        _, resp = agent.until_response("p-sig")
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.wait() == 0
        assert f"MARK finalizer {sid} cancelled token_cancelled=True" in agent.stderr
        assert "Traceback" not in agent.stderr and "KeyboardInterrupt" not in agent.stderr


def test_r13_stdin_closed_mid_line_answers_what_it_can_and_cancels_prompts() -> None:
    with _serve() as agent:
        agent.initialize()
        sid = agent.new_session()
        _prompt(agent, sid, "seq 100000000 8 1", "p-eof")
        assert agent.next()["method"] == "session/update"
        agent.send_raw(b'{"jsonrpc":"2.0","id":"trunc","method":"session/list","par')
        agent.close_stdin()
        seen: dict[Any, dict[str, Any]] = {}
        while len(seen) < 2:
            msg = agent.next()
            if "method" not in msg:
                seen[msg["id"]] = msg
        assert seen["trunc"]["error"]["code"] == -32700, seen
        assert seen["p-eof"]["result"] == {"stopReason": "cancelled"}, seen
        assert agent.wait() == 0
        assert agent.no_more_output() == []
        assert f"MARK finalizer {sid} cancelled" in agent.stderr


def test_r26_stalled_reader_bounds_agent_memory_and_loses_nothing() -> None:
    n, pad, high = 4000, 1024, 64 * 1024
    flags = ("--write-high-water", str(high), "--write-low-water", str(high // 4))
    with _serve(*flags, read_stdout=False) as agent:
        agent.send_raw(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}\n')
        sids = [f"s{i}" for i in range(1, 5)]
        for sid in sids:
            agent.request("session/new", {"cwd": "/tmp", "mcpServers": []}, f"new-{sid}")
        agent.wait_stderr("MARK opened s4")  # started up and serving: the baseline
        base = agent.status("VmRSS")
        for sid in sids:
            _prompt(agent, sid, f"seq {n} {pad}", f"p-{sid}")
        # Nobody reads stdout: the pipe fills, the writer passes its high water, producers wait.
        agent.wait_stderr("MARK paused at ")
        stalled_rss = agent.status("VmRSS")
        agent.start_reading()
        got: dict[str, list[int]] = {sid: [] for sid in sids}
        answered: set[str] = set()
        while len(answered) < len(sids):
            msg = agent.next()
            if msg.get("method") == "session/update":
                text = msg["params"]["update"]["content"]["text"]
                sid = msg["params"]["sessionId"]
                assert sid not in answered, "update after its prompt's response (R05)"
                got[sid].append(int(text.split()[1]))
            elif str(msg.get("id", "")).startswith("p-"):
                assert msg["result"] == {"stopReason": "end_turn"}, msg
                answered.add(msg["id"][2:])
        for sid in sids:
            assert got[sid] == list(range(n)), f"{sid}: lost, duplicated or reordered updates"
        agent.close_stdin()
        assert agent.wait() == 0
        err = agent.stderr
        for sid in sids:
            line = next(x for x in err.splitlines() if x.startswith(f"MARK max_buffered {sid} "))
            # Every update waited for the pipe. A producer woken by a drained pipe writes once more
            # even if the other sessions refilled it first (no starvation, see Writer.drain), so the
            # mark can be passed by at most one update (< 2 KiB here) per other producer.
            assert int(line.split()[-1]) <= high + (len(sids) - 1) * 2 * 1024, line
        total = len(sids) * n * pad
        assert stalled_rss - base < total // 1024 // 4, (base, stalled_rss, total)
