"""R13-R16: EOF and transport failure, grace then abort, reservations freed, idle eviction.

The grace period is the only timer involved (set small where a prompt ignores
cancellation); nothing here asserts on how long anything took.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar

import pytest

from acp_fast.agent.base import Agent
from acp_fast.peer.connection import State
from acp_fast.wire.limits import Limits
from tests.helpers import ConnectionHarness, Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class FinalisingAgent(Agent):
    """Prompts park on ``release``; their ``finally`` and ``on_turn_end`` are recorded.

    ``finish`` (when set up) makes the ``finally`` itself await, as a usage
    finaliser writing history would.
    """

    background_extensions: ClassVar[frozenset[str]] = frozenset({"_boom"})

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.in_finally = asyncio.Event()
        self.finish: asyncio.Event | None = None
        self.finalised: list[str] = []
        self.turn_ends: list[tuple[str, str]] = []
        self.evicted: list[str] = []
        self.evicted_event = asyncio.Event()
        self.fail_with: BaseException | None = None
        self.stream_after_release = False
        self.never = asyncio.Event()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        if self.fail_with is not None:
            raise self.fail_with
        try:
            self.started.set()
            await self.release.wait()
            if self.stream_after_release:
                await self.client.agent_message_chunk(session_id, "into a broken pipe")
                await self.never.wait()
            return "end_turn"
        finally:
            self.in_finally.set()
            if self.finish is not None:
                await self.finish.wait()
            self.finalised.append(session_id)

    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.turn_ends.append((session_id, stop_reason))

    async def on_session_evicted(self, session_id: str) -> None:
        self.evicted.append(session_id)
        self.evicted_event.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        raise RuntimeError("secret detail: /home/user/.token")


async def started_prompt(h: Harness, agent: FinalisingAgent) -> tuple[str, Any]:
    await h.initialize()
    sid = await h.new_session()
    pid = h.request("session/prompt", prompt_params(sid, "hi"))
    await agent.started.wait()
    return sid, pid


@pytest.mark.parametrize(
    "tail",
    [
        b'{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/tm',
        b'{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}',
    ],
    ids=["cut-inside-json", "complete-json-without-newline"],
)
def test_r13_eof_in_the_middle_of_a_line_does_not_parse_the_tail(
    run: Any, framer_cls: type, tail: bytes
) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        h = Harness(agent, framer_cls=framer_cls)
        await h.initialize()
        good = b'{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}'
        h.send_raw(good + b"\n" + tail)
        await close_and_check(h)
        [created] = h.responses(4)
        assert "sessionId" in created["result"], created
        [answer] = h.responses(5)
        assert answer["error"]["code"] == -32700, answer
        assert len(h.server.sessions) == 1  # the tail created no session

    run(body())


def test_r13_eof_in_the_middle_of_a_prompt_cancels_it_and_its_finaliser_runs(run: Any) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        h = Harness(agent)
        sid, pid = await started_prompt(h, agent)
        await close_and_check(h)
        assert h.find_response(pid)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
        assert agent.finalised == [sid]
        assert agent.turn_ends == [(sid, "cancelled")]
        assert not agent.release.is_set()
        assert h.conn.state is State.CLOSED

    run(body())


def test_r13_broken_pipe_cancels_the_prompt_and_its_finaliser_runs(run: Any) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        agent.stream_after_release = True
        h = Harness(agent)
        sid, _pid = await started_prompt(h, agent)
        h.transport.break_pipe()
        agent.release.set()  # the prompt's next update hits EPIPE
        await h.task  # no EOF was sent: the write failure alone shuts the connection down
        h.assert_no_leaks()
        assert agent.finalised == [sid]
        assert agent.turn_ends == [(sid, "cancelled")]
        assert h.read_transport.closed
        assert h.conn.state is State.CLOSED

    run(body())


def test_r13_second_cancel_does_not_interrupt_the_prompt_finaliser(run: Any) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        agent.finish = asyncio.Event()
        h = Harness(agent)
        sid, pid = await started_prompt(h, agent)
        h.notify("session/cancel", {"sessionId": sid})
        await agent.in_finally.wait()
        # A second cancel (or $/cancel_request, or shutdown) while the finaliser awaits.
        h.notify("$/cancel_request", {"requestId": pid})
        h.notify("session/cancel", {"sessionId": sid})
        await h.new_session()  # answered after the loop handled both cancels
        agent.finish.set()
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        assert agent.finalised == [sid]  # the finaliser ran to its end
        assert agent.turn_ends == [(sid, "cancelled")]
        await close_and_check(h)

    run(body())


class StubbornAgent(Agent):
    """Swallows the first cancellation of its prompt; only the abort stops it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.swallowed = 0
        self.turn_ends: list[tuple[str, str]] = []

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        self.started.set()
        never = asyncio.Event()
        try:
            await never.wait()
        except asyncio.CancelledError:
            self.swallowed += 1  # ignores the shutdown's cancellation ...
        await never.wait()  # ... and is stopped only by the abort after the grace period
        return "end_turn"

    async def on_turn_end(self, session_id: str, stop_reason: str) -> None:
        self.turn_ends.append((session_id, stop_reason))


def test_r14_r15_prompt_ignoring_cancellation_is_aborted_joined_and_freed(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        agent = StubbornAgent()
        h = Harness(agent, limits=Limits(shutdown_grace_s=0.05, abort_join_s=5.0))
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "hi"))
        await agent.started.wait()
        [job] = h.server.pool.jobs()
        await close_and_check(h)  # returns only after the abort joined the task
        assert job.task is not None and job.task.done()
        assert job.aborted
        assert agent.swallowed == 1
        assert agent.turn_ends == [(sid, "aborted")]
        assert h.responses(pid) == [
            {"jsonrpc": "2.0", "id": pid, "result": {"stopReason": "cancelled"}}
        ]
        assert not h.server.sessions.get(sid).busy
        assert h.conn.state is State.CLOSED and h.transport.is_closing()

    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        run(body())
    messages = [r.getMessage() for r in caplog.records]
    assert any("aborting it" in m for m in messages), messages
    assert not any("second answer" in m for m in messages), messages
    assert not any("abandoning" in m for m in messages), messages


def test_r15_r24_raising_prompt_frees_its_slots_and_answers_32603_without_traceback(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        h = Harness(agent)
        await h.initialize()
        sid = await h.new_session()
        agent.fail_with = RuntimeError("secret detail: /home/user/.token")
        failed = await h.call("session/prompt", prompt_params(sid, "boom"))
        err = failed["error"]
        assert err["code"] == -32603, failed
        assert "Traceback" not in err["message"] and "secret" not in err["message"], err
        assert "secret" not in str(err.get("data")), err
        # Freed at once, not only at shutdown: the pool slot and the session's prompt slot.
        assert h.server.pool.in_flight == 0
        assert not h.server.sessions.get(sid).busy
        assert agent.turn_ends == [(sid, "failed")]
        agent.fail_with = None
        agent.release.set()
        again = await h.call("session/prompt", prompt_params(sid, "again"))
        assert again["result"] == {"stopReason": "end_turn"}, again
        # A raising background extension frees its pool slot the same way.
        ext = await h.call("_boom", {})
        assert ext["error"]["code"] == -32603 and "secret" not in str(ext["error"]), ext
        assert h.server.pool.in_flight == 0
        await close_and_check(h)

    with caplog.at_level(logging.ERROR, logger="acp_fast"):
        run(body())
    # The traceback goes to the log (stderr), with the original exception attached.
    assert any(r.exc_info and "secret detail" in str(r.exc_info[1]) for r in caplog.records)


def test_r16_idle_eviction_spares_a_session_with_a_running_prompt(run: Any) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        h = Harness(agent, limits=Limits(idle_session_timeout_s=60.0))
        await h.initialize()
        busy = await h.new_session()
        idle = await h.new_session()
        pid = h.request("session/prompt", prompt_params(busy, "long"))
        await agent.started.wait()
        later = time.monotonic() + 3600.0  # both sessions look idle for an hour
        assert h.server.sweep_idle(now=later) == [idle]
        await agent.evicted_event.wait()
        assert agent.evicted == [idle]
        assert busy in h.server.sessions and idle not in h.server.sessions
        gone = await h.call("session/prompt", prompt_params(idle, "late"))
        assert gone["error"]["code"] == -32602, gone
        agent.release.set()
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        # Once its prompt ended, the busy session is an ordinary idle one.
        assert h.server.sweep_idle(now=time.monotonic() + 3600.0) == [busy]
        await close_and_check(h)
        assert agent.evicted == [idle, busy]

    run(body())


def test_r16_sweep_evicts_nothing_when_idle_cleanup_is_disabled(run: Any) -> None:
    async def body() -> None:
        agent = FinalisingAgent()
        h = Harness(agent)  # idle_session_timeout_s defaults to 0: cleanup disabled
        await h.initialize()
        sid = await h.new_session()
        assert h.server.sweep_idle(now=time.monotonic() + 3600.0) == []
        assert sid in h.server.sessions and agent.evicted == []
        await close_and_check(h)

    run(body())


def test_r14_shutdown_runs_every_step_when_a_result_callback_cannot_be_spawned(run: Any) -> None:
    async def body() -> None:
        h = ConnectionHarness(limits=Limits(max_spawned=1, shutdown_grace_s=0.01, abort_join_s=5.0))
        held = asyncio.Event()
        seen: list[Any] = []

        async def holds_the_slot() -> None:
            held.set()
            await asyncio.Event().wait()

        async def on_request(req: Any) -> bool:
            if req.method == "ask":
                pending = h.conn.send_request("client/thing", {})

                async def on_result(result: Any, error: Any) -> None:
                    seen.append(error)

                pending.on_result(on_result)
                spawned.append(h.conn.spawn(holds_the_slot()))
                return True  # never answered: shutdown must answer it
            return False

        spawned: list[asyncio.Task[Any]] = []
        h.conn.on_receive_request(on_request)
        rid = h.request("ask", {})
        await h.wait_for(lambda: h.outgoing_requests("client/thing"))
        await held.wait()
        await h.close()  # run() returns instead of raising ServerBusy
        [answer] = h.responses(rid)
        assert answer["error"]["code"] == -32603 and "shut down" in answer["error"]["message"], answer
        assert spawned[0].cancelled()  # the spawned task was cancelled and joined
        assert seen == []  # its callback could not be spawned: skipped, logged
        assert h.transport.is_closing() and h.conn.state is State.CLOSED
        h.assert_no_leaks()

    run(body())
