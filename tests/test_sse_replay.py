"""Resumable Streamable HTTP streams (``sse_replay``) over a real socket.

A client reads a session stream, its socket breaks mid-turn, and it comes
back with ``Last-Event-ID``: it gets every event after that id once, in order,
then the live stream; an id the ring no longer holds gets the stream-gap
notification first. The agent's turn waits on an event between the two halves
of its updates, so the break always falls inside the turn; waits are bounded
and order on messages, never on durations.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp_fast.agent.base import Agent
from acp_fast.hosting import serve_ws
from acp_fast.transports.routing import STREAM_GAP_METHOD
from acp_fast.wire.limits import Limits
from tests.http_helpers import HttpAcpClient, request

BOUND_S = 10.0


class Gated(Agent):
    """Three updates, a wait on ``gate``, three more, then the answer."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        for n in range(3):
            await self.client.agent_message_chunk(session_id, f"a{n}")
        await self.gate.wait()
        for n in range(3):
            await self.client.agent_message_chunk(session_id, f"b{n}")
        return "end_turn"


def _texts(client: HttpAcpClient, session: str) -> list[str]:
    return [u["content"]["text"] for u in client.updates(session)]


async def _broken_mid_turn(replay: int) -> tuple[Any, HttpAcpClient, Gated, str, int, int]:
    """A turn whose session stream broke after its first three updates; the stream is not yet reopened."""
    agents: list[Gated] = []

    def factory() -> Gated:
        agents.append(Gated())
        return agents[-1]

    host = await serve_ws(factory, "127.0.0.1", 0, limits=Limits(sse_replay=replay))
    client = HttpAcpClient(host.port)
    await client.initialize()
    sid = await client.new_session()
    rid = await client.request_nowait(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}, session=sid
    )
    await asyncio.wait_for(client.wait_for(lambda: len(_texts(client, sid)) == 3), BOUND_S)
    stream = client.streams[sid]
    assert stream.ids == [1, 2, 3], stream.ids  # each event of the session stream has its id
    stream.close()  # the socket breaks (RST); what the server writes next to it is lost
    await asyncio.wait_for(stream.closed.wait(), BOUND_S)
    agents[0].gate.set()
    return host, client, agents[0], sid, rid, stream.ids[-1]


def test_a_reader_that_comes_back_with_last_event_id_gets_the_rest_of_the_turn_once(run: Any) -> None:
    async def body() -> None:
        host, client, _, sid, rid, last = await _broken_mid_turn(replay=64)
        try:
            resumed = await client.open_stream(sid, last_event_id=last)
            answer = await asyncio.wait_for(client.response(rid), BOUND_S)
            assert answer["result"] == {"stopReason": "end_turn"}, answer
            assert _texts(client, sid) == ["a0", "a1", "a2", "b0", "b1", "b2"]  # no gap, no repeat
            assert resumed.ids == [4, 5, 6, 7]  # the three updates and the answer, numbered on
            assert not any(m.get("method") == STREAM_GAP_METHOD for _, m in client.messages)
        finally:
            client.close()
            await asyncio.wait_for(host.drain(), BOUND_S)

    run(body())


def test_a_reader_whose_last_event_fell_out_of_the_ring_is_told_before_the_stream_goes_on(run: Any) -> None:
    async def body() -> None:
        host, client, _, sid, rid, _ = await _broken_mid_turn(replay=2)
        try:
            await client.open_stream(sid, last_event_id=1)
            answer = await asyncio.wait_for(client.response(rid), BOUND_S)
            assert answer["result"] == {"stopReason": "end_turn"}, answer
            resumed = [m for where, m in client.messages if where == sid][3:]
            assert resumed[0]["method"] == STREAM_GAP_METHOD, resumed
            assert resumed[0]["params"]["lastEventId"] == "1" and resumed[0]["params"]["reason"] == "evicted"
            assert resumed[-1] == answer
        finally:
            client.close()
            await asyncio.wait_for(host.drain(), BOUND_S)

    run(body())


def test_a_malformed_last_event_id_is_refused_400_and_the_connection_keeps_serving(run: Any) -> None:
    async def body() -> None:
        host = await serve_ws(Gated, "127.0.0.1", 0, limits=Limits(sse_replay=8))
        client = HttpAcpClient(host.port)
        try:
            await client.initialize()
            sid = await client.new_session()
            assert client.connection_id is not None
            for bad in ("-1", "x7", "1" * 30):
                headers = {
                    "Accept": "text/event-stream",
                    "Acp-Connection-Id": client.connection_id,
                    "Acp-Session-Id": sid,
                    "Last-Event-ID": bad,
                }
                reply = await asyncio.wait_for(request(host.port, "GET", headers), BOUND_S)
                assert reply.status == 400 and b"Last-Event-ID" in reply.body, (bad, reply)
            again = await asyncio.wait_for(client.request("session/new", {"cwd": "/tmp", "mcpServers": []}), BOUND_S)
            assert "sessionId" in again["result"], again
        finally:
            client.close()
            await asyncio.wait_for(host.drain(), BOUND_S)

    run(body())
