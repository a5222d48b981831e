"""compat.AgentSideConnection and compat.run_agent with the SDK's signatures: streams, transports, keywords.

Driven over a loopback socket pair (127.0.0.1) or an in-memory message
transport; waiting is on the messages themselves, never on time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from acp import RequestError
from acp.schema import InitializeResponse

from acp_fast.compat import AgentSideConnection, run_agent, use_in_sdk_http_server
from tests.sdk_matrix.test_sdk_release import ReleaseAgent, _socket_pair


async def _send(writer: asyncio.StreamWriter, *messages: Any) -> None:
    writer.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    await writer.drain()


async def _next(reader: asyncio.StreamReader) -> dict[str, Any]:
    line = await reader.readline()
    assert line, "the agent closed its side"
    message: dict[str, Any] = json.loads(line)
    return message


def _init(id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1}}


class _MemoryTransport:
    """One end of an in-memory message transport pair (send/receive/close of dicts), bounded queues."""

    def __init__(self, inbox: asyncio.Queue[Any], outbox: asyncio.Queue[Any]) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.closed = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        await self.outbox.put(message)

    async def receive(self) -> dict[str, Any] | None:
        message: dict[str, Any] | None = await self.inbox.get()
        return message

    async def close(self) -> None:
        self.closed.set()


def test_compat_connection_over_a_message_transport(run: Any) -> None:
    async def body() -> None:
        to_agent: asyncio.Queue[Any] = asyncio.Queue(maxsize=8)
        from_agent: asyncio.Queue[Any] = asyncio.Queue(maxsize=8)
        transport = _MemoryTransport(to_agent, from_agent)
        agent = ReleaseAgent()
        conn = AgentSideConnection(agent, transport)
        await to_agent.put(_init())
        answer = await from_agent.get()
        assert answer["id"] == 1 and InitializeResponse.model_validate(answer["result"]).protocol_version == 1
        new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        await to_agent.put(new)
        assert (await from_agent.get())["result"] == {"sessionId": "s1"}
        await to_agent.put(None)  # end of stream
        await conn.listen()
        await transport.closed.wait()

    run(body())


def test_compat_run_agent_with_custom_streams_serves_until_eof(run: Any) -> None:
    async def body() -> None:
        async with _socket_pair() as (sr, sw, cr, cw):
            served = asyncio.ensure_future(run_agent(ReleaseAgent(), sw, sr))
            await _send(cw, _init())
            assert (await _next(cr))["result"]["protocolVersion"] == 1
            cw.write_eof()
            await served
            assert await cr.readline() == b""  # run_agent closed its side after the shutdown

    run(body())


def test_compat_receive_timeout_ends_listen_with_the_sdks_error(run: Any) -> None:
    async def body() -> None:
        async with _socket_pair() as (sr, sw, _cr, _cw):
            conn = AgentSideConnection(ReleaseAgent(), sw, sr, listening=False, receive_timeout=0.05)
            with pytest.raises(RequestError) as caught:
                await conn.listen()  # the client never writes
            assert caught.value.code == -32603 and caught.value.data == {"details": "Agent timeout"}
            await conn.close()

    run(body())


def test_compat_blank_lines_skipped_bad_objects_answered_and_duplicate_ids_refused(run: Any) -> None:
    async def body() -> None:
        async with _socket_pair() as (sr, sw, cr, cw):
            never = asyncio.Event()

            class Slow(ReleaseAgent):
                async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
                    await never.wait()

            conn = AgentSideConnection(Slow(), sw, sr)
            cw.write(b"\n  \n\r\n")
            await _send(cw, _init(), {"jsonrpc": "2.0"})
            assert (await _next(cr))["id"] == 1  # the blank lines got no answer
            invalid = await _next(cr)  # JSON-RPC 2.0: an Invalid Request error with id null (the SDK is silent)
            assert invalid["id"] is None and invalid["error"]["code"] == -32600
            cw.write(b"[1, 2]\n")
            await cw.drain()
            assert (await _next(cr))["error"]["code"] == -32600
            prompt = {"sessionId": "p", "prompt": [{"type": "text", "text": "x"}]}
            await _send(cw, *[{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": prompt}] * 2)
            duplicate = await _next(cr)  # one answer per id: the second one in flight is refused
            assert duplicate["id"] == 7 and duplicate["error"]["code"] == -32600
            await conn.close()
            cancelled = await _next(cr)  # the shutdown answers the running prompt exactly once
            assert cancelled["id"] == 7 and await cr.readline() == b""

    run(body())


def test_compat_close_cancels_a_hung_initialize(run: Any) -> None:
    async def body() -> None:
        entered = asyncio.Event()

        class Hung(ReleaseAgent):
            async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
                entered.set()
                await asyncio.Event().wait()

        async with _socket_pair() as (sr, sw, cr, cw):
            conn = AgentSideConnection(Hung(), sw, sr)
            await _send(cw, _init())
            await entered.wait()
            await conn.close()
            answer = await _next(cr)
            assert answer["id"] == 1 and "error" in answer

    run(body())


@pytest.mark.slow
def test_compat_stdio_buffer_limit_is_a_read_size_not_a_line_cap_and_observers_see_stdio() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        import sys
        from acp.schema import InitializeResponse
        from acp_fast.compat import run_agent

        class Agent:
            async def initialize(self, protocol_version, **kwargs):
                return InitializeResponse(protocol_version=protocol_version)

        def observe(event):
            print(event.direction.value, event.message.get("id"), file=sys.stderr)

        asyncio.run(run_agent(Agent(), stdio_buffer_limit_bytes=1024, observers=[observe]))
        """
    )
    line = json.dumps({**_init(), "params": {"protocolVersion": 1, "_meta": {"data": "X" * 70_000}}}) + "\n"
    done = subprocess.run(
        [sys.executable, "-c", script], input=line, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    (answer,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    # observers on stdio: the SDK's StreamEvent for the request and for the answer
    assert [line for line in done.stderr.splitlines() if line in ("incoming 1", "outgoing 1")] == [
        "incoming 1",
        "outgoing 1",
    ]


def test_compat_accepts_the_older_releases_connection_plumbing_keywords(run: Any) -> None:
    async def body() -> None:
        async with _socket_pair() as (sr, sw, cr, cw):
            with pytest.raises(TypeError, match="bogus"):
                AgentSideConnection(ReleaseAgent(), sw, sr, bogus=1)
            conn = AgentSideConnection(ReleaseAgent(), sw, sr, queue=None, sender_factory=None)  # 0.8/0.10 names
            await _send(cw, _init())
            assert (await _next(cr))["result"]["protocolVersion"] == 1
            await conn.close()

    run(body())


def test_compat_connection_accepts_an_agent_class_or_factory_taking_the_connection(run: Any) -> None:
    class WithConn(ReleaseAgent):
        def __init__(self, conn: Any) -> None:
            super().__init__()
            self.given = conn

    async def body() -> None:
        made: list[Any] = []

        def factory(conn: Any) -> ReleaseAgent:
            made.append(WithConn(conn))
            return made[-1]

        for to_agent in (WithConn, factory):
            async with _socket_pair() as (sr, sw, cr, cw):
                conn = AgentSideConnection(to_agent, sw, sr)
                await _send(cw, _init())
                assert (await _next(cr))["result"]["protocolVersion"] == 1
                agent = conn.server.agent.sdk_agent  # type: ignore[attr-defined]
                assert isinstance(agent, WithConn) and agent.given is conn and agent.conn is conn
                await conn.close()
        assert len(made) == 1

    run(body())


def test_compat_serves_through_the_sdks_http_server(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    http_server = pytest.importorskip("acp.http.server", reason="HTTP serving exists from SDK 0.12 on")
    monkeypatch.setattr(http_server, "AgentSideConnection", http_server.AgentSideConnection)  # restored after
    assert use_in_sdk_http_server()

    async def body() -> None:
        given: list[Any] = []

        def factory(conn: Any) -> ReleaseAgent:
            given.append(conn)
            return ReleaseAgent()

        server = http_server.AcpServer(factory)
        result = await server.handle_post(
            _init(0), content_type="application/json", connection_id=None, session_id=None
        )
        if hasattr(result, "status_code"):  # 1.x answers with a starlette response
            status, answer = result.status_code, json.loads(result.body)
        else:
            status, answer = result.status, result.body
        assert status == 200 and answer["result"]["protocolVersion"] == 1
        (conn,) = given
        assert isinstance(conn, AgentSideConnection)
        await server.close()

    run(body())
