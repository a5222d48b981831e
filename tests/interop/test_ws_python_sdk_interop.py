"""Interop over WebSocket: the official Python SDK's client (``acp.ws``) walks ``acp-fast demo --listen``.

One server process on 127.0.0.1; 20 SDK clients at once, each over its own
socket: initialize, session/new, a streaming prompt, cancel mid-stream,
set_mode while a prompt runs, a permission round trip, a second session on
the same connection. Each ``101`` must carry a distinct ``Acp-Connection-Id``.
Then SIGTERM with prompts running: each is answered ``cancelled``, each socket
is closed with 1001, and the process exits 0 (R29). Waits are on events; the
timeouts are hang guards only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from acp import connect_to_agent, text_block
from acp.schema import ClientCapabilities
from acp.ws import create_websocket_stream

from tests.interop.test_python_sdk_interop import LONG, RecordingClient

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 20

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: list[str]) -> tuple[subprocess.Popen[bytes], list[bytes]]:
    """``python -m acp_fast ARGS``; returns once it listens, its stderr read on by a thread."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_fast", *args], cwd=ROOT, stderr=subprocess.PIPE, start_new_session=True
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()  # printed once the socket listens
    assert b"serving ACP over WebSocket" in banner, banner
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    _readers[proc.pid] = reader
    return proc, lines


_readers: dict[int, threading.Thread] = {}


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Kill the server and anything it started (its own session), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _readers.pop(proc.pid).join()  # the pipe is at EOF once the process is gone
    if proc.stderr is not None:
        proc.stderr.close()


async def _walk(url: str) -> tuple[str, RecordingClient]:
    client = RecordingClient()
    transport = await create_websocket_stream(url)
    connection_id = transport._ws.response.headers["Acp-Connection-Id"]  # type: ignore[attr-defined]
    conn = connect_to_agent(client, transport, observers=[client.observe])
    init = await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
    assert init.protocol_version == 1
    sid = (await conn.new_session(cwd=str(ROOT), mcp_servers=[])).session_id

    done = await conn.prompt(session_id=sid, prompt=[text_block("stream 3 0")])
    assert done.stop_reason == "end_turn"
    assert client.texts(sid)[-3:] == ["chunk 0 ", "chunk 1 ", "chunk 2 "]

    before = len(client.texts(sid))
    running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(LONG)]))
    await client.wait_for(lambda: len(client.texts(sid)) > before)
    await conn.set_session_mode(session_id=sid, mode_id="code")  # answered while the prompt runs
    assert not running.done()
    await conn.cancel(session_id=sid)
    assert (await running).stop_reason == "cancelled"

    done = await conn.prompt(session_id=sid, prompt=[text_block("tool")])
    assert done.stop_reason == "end_turn"
    assert len(client.permission_requests) == 1

    sid2 = (await conn.new_session(cwd=str(ROOT), mcp_servers=[])).session_id
    assert sid2 != sid
    done = await conn.prompt(session_id=sid2, prompt=[text_block("stream 2 0")])
    assert done.stop_reason == "end_turn"
    await conn.close()
    return connection_id, client


async def _held_prompt(url: str) -> tuple[Any, asyncio.Task[Any], RecordingClient]:
    client = RecordingClient()
    transport = await create_websocket_stream(url)
    conn = connect_to_agent(client, transport, observers=[client.observe])
    await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
    sid = (await conn.new_session(cwd=str(ROOT), mcp_servers=[])).session_id
    running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(LONG)]))
    await client.wait_for(lambda: client.texts(sid))
    return transport, running, client


def test_interop_python_sdk_ws_clients_walk_concurrently_then_drain() -> None:
    port = _free_port()
    url = f"ws://127.0.0.1:{port}/acp"
    proc, _stderr = start_server(["demo", "--pace-ms", "1", "--listen", f"127.0.0.1:{port}"])
    try:

        async def main() -> None:
            walked = await asyncio.gather(*(_walk(url) for _ in range(CLIENTS)))
            ids = [cid for cid, _ in walked]
            assert len(set(ids)) == CLIENTS, ids
            held = [await _held_prompt(url) for _ in range(3)]
            proc.send_signal(signal.SIGTERM)
            for transport, running, _client in held:
                assert (await running).stop_reason == "cancelled"
                ws = transport._ws
                await ws.wait_closed()
                assert ws.close_code == 1001

        asyncio.run(asyncio.wait_for(main(), 120))  # timeout: a hang guard only
        assert proc.wait(timeout=60) == 0, b"".join(_stderr).decode()
    finally:
        stop_server(proc)
