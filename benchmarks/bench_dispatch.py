"""In-process dispatch cost: acp_fast's server vs the official SDK's connection, no pipes.

    python -m pytest benchmarks/bench_dispatch.py --benchmark-only --benchmark-group-by=group

Each side is wired to the product's in-memory byte transport
(``acp_fast.peer.memory.MemoryTransport``, delivering inside ``write``):
acp_fast's real ReadProtocol -> Connection -> AgentServer -> Writer chain
with one such pipe in and one out, and the SDK's AgentSideConnection over an
``asyncio.StreamReader`` fed directly and a ``StreamWriter`` over such a pipe
that collects the bytes. Both serve the same demo logic (acp_fast.demo.DemoAgent,
acp_fast/tools/bench/sdk_demo_agent.py). One benchmark round feeds a batch of lines in
one chunk (as one pipe read would deliver them) and runs the loop until
every answer has been written; ``extra_info`` gives the per-message median
and ``correct`` says whether every answer was the expected one.

Groups: a control request (``session/set_mode``, 64 per round), a new session
(``session/new`` and the demo's start callback, 64 per round, 120 rounds), a prompt
admission (``session/prompt`` with ``stream 0 0``: admission, task, answer;
32 per round, one per session, the default pool size), and one update send
(an ``agent_message_chunk`` written the way each side's agent code writes it:
``client.agent_message_chunk`` in acp_fast, a pydantic chunk model and
``conn.session_update`` on the SDK; 64 per round, until all reached the
transport). Each runs on asyncio and on uvloop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import uvloop

from acp_fast.agent.server import AgentServer
from acp_fast.demo import DemoAgent
from acp_fast.peer.connection import Connection
from acp_fast.peer.memory import MemoryTransport, Unwatched
from acp_fast.peer.reader import ReadProtocol
from acp_fast.peer.writer import Writer
from acp_fast.tools.bench.sdk_demo_agent import SdkDemoAgent
from acp_fast.wire.framing import LineFramer
from acp_fast.wire.limits import Limits

CONTROLS_PER_ROUND = 64
PROMPTS_PER_ROUND = 32
UPDATES_PER_ROUND = 64
NEW_SESSIONS_PER_ROUND = 64
NEW_SESSION_ROUNDS = 120  # with the warm-up, 7,936 sessions: under Limits.max_sessions (10,000)


class _Sink:
    """Collects written lines; wakes the round when the expected answers (or updates) are in."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self._tail = b""
        self.want = 0
        self.done: asyncio.Future[None] | None = None
        self.updates: list[bytes] | None = None  # set by an update round: keep updates, not answers

    def __call__(self, data: bytes) -> None:
        parts = (self._tail + data).split(b"\n")
        self._tail = parts.pop()
        if self.updates is not None:
            self.updates.extend(p for p in parts if b'"session/update"' in p)
            got = len(self.updates)
        else:
            self.lines.extend(p for p in parts if b'"id"' in p)  # responses only; updates are dropped
            got = len(self.lines)
        if self.done is not None and got >= self.want and not self.done.done():
            self.done.set_result(None)


class _Drain:
    """The StreamWriter protocol side: never paused, so drain() returns at once."""

    async def _drain_helper(self) -> None:
        return None


class Wired:
    """One served agent; ``feed`` delivers one chunk, ``round`` waits for the answers."""

    def __init__(self, loop: asyncio.AbstractEventLoop, impl: str) -> None:
        self.loop = loop
        self.sink = _Sink()
        self.feed: Callable[[bytes], None]
        self.eof: Callable[[], Any]
        self.closers: list[Callable[[], Any]] = []
        if impl in ("acp_fast", "compat"):
            limits = Limits()
            writer = Writer(loop, limits)
            conn = Connection(loop, writer, limits)
            if impl == "compat":  # the SDK demo agent, served by acp_fast.compat (per_request.py --impl)
                from acp_fast.compat import wrap_sdk_agent

                self.agent: Any = wrap_sdk_agent(SdkDemoAgent())
            else:
                self.agent = DemoAgent()
            self.server: AgentServer | None = AgentServer(self.agent, conn)
            reader = ReadProtocol(conn, LineFramer(limits.max_line_bytes, limits.overlimit_head_bytes), 256 * 1024)
            into = MemoryTransport(loop, Unwatched(), immediate=True)
            into.connect(reader, zero_copy=False)  # data_received, as before the shared transport
            writer.attach(MemoryTransport(loop, writer, self.sink, immediate=True))
            self.task = loop.create_task(conn.run())
            self.feed = into.write
            if impl == "compat":  # SDK agents call get_running_loop(): their reads arrive inside the loop
                self.feed = lambda data: loop.call_soon(into.write, data)
            self.eof = into.close
        else:
            from acp.agent.connection import AgentSideConnection  # what acp.run_agent uses

            self.server = None

            async def build() -> tuple[asyncio.StreamReader, asyncio.Task[None]]:
                # The SDK's connection starts its sender task at construction: it needs a running loop.
                stream = asyncio.StreamReader(limit=64 * 1024 * 1024)
                sink = MemoryTransport(loop, Unwatched(), self.sink, immediate=True)
                out = asyncio.StreamWriter(sink, _Drain(), None, loop)  # type: ignore[arg-type]
                self.agent = SdkDemoAgent()
                sdk = AgentSideConnection(self.agent, out, stream, listening=False)
                self.closers.append(out.close)
                return stream, loop.create_task(sdk.listen())

            stream, self.task = loop.run_until_complete(build())
            self.feed = stream.feed_data
            self.eof = stream.feed_eof

    def update_round(self, send: Callable[[], Any], updates: int) -> list[bytes]:
        """Run ``send()`` (a coroutine writing ``updates`` updates) until all reached the transport."""
        self.sink.updates = []
        self.sink.want = updates
        self.sink.done = self.loop.create_future()
        self.loop.run_until_complete(send())
        self.loop.run_until_complete(asyncio.wait_for(self.sink.done, 30))
        got, self.sink.updates = self.sink.updates, None
        return got

    def round(self, chunk: bytes, answers: int) -> list[bytes]:
        self.sink.lines = []
        self.sink.want = answers
        self.sink.done = self.loop.create_future()
        self.feed(chunk)
        self.loop.run_until_complete(asyncio.wait_for(self.sink.done, 30))
        return self.sink.lines


def _lines(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def _request(id: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def _setup(loop_kind: str, impl: str, sessions: int) -> tuple[Wired, list[str]]:
    loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    w = Wired(loop, impl)
    w.round(_lines([_request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})]), 1)
    new = [_request(2 + i, "session/new", {"cwd": "/tmp", "mcpServers": []}) for i in range(sessions)]
    answers = w.round(_lines(new), sessions)
    ids = [orjson.loads(a)["result"]["sessionId"] for a in answers]
    return w, ids


def _close(w: Wired) -> None:
    """EOF, let the server shut down as it would at the end of stdin, then close the loop."""
    loop = w.loop
    try:
        w.eof()
        loop.run_until_complete(asyncio.wait_for(w.task, 30))
        for close in w.closers:
            close()
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


IMPLS = ["acp_fast", "official-sdk"]
LOOPS = ["asyncio", "uvloop"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("loop_kind", LOOPS)
def test_dispatch_control_request(benchmark: Any, loop_kind: str, impl: str) -> None:
    w, (sid,) = _setup(loop_kind, impl, 1)
    try:
        modes = ("code", "ask")
        chunk = _lines(
            [
                _request(1000 + i, "session/set_mode", {"sessionId": sid, "modeId": modes[i % 2]})
                for i in range(CONTROLS_PER_ROUND)
            ]
        )
        benchmark.group = f"dispatch session/set_mode, {CONTROLS_PER_ROUND} per round ({loop_kind})"
        answers = benchmark(w.round, chunk, CONTROLS_PER_ROUND)
        decoded = [orjson.loads(a) for a in answers]
        correct = len(decoded) == CONTROLS_PER_ROUND and all(d.get("result") == {} for d in decoded)
        _record(benchmark, CONTROLS_PER_ROUND, correct)
        assert correct, decoded[:3]
    finally:
        _close(w)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("loop_kind", LOOPS)
def test_dispatch_prompt_admission(benchmark: Any, loop_kind: str, impl: str) -> None:
    w, sids = _setup(loop_kind, impl, PROMPTS_PER_ROUND)
    try:
        prompt = [{"type": "text", "text": "stream 0 0"}]
        chunk = _lines(
            [_request(5000 + i, "session/prompt", {"sessionId": s, "prompt": prompt}) for i, s in enumerate(sids)]
        )
        benchmark.group = f"dispatch session/prompt admission, {PROMPTS_PER_ROUND} per round ({loop_kind})"
        answers = benchmark(w.round, chunk, PROMPTS_PER_ROUND)
        decoded = [orjson.loads(a) for a in answers]
        correct = len(decoded) == PROMPTS_PER_ROUND and all(
            d.get("result", {}).get("stopReason") == "end_turn" for d in decoded
        )
        _record(benchmark, PROMPTS_PER_ROUND, correct)
        assert correct, decoded[:3]
    finally:
        _close(w)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("loop_kind", LOOPS)
def test_dispatch_new_session(benchmark: Any, loop_kind: str, impl: str) -> None:
    """session/new with the demo's start callback (an available_commands_update, R22 phase two).

    A fixed number of rounds: every round opens NEW_SESSIONS_PER_ROUND sessions for
    good, and one acp_fast connection holds at most Limits.max_sessions.
    """
    w, _ = _setup(loop_kind, impl, 1)
    try:
        chunk = _lines(
            [
                _request(9000 + i, "session/new", {"cwd": "/tmp", "mcpServers": []})
                for i in range(NEW_SESSIONS_PER_ROUND)
            ]
        )
        benchmark.group = f"dispatch session/new, {NEW_SESSIONS_PER_ROUND} per round ({loop_kind})"
        answers = benchmark.pedantic(
            w.round, (chunk, NEW_SESSIONS_PER_ROUND), rounds=NEW_SESSION_ROUNDS, warmup_rounds=2
        )
        decoded = [orjson.loads(a) for a in answers]
        correct = len(decoded) == NEW_SESSIONS_PER_ROUND and all(
            isinstance(d.get("result", {}).get("sessionId"), str) and "modes" in d["result"] for d in decoded
        )
        _record(benchmark, NEW_SESSIONS_PER_ROUND, correct)
        assert correct, decoded[:3]
    finally:
        _close(w)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("loop_kind", LOOPS)
def test_send_update(benchmark: Any, loop_kind: str, impl: str) -> None:
    w, (sid,) = _setup(loop_kind, impl, 1)
    text = "Here is the next word "
    try:
        if impl == "acp_fast":
            client = w.agent.client

            async def send() -> None:
                for _ in range(UPDATES_PER_ROUND):
                    await client.agent_message_chunk(sid, text, message_id="m1")

        else:
            from acp import schema

            conn = w.agent._conn

            async def send() -> None:
                for _ in range(UPDATES_PER_ROUND):
                    chunk = schema.AgentMessageChunk(
                        session_update="agent_message_chunk",
                        content=schema.TextContentBlock(type="text", text=text),
                        message_id="m1",
                    )
                    await conn.session_update(sid, chunk)

        benchmark.group = f"send one session/update, {UPDATES_PER_ROUND} per round ({loop_kind})"
        lines = benchmark(w.update_round, send, UPDATES_PER_ROUND)
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}, "messageId": "m1"}
        want = {"sessionId": sid, "update": chunk}
        decoded = [orjson.loads(line) for line in lines]
        correct = len(decoded) == UPDATES_PER_ROUND and all(
            d.get("method") == "session/update" and d.get("params") == want for d in decoded
        )
        _record(benchmark, UPDATES_PER_ROUND, correct)
        assert correct, decoded[:2]
    finally:
        _close(w)


def _record(benchmark: Any, per_round: int, correct: bool) -> None:
    benchmark.extra_info["correct"] = correct
    benchmark.extra_info["messages_per_round"] = per_round
    if benchmark.stats is not None:
        median = benchmark.stats.stats.median
        benchmark.extra_info["per_message_us"] = median / per_round * 1e6
        benchmark.extra_info["messages_per_s"] = per_round / median
