"""Interop: the official Python SDK's client (``acp.spawn_agent_process``) drives acp_fast over real pipes.

Two agents: ``acp-fast demo`` and the SDK-written sample agent served through
acp_fast.compat (``python tests/interop/sdk_sample_agent.py``). The SDK client
validates every request, notification and response it receives with its
pydantic models, so a schema violation fails the walk. Waiting is on events
(the client double's updates, the connection observers), never on time.
A raw-pipe client checks R06 byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

ROOT = Path(__file__).resolve().parents[2]
AGENTS = {
    "acp-fast-demo": [sys.executable, "-m", "acp_fast", "demo"],
    "sdk-agent-via-compat": [sys.executable, str(ROOT / "tests" / "interop" / "sdk_sample_agent.py")],
}
SERVE_SAMPLE = [sys.executable, "-m", "acp_fast", "serve", "tests.interop.sdk_sample_agent:SampleAgent"]
LONG = "stream 100000 10"  # far longer than any test runs: only a cancel ends it

pytestmark = pytest.mark.slow


class RecordingClient:
    """The client side: records updates, answers permission (allow) and fs from memory."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.files: dict[str, str] = {}
        self.permission_requests: list[Any] = []
        self.incoming: list[dict[str, Any]] = []
        self.outgoing: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        allow = next(o.option_id for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=self.files[path])

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.files[path] = content
        return WriteTextFileResponse()

    def observe(self, event: StreamEvent) -> None:
        """Connection observer: every decoded message in both directions."""
        (self.incoming if event.direction is StreamDirection.INCOMING else self.outgoing).append(event.message)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        while not (value := predicate()):
            self._changed.clear()
            await self._changed.wait()
        return value

    def texts(self, session_id: str) -> list[str]:
        return [
            u.content.text for sid, u in self.updates if sid == session_id and u.session_update == "agent_message_chunk"
        ]

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.outgoing if m.get("method") == method]


async def _walk(command: list[str]) -> RecordingClient:
    client = RecordingClient()
    async with spawn_agent_process(
        client, command[0], *command[1:], cwd=ROOT, transport_kwargs={"stderr": None}, observers=[client.observe]
    ) as (conn, process):
        fs = FileSystemCapabilities(read_text_file=True, write_text_file=True)
        init = await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(fs=fs))
        assert init.protocol_version == 1
        session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        sid = session.session_id
        assert session.modes is not None and "code" in {m.id for m in session.modes.available_modes}

        # A streaming prompt, answered after all its updates (R05).
        done = await conn.prompt(session_id=sid, prompt=[text_block("stream 3 0")])
        assert done.stop_reason == "end_turn"
        assert client.texts(sid)[-3:] == ["chunk 0 ", "chunk 1 ", "chunk 2 "]

        # Cancel mid-stream: after the first chunk has arrived.
        before = len(client.texts(sid))
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(LONG)]))
        await client.wait_for(lambda: len(client.texts(sid)) > before)
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"

        # R07: a second prompt while one runs is refused at once; the first is untouched.
        before = len(client.texts(sid))
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(LONG)]))
        await client.wait_for(lambda: len(client.texts(sid)) > before)
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert refused.value.code == -32000 and sid in str(refused.value)
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"

        # R10: cancel right behind the prompt (as soon as the prompt is written).
        prompts = len(client.sent("session/prompt"))
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(LONG)]))
        await client.wait_for(lambda: len(client.sent("session/prompt")) > prompts)
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"

        # Permission: the agent asks, this client allows.
        done = await conn.prompt(session_id=sid, prompt=[text_block("tool")])
        assert done.stop_reason == "end_turn"
        assert len(client.permission_requests) == 1
        statuses = [u.status for s, u in client.updates if s == sid and u.session_update == "tool_call_update"]
        assert statuses[-1] == "completed"

        # fs: write then read back through the client.
        path = str(ROOT / "interop-file.txt")
        wrote = await conn.prompt(session_id=sid, prompt=[text_block(f"write {path} hello world")])
        assert wrote.stop_reason == "end_turn"
        assert client.files == {path: "hello world"}
        read = await conn.prompt(session_id=sid, prompt=[text_block(f"read {path}")])
        assert read.stop_reason == "end_turn"
        assert any("11" in t for t in client.texts(sid)[-1:])

        if command == AGENTS["acp-fast-demo"]:
            # Schema 1.34 kinds: this client (SDK 0.12) cannot opt in to plans or notices, so the
            # demo sends the whole-plan update its models know, and nothing they would reject.
            planned = await conn.prompt(session_id=sid, prompt=[text_block("plan")])
            assert planned.stop_reason == "end_turn" and client.texts(sid)[-1] == "planned 2 steps"
            kinds = [u.session_update for s, u in client.updates if s == sid]
            assert "plan" in kinds and not {"plan_update", "plan_removed", "notice"} & set(kinds)
            await conn.prompt(session_id=sid, prompt=[text_block("system")])
            assert client.texts(sid)[-1] == "no system prompt"

        # Set mode; answered in order after every cancel above, so it is also the R06 barrier.
        await conn.set_session_mode(session_id=sid, mode_id="code")
        with pytest.raises(RequestError) as bad_mode:
            await conn.set_session_mode(session_id=sid, mode_id="no-such-mode")
        assert bad_mode.value.code == -32602
    assert process.returncode == 0
    return client


def _check_r06(client: RecordingClient) -> None:
    """Every request got exactly one response; the cancels (notifications) got none."""
    assert len(client.sent("session/cancel")) == 3
    sent_ids = [m["id"] for m in client.outgoing if "method" in m and "id" in m]
    answered = Counter(m.get("id") for m in client.incoming if "method" not in m)
    assert answered == Counter(sent_ids), (answered, sent_ids)
    # Every session/update the agent sent was accepted by the SDK's model and delivered.
    assert sum(1 for m in client.incoming if m.get("method") == "session/update") == len(client.updates)


@pytest.mark.parametrize("agent", list(AGENTS))
def test_interop_python_sdk_client_walk(agent: str) -> None:
    client = asyncio.run(asyncio.wait_for(_walk(AGENTS[agent]), 120))  # timeout: a hang guard only
    _check_r06(client)


@pytest.mark.parametrize(
    "command", [SERVE_SAMPLE, AGENTS["acp-fast-demo"]], ids=["sdk-agent-via-serve", "acp-fast-demo"]
)
def test_r06_raw_pipe_cancels_get_no_response_not_even_an_error(command: list[str]) -> None:
    def line(obj: dict[str, Any]) -> str:
        return json.dumps(obj) + "\n"

    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
    proc.stdin.write(
        line({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    )
    proc.stdin.flush()
    messages: list[dict[str, Any]] = []
    while not any(m.get("id") == 2 for m in messages):  # blocks on the pipe; ends at the response
        messages.append(json.loads(proc.stdout.readline()))
    sid = next(m["result"]["sessionId"] for m in messages if m.get("id") == 2)
    cancels = [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}},  # nothing running
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such-session"}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {}},  # malformed: no sessionId
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 7}},  # malformed: wrong type
        {"jsonrpc": "2.0", "method": "session/cancel", "params": [sid]},  # malformed: not an object
        {"jsonrpc": "2.0", "method": "session/cancel"},  # no params at all
    ]
    rest = "".join(line(c) for c in cancels) + line(
        {"jsonrpc": "2.0", "id": 3, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "code"}}
    )
    out, err = proc.communicate(rest, timeout=60)  # then EOF: the agent drains and exits
    assert proc.returncode == 0, err
    messages += [json.loads(raw) for raw in out.splitlines()]
    not_notifications = [m for m in messages if "method" not in m]
    assert [m.get("id") for m in not_notifications] == [1, 2, 3], messages
    assert all("result" in m for m in not_notifications), messages
