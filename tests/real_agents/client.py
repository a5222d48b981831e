"""A scripted ACP client over a real agent process's stdio, recording everything both ways.

Each line the agent writes is kept, in the order read, with what the client wrote: that is the
transcript the real-agent tests diff between the SDK's runtime and acp_fast.compat. The client
answers the agent's ``session/request_permission`` with the first ``allow_once`` option it is
offered and every other agent->client request with -32601 (it advertises no fs/terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

Message = dict[str, Any]


class AgentError(Exception):
    """The agent answered a request with an error (kept whole in ``error``)."""

    def __init__(self, error: Message) -> None:
        super().__init__(json.dumps(error))
        self.error = error


class AgentProcess:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, stderr_path: str, step_timeout: float) -> None:
        self.argv, self.env, self.cwd, self.stderr_path = argv, env, cwd, stderr_path
        self.step_timeout = step_timeout
        self.log: list[tuple[str, Message]] = []  # ("out", what the client wrote) / ("in", what it read)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._next_id = 0
        self._changed = asyncio.Event()
        self.permission_requests = 0

    async def __aenter__(self) -> AgentProcess:
        err = os.open(self.stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                env=self.env, cwd=self.cwd, limit=64 * 1024 * 1024, start_new_session=True)
        finally:
            os.close(err)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            await proc.wait()
        if self._reader is not None:
            await asyncio.wait_for(self._reader, 5)

    def _write(self, msg: Message) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self.log.append(("out", msg))
        self._proc.stdin.write(json.dumps(msg).encode() + b"\n")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        out = self._proc.stdout
        while line := await out.readline():
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:  # something not JSON on the agent's stdout: kept as text
                self.log.append(("text", {"line": line.decode(errors="replace").rstrip()}))
                continue
            self.log.append(("in", msg))
            if "method" in msg and "id" in msg:
                self._answer(msg)
            elif "method" not in msg and msg.get("id") in self._pending:
                fut = self._pending.pop(msg["id"])
                if not fut.done():
                    fut.set_result(msg)
            self._changed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(EOFError("the agent closed its stdout"))
        self._changed.set()

    def _answer(self, msg: Message) -> None:
        if msg["method"] == "session/request_permission":
            self.permission_requests += 1
            options = msg["params"]["options"]
            chosen = next(o for o in options if o["kind"] == "allow_once")
            self._write({"jsonrpc": "2.0", "id": msg["id"],
                         "result": {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}})
        else:
            self._write({"jsonrpc": "2.0", "id": msg["id"],
                         "error": {"code": -32601, "message": "Method not found", "data": {"method": msg["method"]}}})

    def start(self, method: str, params: Message) -> asyncio.Future[Message]:
        self._next_id += 1
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = fut
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return fut

    async def request(self, method: str, params: Message) -> Any:
        answer = await asyncio.wait_for(self.start(method, params), self.step_timeout)
        if "error" in answer:
            raise AgentError(answer["error"])
        return answer.get("result")

    def notify(self, method: str, params: Message) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_for(self, pred: Callable[[Message], bool]) -> Message:
        """The first message read (from the start of this connection) that satisfies ``pred``."""

        async def scan() -> Message:
            seen = 0
            while True:
                self._changed.clear()
                for direction, msg in self.log[seen:]:
                    if direction == "in" and pred(msg):
                        return msg
                seen = len(self.log)
                if self._reader is not None and self._reader.done():
                    raise EOFError("the agent closed its stdout")
                await self._changed.wait()

        return await asyncio.wait_for(scan(), self.step_timeout)
