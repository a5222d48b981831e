"""End to end over real pipes: ``python -m acp_fast demo`` as a subprocess, on uvloop and on asyncio.

One session per event loop (uvloop with stdin on an ``os.pipe()``; asyncio
with stdin on a socketpair, as libuv-based clients such as Node spawn
agents): initialize, session/new, a ``stream 50 0`` prompt read to its
``end_turn`` response (R05: all 50 chunks, in order, before it), then stdin
is closed and the agent must exit 0 with no traceback on stderr (R13/R14).
Every message is checked against the official SDK's schema models. The
timeout only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

import orjson
import pytest
from acp import schema

pytestmark = pytest.mark.slow

HANG_TIMEOUT_S = 120.0  # generous: two shared cores; nothing here depends on speed
CHUNKS = 50


class Agent:
    """The client side of one demo subprocess; its stdin is our end of a pipe or a socketpair."""

    def __init__(self, proc: asyncio.subprocess.Process, stdin: int | socket.socket) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.stdout = proc.stdout
        self._stdin: int | socket.socket | None = stdin

    async def send(self, msg: dict[str, Any]) -> None:
        # A few hundred bytes into an empty pipe or socket buffer: the blocking write returns at once.
        data = orjson.dumps(msg) + b"\n"
        assert self._stdin is not None, "stdin already closed"
        if isinstance(self._stdin, socket.socket):
            self._stdin.sendall(data)
        else:
            os.write(self._stdin, data)

    def close_stdin(self) -> None:
        """Send EOF (idempotent)."""
        if isinstance(self._stdin, socket.socket):
            self._stdin.close()
        elif self._stdin is not None:
            os.close(self._stdin)
        self._stdin = None

    async def read(self) -> dict[str, Any]:
        line = await self.stdout.readline()
        assert line.endswith(b"\n"), f"agent closed stdout early (got {line!r})"
        assert line.count(b"\n") == 1
        msg = orjson.loads(line)
        assert msg["jsonrpc"] == "2.0"
        return msg  # type: ignore[no-any-return]

    async def call(self, rid: int, method: str, params: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
        """Send a request; return its result and the notifications that came before it."""
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        before: list[dict[str, Any]] = []
        while True:
            msg = await self.read()
            if "id" not in msg:
                before.append(msg)
                continue
            assert msg["id"] == rid, f"unexpected message {msg!r}"
            assert "error" not in msg, msg
            return msg["result"], before


async def _session(extra_args: list[str], stdin_kind: str) -> tuple[int, bytes, list[bytes]]:
    ours: int | socket.socket
    if stdin_kind == "pipe":
        theirs, ours = os.pipe()
    else:
        ours, child = socket.socketpair()
        theirs = child.detach()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "acp_fast",
            "demo",
            *extra_args,
            stdin=theirs,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except BaseException:
        if isinstance(ours, socket.socket):
            ours.close()
        else:
            os.close(ours)
        raise
    finally:
        os.close(theirs)  # the child holds its own copy now
    agent = Agent(proc, ours)
    assert proc.stderr is not None
    stderr = asyncio.ensure_future(proc.stderr.read())
    try:
        result, _ = await agent.call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        init = schema.InitializeResponse.model_validate(result)
        assert init.protocol_version == 1

        result, _ = await agent.call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = schema.NewSessionResponse.model_validate(result).session_id

        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"stream {CHUNKS} 0"}]}
        result, updates = await agent.call(3, "session/prompt", prompt)
        assert schema.PromptResponse.model_validate(result).stop_reason == "end_turn"
        texts = []
        for note in updates:
            assert note["method"] == "session/update"
            parsed = schema.SessionNotification.model_validate(note["params"])
            assert parsed.session_id == sid
            if note["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                texts.append(note["params"]["update"]["content"]["text"])
        assert texts == [f"chunk {i} " for i in range(CHUNKS)]

        agent.close_stdin()
        tail = (await agent.stdout.read()).splitlines()
        return await proc.wait(), await stderr, tail
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stderr.cancel()
        agent.close_stdin()


@pytest.mark.parametrize(
    ("extra_args", "stdin_kind"),
    [([], "pipe"), (["--no-uvloop"], "socketpair")],
    ids=["uvloop-stdin_pipe", "asyncio-stdin_socketpair"],
)
def test_r05_r14_demo_streams_a_prompt_over_pipes_and_exits_cleanly_on_eof(
    extra_args: list[str], stdin_kind: str
) -> None:
    rc, stderr, tail = asyncio.run(asyncio.wait_for(_session(extra_args, stdin_kind), HANG_TIMEOUT_S))
    assert rc == 0, stderr.decode(errors="replace")
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
    for line in tail:  # anything written after the response is a well-formed notification
        msg = orjson.loads(line)
        assert msg["jsonrpc"] == "2.0" and "id" not in msg, msg
