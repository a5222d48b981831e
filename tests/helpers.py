"""In-memory client double: drives a real AgentServer without pipes or processes.

``Harness`` wires an Agent to a Connection whose read side is fed directly
(``send``) and whose write side lands in ``messages`` (decoded) and ``raw``
(bytes). Both directions are the product's in-memory pipe
(``acp_fast.peer.memory.MemoryTransport``) in its deliver-inside-``write``
mode; the agent's output pipe can be stalled (``transport.stall()``) to test
backpressure (R26). Waiting is event-driven (``wait_for``), never timed: a
predicate is re-checked after every write.

``AgentProcess`` (at the end) is the one exception: the driver for the few
end-to-end tests that run a real agent subprocess over pipes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, ClassVar

import orjson

from acp_fast.agent.base import Agent
from acp_fast.agent.server import AgentServer
from acp_fast.peer.connection import Connection
from acp_fast.peer.memory import MemoryTransport, Unwatched
from acp_fast.peer.reader import ReadProtocol
from acp_fast.peer.writer import Writer
from acp_fast.wire import _framing_py
from acp_fast.wire.framing import new_framer
from acp_fast.wire.limits import Limits

#: How a harness feeds its connection. "production" is what ``acp-fast serve``
#: runs under uvloop: the live framer (compiled, unless ``NO_EXTENSIONS``), the
#: loop reading into the protocol's buffer (``get_buffer``/``buffer_updated``).
#: "twin" is the pure-Python framer fed through ``data_received`` (the stdlib
#: pipe path). Either way a parked dispatch loop takes the lines inline, from
#: the read callback. conftest's ``read_path`` fixture runs a test module under both.
READ_PATHS = ("production", "twin")

#: The product reads this variable to use its pure-Python modules only; the
#: suite then checks that path and skips the tests of the compiled modules.
NO_EXTENSIONS = os.environ.get("ACP_FAST_NO_EXTENSIONS") == "1"


def pipe_into(reader: ReadProtocol, read_path: str) -> MemoryTransport:
    """The client's pipe into ``reader``, fed the way ``read_path`` names; delivery is in ``write``.

    The client writes whatever a test sends and never waits: when the agent
    stops reading, the pipe holds what is sent, as a real pipe would; a test
    that wants to know looks at ``read_transport.reading``.
    """
    pipe = MemoryTransport(asyncio.get_running_loop(), Unwatched(), immediate=True)
    pipe.connect(reader, zero_copy=read_path == "production")
    return pipe


class Harness:
    """One agent, one in-memory client. Use inside a running loop."""

    read_path: ClassVar[str] = "production"

    def __init__(
        self,
        agent: Agent,
        limits: Limits | None = None,
        framer_cls: type | None = None,
    ) -> None:
        self._wire(limits, framer_cls)
        self.server = AgentServer(agent, self.conn)
        self.agent = agent
        self.task: asyncio.Task[None] = self.loop.create_task(self.conn.run(), name="harness.run")

    def _wire(self, limits: Limits | None, framer_cls: type | None) -> None:
        """A Connection with an in-memory pipe on each side; nothing runs yet."""
        self.loop = asyncio.get_running_loop()
        self.limits = limits or Limits()
        self.writer = Writer(self.loop, self.limits)
        self.conn = Connection(self.loop, self.writer, self.limits)
        if framer_cls is not None:
            framer = framer_cls(self.limits.max_line_bytes, self.limits.overlimit_head_bytes)
        elif self.read_path == "production":
            framer = new_framer(self.limits)
        else:
            framer = _framing_py.LineFramer(self.limits.max_line_bytes, self.limits.overlimit_head_bytes)
        self.reader = ReadProtocol(self.conn, framer, self.limits.read_buffer_bytes)
        self.input = pipe_into(self.reader, self.read_path)
        self.read_transport = self.input.read_end
        self.on_output: Callable[[bytes], None] = self._on_output
        self.transport = MemoryTransport(self.loop, self.writer, self._output, immediate=True)
        self.writer.attach(self.transport)
        self.raw = bytearray()
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._next_id = 0

    def _output(self, data: bytes) -> None:
        """What the pipe delivers goes to ``on_output``, which a test may wrap to react inside a write."""
        self.on_output(data)

    def _on_output(self, data: bytes) -> None:
        self.raw += data
        for line in data.split(b"\n"):
            if line:
                self.messages.append(orjson.loads(line))
        self._changed.set()

    # -- input ------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Write ``data`` into the pipe: one read if the agent is reading, held in the pipe if not."""
        self.input.write(data)

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
        """Close the client's pipe: the agent reads EOF after everything sent before it."""
        self.input.close()

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


async def close_and_check(h: Harness) -> None:
    """The leak guard every Harness test ends with: EOF, full shutdown, then all counters zero."""
    await h.close()
    h.assert_no_leaks()


class AgentProcess:
    """A real ``python -m acp_fast ...`` subprocess over pipes, for the few end-to-end tests.

    A thread decodes stdout into ``inbox`` (one JSON object per line, or the
    raw bytes if a line is not JSON) and another collects stderr, so the test
    never deadlocks on a full pipe. ``HANG_S`` only turns a hang into a
    failure; no assertion depends on timing.
    """

    HANG_S = 60.0

    def __init__(
        self,
        *args: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        read_stdout: bool = True,
        python_args: bool = False,
        stdin_path: str | None = None,
    ) -> None:
        import os
        import queue
        import subprocess
        import sys
        import threading
        from pathlib import Path

        root = str(Path(__file__).resolve().parent.parent)
        stdin_file = None if stdin_path is None else open(stdin_path, "rb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *(args if python_args else ("-m", "acp_fast", *args))],
                stdin=subprocess.PIPE if stdin_file is None else stdin_file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd or root,
                env={**os.environ, **(env or {})},
            )
        finally:
            if stdin_file is not None:
                stdin_file.close()  # the child has its own copy
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.stdout_lines: list[bytes] = []
        self._stderr = bytearray()
        self._stderr_changed = threading.Condition()
        self._stderr_done = False
        self._next_id = 0
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        if read_stdout:
            self._out.start()
        self._err.start()

    def start_reading(self) -> None:
        """Begin draining stdout (for a test that made the agent wait on a full pipe)."""
        self._out.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout_lines.append(line)
            try:
                self.inbox.put(orjson.loads(line))
            except orjson.JSONDecodeError:
                self.inbox.put(line)
        self.inbox.put(EOFError("stdout closed"))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(65536):
            with self._stderr_changed:
                self._stderr += chunk
                self._stderr_changed.notify_all()
        with self._stderr_changed:
            self._stderr_done = True
            self._stderr_changed.notify_all()

    def wait_stderr(self, marker: str) -> None:
        """Block until ``marker`` appears on the agent's stderr (fails on a hang or exit)."""
        needle = marker.encode()
        with self._stderr_changed:
            ok = self._stderr_changed.wait_for(
                lambda: needle in self._stderr or self._stderr_done, self.HANG_S
            )
            if not ok or needle not in self._stderr:
                raise AssertionError(f"{marker!r} never appeared on stderr: {self.stderr[-2000:]}")

    # -- input -----------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, *objs: Any) -> None:
        self.send_raw(b"".join(orjson.dumps(o) + b"\n" for o in objs))

    def request(self, method: str, params: Any = None, id: Any = None) -> Any:
        if id is None:
            self._next_id += 1
            id = f"r{self._next_id}"
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            obj["params"] = params
        self.send(obj)
        return id

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    # -- output ------------------------------------------------------------------------
    def next(self) -> Any:
        """The next stdout message; fails on EOF or a hang."""
        import queue

        try:
            msg = self.inbox.get(timeout=self.HANG_S)
        except queue.Empty:
            raise AssertionError(f"no output from the agent within {self.HANG_S} s") from None
        if isinstance(msg, EOFError):
            self.inbox.put(msg)
            raise AssertionError(f"agent stdout closed; stderr: {self.stderr[-2000:]}")
        return msg

    def until_response(self, id: Any) -> tuple[list[Any], dict[str, Any]]:
        """Messages up to and including the response to ``id``: (before, response)."""
        before = []
        while True:
            msg = self.next()
            if isinstance(msg, dict) and "method" not in msg and msg.get("id") == id:
                return before, msg
            before.append(msg)

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Request, then the very next message must be its response (control lane order)."""
        rid = self.request(method, params)
        msg = self.next()
        assert isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg, msg
        return msg

    def initialize(self) -> None:
        assert "result" in self.call("initialize", {"protocolVersion": 1}), "initialize failed"

    def new_session(self, cwd: str = "/tmp") -> str:
        """Open a session; the session_start notification it triggers may follow."""
        rid = self.request("session/new", {"cwd": cwd, "mcpServers": []})
        _, resp = self.until_response(rid)
        return str(resp["result"]["sessionId"])

    def no_more_output(self) -> list[Any]:
        """After EOF: everything left on stdout (the reader thread has finished)."""
        self._out.join(self.HANG_S)
        rest = []
        while not self.inbox.empty():
            msg = self.inbox.get()
            if not isinstance(msg, EOFError):
                rest.append(msg)
        return rest

    def wait(self) -> int:
        """Wait for exit (after stdin closed or a signal); returns the exit status."""
        import subprocess

        try:
            rc = self.proc.wait(self.HANG_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the agent did not exit; stderr: {self.stderr[-2000:]}") from None
        self._err.join(self.HANG_S)
        return rc

    @property
    def stderr(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    def status(self, field: str) -> int:
        """A ``/proc/<pid>/status`` memory field (VmRSS, VmHWM) in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        import contextlib

        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


class ConnectionHarness(Harness):
    """The generic dispatch API alone: a bare Connection, no AgentServer (R18-R21).

    Tests register their own handlers on ``conn`` before sending anything;
    the rest (send, wait_for, response, close) is Harness's.
    """

    def __init__(self, limits: Limits | None = None, framer_cls: type | None = None) -> None:
        self._wire(limits, framer_cls)
        self.task = self.loop.create_task(self.conn.run(), name="connection-harness.run")

    def respond_to(self, request: dict[str, Any], result: Any) -> dict[str, Any]:
        """The client's answer to a request the connection sent."""
        return {"jsonrpc": "2.0", "id": request["id"], "result": result}

    def assert_no_leaks(self) -> None:
        counts = self.conn.counts
        assert counts == {"inbox": 0, "incoming": 0, "pending": 0, "spawned": 0}, counts
