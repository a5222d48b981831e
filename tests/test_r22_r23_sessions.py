"""R22: two-phase session start (setup under ordering, then the user's callback
spawned after the response). R23: the client-side session builder waits on the
current task and reports the ordered-handler deadlock like R21.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import orjson
import pytest
from schema_oracle import assert_schema_valid, record_sent

from acp_fast.agent.base import Agent
from acp_fast.client import ClientHandler, ClientSession, ClientSideConnection, connect_in_memory
from acp_fast.demo import DemoAgent
from acp_fast.peer.connection import Connection
from acp_fast.peer.memory import MemoryTransport
from acp_fast.peer.reader import ReadProtocol
from acp_fast.peer.writer import Writer
from acp_fast.wire import _framing_py
from acp_fast.wire.errors import DeadlockError
from acp_fast.wire.framing import new_framer
from acp_fast.wire.jsonrpc import Notification
from acp_fast.wire.limits import Limits
from tests.helpers import Harness, close_and_check, pipe_into

CWD = "/tmp"


class StartingAgent(Agent):
    """on_session_start emits an update, asks the client something, then waits for a mode change."""

    def __init__(self) -> None:
        self.mode_set = asyncio.Event()
        self.answers: list[Any] = []

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        return {"sessionId": "s1"}

    async def load_session(self, session_id: str, cwd: str, mcp_servers: list[dict[str, Any]], **kw: Any) -> None:
        await self.client.user_message_chunk(session_id, "replayed")

    async def set_session_mode(self, session_id: str, mode_id: str, **kw: Any) -> None:
        self.mode_set.set()

    async def on_session_start(self, session_id: str) -> None:
        await self.client.available_commands_update(session_id, [{"name": "go", "description": "go"}])
        # Consumes later session traffic: the answer to its own request, then a later control request.
        self.answers.append(await self.client.ext_method("_test/hello", {"sessionId": session_id}))
        await self.mode_set.wait()
        await self.client.agent_message_chunk(session_id, f"ready {self.answers[-1]['n']}")


def _index(h: Harness, pred: Any) -> int:
    return next(i for i, m in enumerate(h.messages) if pred(m))


@pytest.mark.usefixtures("read_path")
@pytest.mark.parametrize("method", ["session/new"])  # load and resume: tests/test_protocol_current.py
def test_r22_session_start_response_is_written_before_any_update_of_the_callback(run: Any, method: str) -> None:
    async def body() -> None:
        h = record_sent(Harness(StartingAgent()))
        await h.initialize()
        rid = h.request("session/new", {"cwd": CWD, "mcpServers": []})
        if method == "session/load":
            await h.wait_for(lambda: h.outgoing_requests("_test/hello"))
            rid = h.request("session/load", {"sessionId": "s1", "cwd": CWD, "mcpServers": []})
        await h.wait_for(lambda: h.find_response(rid) and len(h.outgoing_requests("_test/hello")) == 1
                         + (method == "session/load"))
        resp = _index(h, lambda m: m.get("id") == rid and "method" not in m)
        commands = [i for i, m in enumerate(h.messages) if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "available_commands_update"]
        assert commands and commands[-1] > resp  # the callback's update follows the response
        if method == "session/load":  # load replay is part of the response, so it comes first
            replay = _index(h, lambda m: m.get("method") == "session/update"
                            and m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
            assert replay < resp < commands[-1]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


@pytest.mark.usefixtures("read_path")
def test_r22_session_start_callback_consumes_later_session_traffic(run: Any) -> None:
    async def body() -> None:
        agent = StartingAgent()
        h = record_sent(Harness(agent))
        await h.initialize()
        sid = await h.new_session()
        ask = await h.wait_for(lambda: h.outgoing_requests("_test/hello"))
        h.send({"jsonrpc": "2.0", "id": ask[0]["id"], "result": {"n": 7}})
        assert (await h.call("session/set_mode", {"sessionId": sid, "modeId": "code"}))["result"] == {}
        ready = await h.wait_for(lambda: [u for u in h.updates(sid) if u["update"].get("content", {}).get("text")])
        assert ready[0]["update"]["content"]["text"] == "ready 7"
        assert agent.answers == [{"n": 7}]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- R23: the client-side builder --------------------------------------------------------------


class Allow(ClientHandler):
    async def request_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}


def test_r23_build_session_run_until_prompts_the_demo_agent_and_reads_streamed_text(run: Any) -> None:
    async def body() -> None:
        pair = connect_in_memory(DemoAgent(pace_ms=0), Allow())
        client = pair.client
        init = await client.initialize()
        assert init["protocolVersion"] == 1

        async def use(session: ClientSession) -> tuple[str, str, str]:
            streamed = await session.prompt("stream 3 0")
            tool = await session.prompt("tool")
            return session.id, streamed.text, tool.text

        sid, streamed, tool = await client.build_session(CWD).run_until(use)
        assert sid == "demo-1"
        assert streamed == "chunk 0 chunk 1 chunk 2 "
        assert tool == "the tool listed 2 files"
        assert pair.server.sessions.find(sid) is not None
        await pair.close()

    run(body())


def test_r23_updates_right_behind_the_session_response_reach_the_session(run: Any, read_path: str) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        limits = Limits()
        writer = Writer(loop, limits)
        conn = Connection(loop, writer, limits, name="acp.client")
        client = ClientSideConnection(conn)
        written: list[dict[str, Any]] = []
        arrived = asyncio.Event()

        def on_data(data: bytes) -> None:
            written.extend(orjson.loads(line) for line in data.split(b"\n") if line)
            arrived.set()

        writer.attach(MemoryTransport(loop, writer, on_data, immediate=True))
        if read_path == "production":
            reader = ReadProtocol(conn, new_framer(limits), limits.read_buffer_bytes)
        else:
            twin = _framing_py.LineFramer(limits.max_line_bytes, limits.overlimit_head_bytes)
            reader = ReadProtocol(conn, twin, limits.read_buffer_bytes)
        into_client = pipe_into(reader, read_path)
        deliver = into_client.write
        client.run()
        built = asyncio.ensure_future(
            client.build_session(CWD).run_until(lambda s: asyncio.sleep(0, result=s.pending_updates()))
        )
        while not written:
            arrived.clear()
            await arrived.wait()
        assert written[0]["method"] == "session/new"
        update = {"sessionUpdate": "available_commands_update", "availableCommands": []}
        # One read delivers the response and the update right behind it: the update is
        # dispatched before the task awaiting the response resumes, so only routing that
        # the ordered result callback installed on the loop (R20) can catch it.
        deliver(
            orjson.dumps({"jsonrpc": "2.0", "id": written[0]["id"], "result": {"sessionId": "s9"}}) + b"\n"
            + orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                            "params": {"sessionId": "s9", "update": update}}) + b"\n"
        )
        assert await built == [update]
        into_client.close()
        await client.run()

    run(body())


class KickingAgent(Agent):
    """Sends the client an extension notification once a session started."""

    async def on_session_start(self, session_id: str) -> None:
        await self.client.ext_notification("_test/kick", {"sessionId": session_id})


def test_r23_run_until_inside_an_ordered_handler_raises_deadlock_error_at_once(run: Any) -> None:
    async def body() -> None:
        pair = connect_in_memory(KickingAgent())
        client: ClientSideConnection = pair.client
        seen: list[BaseException] = []
        handled = asyncio.Event()

        async def on_kick(note: Notification) -> bool:
            if note.method != "_test/kick":
                return False
            try:
                await client.build_session(CWD).run_until(lambda s: asyncio.sleep(0))
            except DeadlockError as exc:
                seen.append(exc)
            handled.set()
            return True

        client.conn.on_receive_notification(on_kick)
        await client.initialize()
        await client.build_session(CWD).run_until(lambda s: handled.wait())
        assert len(seen) == 1 and "ordered handler" in str(seen[0])
        assert len(pair.server.sessions) == 1  # the refused build sent nothing
        await pair.close()

    run(body())


class GatedStartAgent(Agent):
    """Each on_session_start records its session, announces it, then waits for the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[str] = []
        self.opened = 0

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any]:
        self.opened += 1
        return {"sessionId": f"g{self.opened}"}

    async def on_session_start(self, session_id: str) -> None:
        self.started.append(session_id)
        await self.client.available_commands_update(session_id, [])  # output: wakes Harness.wait_for
        await self.gate.wait()


def test_r22_more_new_sessions_than_the_spawn_limit_all_get_their_callback_in_order(run: Any) -> None:
    """Start callbacks that cannot run yet wait their turn: none is dropped for the spawn limit."""

    async def body() -> None:
        agent = GatedStartAgent()
        h = Harness(agent, limits=Limits(max_spawned=4))
        await h.initialize()
        ids = [h.request("session/new", {"cwd": CWD, "mcpServers": []}) for _ in range(10)]
        sids = [(await h.response(i))["result"]["sessionId"] for i in ids]
        assert len(set(sids)) == 10
        await h.wait_for(lambda: len(agent.started) == 2)  # half of max_spawned at once
        assert h.conn.counts["spawned"] == 2
        agent.gate.set()
        await h.wait_for(lambda: len(agent.started) == 10)
        assert agent.started == sids
        await close_and_check(h)

    run(body())


_START_VAR: contextvars.ContextVar[str | None] = contextvars.ContextVar("start_var", default=None)


class TaskBoundStartAgent(Agent):
    """Session "a" waits under a timeout and a task group; the others finish at once; "bad" raises."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.opened: list[str] = []
        self.seen: dict[str, Any] = {}

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any]:
        sid = ["a", "bad", "c", "d"][len(self.opened)]
        self.opened.append(sid)
        return {"sessionId": sid}

    async def on_session_start(self, session_id: str) -> None:
        inherited = _START_VAR.get()
        _START_VAR.set(session_id)
        if session_id == "bad":
            raise RuntimeError("a start callback that fails")
        if session_id == "a":
            task = asyncio.current_task()
            async with asyncio.timeout(30), asyncio.TaskGroup() as group:
                group.create_task(self.gate.wait())
            self.seen["a"] = (inherited, task is not None and asyncio.current_task() is task, _START_VAR.get())
        else:
            self.seen[session_id] = (inherited, _START_VAR.get())
            self.gate.set()
        await self.client.available_commands_update(session_id, [])  # output: wakes Harness.wait_for


def test_r22_start_callbacks_keep_their_task_and_context_and_a_failure_stops_no_other(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback that waits keeps one task throughout (timeouts, task groups), each callback sees
    only its own context changes, and one that raises is logged while the later ones still run."""

    async def body() -> None:
        agent = TaskBoundStartAgent()
        h = Harness(agent)
        await h.initialize()
        ids = [h.request("session/new", {"cwd": CWD, "mcpServers": []}) for _ in range(4)]
        for i in ids:
            assert "result" in await h.response(i)
        await h.wait_for(lambda: len(agent.seen) == 3)
        assert agent.seen == {"a": (None, True, "a"), "c": (None, "c"), "d": (None, "d")}
        assert any(r.levelname == "ERROR" and "bad" in r.getMessage() for r in caplog.records)
        await close_and_check(h)

    run(body())


class AnnouncingAgent(Agent):
    """Each start callback writes one update, as the demo's does, and records that it began."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.first = asyncio.Event()
        self.opened = 0

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any]:
        self.opened += 1
        return {"sessionId": f"n{self.opened}"}

    async def on_session_start(self, session_id: str) -> None:
        self.started.append(session_id)
        self.first.set()
        await self.client.available_commands_update(session_id, [{"name": "x" * 200, "description": "y"}])


def test_r22_r26_start_callbacks_waiting_for_output_room_start_no_others_until_there_is_room(run: Any) -> None:
    """With the output above its high-water mark, the next start callbacks would only queue their
    update and wait too: none of them begins (and no starter task is made for them) until the
    client reads again; then every callback runs, in order."""

    async def body() -> None:
        agent = AnnouncingAgent()
        h = Harness(agent, limits=Limits(write_high_water=256, write_low_water=0))
        await h.initialize()
        h.transport.stall()  # the client stops reading
        ids = [h.request("session/new", {"cwd": f"/w{i}", "mcpServers": []}) for i in range(8)]
        await agent.first.wait()
        for _ in range(20):  # loop turns, not time: a starter scheduled for the next callback would run here
            await asyncio.sleep(0)
        assert len(agent.started) == 1, agent.started
        assert h.conn.counts["spawned"] == 1  # the one starter, waiting inside the first callback
        h.transport.unstall()
        answers = [await h.response(i) for i in ids]
        sids = [a["result"]["sessionId"] for a in answers]
        await h.wait_for(lambda: len(agent.started) == 8)
        assert agent.started == sids
        await h.wait_for(lambda: sum(m.get("method") == "session/update" for m in h.messages) == 8)
        await close_and_check(h)

    run(body())


class IdlessAgent(Agent):
    """Leaves the session id to the server: once with nothing, once with a shared dict of its own."""

    SHARED: dict[str, Any] = {"modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]}}

    def __init__(self) -> None:
        self.calls = 0

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any] | None:
        self.calls += 1
        return None if self.calls == 1 else self.SHARED


def test_session_new_without_an_id_from_the_agent_gets_one_and_the_agents_dict_is_left_alone(run: Any) -> None:
    async def body() -> None:
        h = Harness(IdlessAgent())
        await h.initialize()
        first = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]
        second = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]
        assert first["sessionId"].startswith("sess_") and second["sessionId"].startswith("sess_")
        assert first["sessionId"] != second["sessionId"]
        assert second["modes"] == IdlessAgent.SHARED["modes"] and "sessionId" not in IdlessAgent.SHARED
        assert h.server.sessions.find(second["sessionId"]).mode_id == "ask"  # type: ignore[union-attr]
        await close_and_check(h)

    run(body())
