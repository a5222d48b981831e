"""R14: a body blocked in a thread of the default executor cannot hold the process's exit.

The prompt awaits ``run_in_executor`` on a call that never returns. Its
cancel ends the turn (the await is cancelled, the thread is not), then the
shutdown waits ``abort_join_s`` for the thread, names it with its stack once
and exits with status 1, over a pipe (``run_agent`` in a child whose
interpreter then exits as usual) and hosted (``--listen``, SIGTERM). The
waits are bounded by ``AgentProcess.HANG_S``: a hang fails, no duration is
asserted.
"""

from __future__ import annotations

import asyncio
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from acp_fast.agent.base import Agent
from tests.helpers import AgentProcess, prompt_params
from tests.ws_helpers import WsClient

FLAGS = ("--cancel-grace-s", "0.01", "--shutdown-grace-s", "0.05", "--abort-join-s", "0.05")
RUN_AGENT = (
    "import sys\n"
    "from acp_fast import run_agent\n"
    "from acp_fast.wire.limits import Limits\n"
    "from tests.test_r14_stuck_thread import BlockedInThread\n"
    "limits = Limits(cancel_grace_s=0.01, shutdown_grace_s=0.05, abort_join_s=0.05)\n"
    "sys.exit(run_agent(BlockedInThread(), limits, use_uvloop=sys.argv[1] == 'uvloop'))\n"
)
LOOPS = ["uvloop", "asyncio"]


def block_in_thread(entered: Callable[[], None]) -> None:
    """Say the thread is in, then wait on an event nothing sets."""
    entered()
    threading.Event().wait()


class BlockedInThread(Agent):
    """Each prompt says "in the thread" once its executor call runs, then awaits that call for ever."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        loop = asyncio.get_running_loop()
        entered = asyncio.Event()
        worker = loop.run_in_executor(None, block_in_thread, lambda: loop.call_soon_threadsafe(entered.set))
        await entered.wait()
        await self.client.agent_message_chunk(session_id, "in the thread")
        await worker
        return "end_turn"


def _one_stack(stderr: str) -> None:
    """The stuck thread is named once, with the frame it is stuck in."""
    assert stderr.count("It is stuck at:") == 1, stderr
    assert stderr.count("in block_in_thread") == 1, stderr
    assert "of the default executor did not return" in stderr, stderr


@pytest.mark.parametrize("loop", LOOPS)
def test_r14_over_a_pipe_a_thread_that_never_returns_does_not_hold_the_exit(loop: str) -> None:
    with AgentProcess("-c", RUN_AGENT, loop, python_args=True) as agent:
        agent.initialize()
        sid = agent.new_session()
        pid = agent.request("session/prompt", prompt_params(sid, "go"))
        while not (isinstance(m := agent.next(), dict) and m.get("method") == "session/update"):
            pass
        agent.close_stdin()
        _, answer = agent.until_response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}, answer
        assert agent.wait() == 1, agent.stderr
        _one_stack(agent.stderr)


def _port(agent: AgentProcess) -> int:
    agent.wait_stderr("serving ACP")
    match = re.search(r"on 127\.0\.0\.1:(\d+)", agent.stderr)
    assert match is not None, agent.stderr
    return int(match.group(1))


@pytest.mark.parametrize("loop", LOOPS)
def test_r14_hosted_sigterm_drains_past_a_thread_that_never_returns(loop: str) -> None:
    target = "tests.test_r14_stuck_thread:BlockedInThread"
    flags = (*FLAGS, *(["--no-uvloop"] if loop == "asyncio" else []))
    with AgentProcess("serve", target, "--listen", "127.0.0.1:0", *flags, read_stdout=False) as agent:
        port = _port(agent)

        async def client() -> None:
            ws = await WsClient.open(f"ws://127.0.0.1:{port}/acp")
            await ws.initialize()
            sid = await ws.new_session()
            pid = await ws.request_nowait("session/prompt", prompt_params(sid, "go"))
            await ws.wait_for(lambda: ws.updates(sid))
            agent.proc.send_signal(signal.SIGTERM)
            answer = await ws.response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            await ws.wait_for(ws.closed.is_set)

        asyncio.run(asyncio.wait_for(client(), AgentProcess.HANG_S))
        assert agent.wait() == 1, agent.stderr
        _one_stack(agent.stderr)
