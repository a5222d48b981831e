"""In-memory client double: drives a real AgentServer without pipes or processes.

``Harness`` wires an Agent to a Connection whose read side is fed directly
(``send``) and whose write side lands in ``messages`` (decoded) and ``raw``
(bytes). Waiting is event-driven (``wait_for``), never timed: a predicate is
re-checked after every write. The write transport can be stalled to test
backpressure (R26).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from acp_fast import _framing_py
from acp_fast.agent import Agent
from acp_fast.dispatch import Connection
from acp_fast.limits import Limits
from acp_fast.protocol import ReadProtocol
from acp_fast.server import AgentServer
from acp_fast.transport import Writer


class FakeWriteTransport(asyncio.WriteTransport):
    """Collects writes; ``stall()`` makes it hold them and report a growing buffer."""

    def __init__(self, on_data: Callable[[bytes], None], writer: Writer) -> None:
        super().__init__()
        self._on_data = on_data
        self._writer = writer
        self._held: list[bytes] = []
        self._held_size = 0
        self._high = 64 * 1024
        self._low = 16 * 1024
        self._stalled = False
        self._closing = False
        self.paused = False
        self.max_held = 0
        self.fail_with: BaseException | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        data = bytes(data)
        if not self._stalled:
            self._on_data(data)
            return
        self._held.append(data)
        self._held_size += len(data)
        self.max_held = max(self.max_held, self._held_size)
        if self._held_size > self._high and not self.paused:
            self.paused = True
            self._writer.pause_writing()

    def stall(self) -> None:
        self._stalled = True

    def unstall(self) -> None:
        self._stalled = False
        held, self._held, self._held_size = self._held, [], 0
        for data in held:
            self._on_data(data)
        if self.paused:
            self.paused = False
            self._writer.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self._held_size

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is not None:
            self._high = high
        if low is not None:
            self._low = low

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            if self._held:
                self.unstall()
            asyncio.get_running_loop().call_soon(self._writer.connection_lost, None)

    def break_pipe(self) -> None:
        """Simulate the client dying: the next write fails with EPIPE."""
        self.fail_with = BrokenPipeError(32, "Broken pipe")


class FakeReadTransport(asyncio.ReadTransport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.closed = False

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class Harness:
    """One agent, one in-memory client. Use inside a running loop."""

    def __init__(
        self,
        agent: Agent,
        limits: Limits | None = None,
        framer_cls: type | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.limits = limits or Limits()
        self.writer = Writer(self.loop, self.limits)
        self.conn = Connection(self.loop, self.writer, self.limits)
        self.server = AgentServer(agent, self.conn)
        self.agent = agent
        cls = framer_cls or _framing_py.LineFramer
        self.reader = ReadProtocol(
            self.conn, cls(self.limits.max_line_bytes, self.limits.overlimit_head_bytes), 4096
        )
        self.read_transport = FakeReadTransport()
        self.reader.connection_made(self.read_transport)
        self.transport = FakeWriteTransport(self._on_output, self.writer)
        self.writer.attach(self.transport)
        self.raw = bytearray()
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._next_id = 0
        self.task: asyncio.Task[None] = self.loop.create_task(self.conn.run(), name="harness.run")

    def _on_output(self, data: bytes) -> None:
        self.raw += data
        for line in data.split(b"\n"):
            if line:
                self.messages.append(orjson.loads(line))
        self._changed.set()

    # -- input ------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.reader.data_received(data)

    def send(self, *objs: Any) -> None:
        """Send messages in one read chunk (as one pipe read would deliver them)."""
        self.send_raw(b"".join(orjson.dumps(o) + b"\n" for o in objs))

    def request_obj(self, method: str, params: Any = None, id: Any = None) -> dict[str, Any]:
        if id is None:
            self._next_id += 1
            id = self._next_id
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            obj["params"] = params
        return obj

    def request(self, method: str, params: Any = None, id: Any = None) -> Any:
        obj = self.request_obj(method, params, id)
        self.send(obj)
        return obj["id"]

    def notify(self, method: str, params: Any = None) -> None:
        obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            obj["params"] = params
        self.send(obj)

    def eof(self) -> None:
        self.reader.eof_received()

    # -- output -------------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        while True:
            value = predicate()
            if value:
                return value
            if self.task.done():
                self.task.result()
                value = predicate()
                if value:
                    return value
                raise AssertionError("the connection ended before the awaited output")
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait({waiter, self.task}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    def responses(self, id: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m and m.get("id") == id]

    def find_response(self, id: Any) -> dict[str, Any] | None:
        found = self.responses(id)
        return found[0] if found else None

    async def response(self, id: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.wait_for(lambda: self.find_response(id))
        return result

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its whole response object."""
        return await self.response(self.request(method, params))

    def outgoing_requests(self, method: str | None = None) -> list[dict[str, Any]]:
        return [
            m for m in self.messages if "method" in m and "id" in m and (method is None or m["method"] == method)
        ]

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]
            for m in self.messages
            if m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]

    async def initialize(self, client_capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = await self.call(
            "initialize", {"protocolVersion": 1, "clientCapabilities": client_capabilities or {}}
        )
        assert "result" in resp, resp
        result: dict[str, Any] = resp["result"]
        return result

    async def new_session(self, cwd: str = "/tmp") -> str:
        resp = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        assert "result" in resp, resp
        return str(resp["result"]["sessionId"])

    async def close(self) -> None:
        """EOF, then wait for the whole shutdown to finish."""
        self.eof()
        await self.task

    def assert_no_leaks(self) -> None:
        """Slots, reservations and tasks all back to zero (R15)."""
        assert self.server.pool.in_flight == 0, self.server.pool.jobs()
        assert all(not s.busy for s in self.server.sessions)
        counts = self.conn.counts
        assert counts["pending"] == 0 and counts["incoming"] == 0, counts
        assert counts["spawned"] == 0, counts


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
