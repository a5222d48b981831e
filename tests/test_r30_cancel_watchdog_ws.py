"""R30 over a real WebSocket: every agent shape that ignores its cancel, hosted by ``serve_ws``.

The same shapes as tests/test_r30_cancel_watchdog.py (which runs them in
memory and over a pipe), here behind the hosting front on 127.0.0.1: the
answer to the cancelled prompt comes once, after the updates sent before the
cancel (R05); nothing of that turn reaches the socket after it; the session
and the one pool slot stay taken until the body exits (R07, R08); and a drain
with such a turn still stuck ends (R14). Waits are bounded by ``BOUND_S`` and
order on messages and events, never on durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets

from acp_fast.hosting import AcpHost, serve_ws
from acp_fast.wire.limits import Limits
from tests.helpers import prompt_params
from tests.test_r30_cancel_watchdog import SHAPES, _dropped, _StubbornChildParent, _texts
from tests.watchdog_agents import IgnoresCancel

#: Hang guard for one awaited message (a hang fails the test; nothing is timed).
BOUND_S = 10.0

LIMITS = Limits(cancel_grace_s=0.01, max_background=1, shutdown_grace_s=0.05, abort_join_s=0.05)


class _Client:
    """A WebSocket client that keeps every message it read, in order."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.seen: list[Any] = []
        self._next_id = 0

    async def next(self) -> Any:
        msg = json.loads(await asyncio.wait_for(self.ws.recv(), BOUND_S))
        self.seen.append(msg)
        return msg

    async def request(self, method: str, params: Any) -> int:
        self._next_id += 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}))
        return self._next_id

    async def notify(self, method: str, params: Any) -> None:
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}))

    async def until_response(self, rid: int) -> dict[str, Any]:
        for _ in range(10_000):
            msg = await self.next()
            if isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
                return msg
        raise AssertionError("no answer")

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        return await self.until_response(await self.request(method, params))

    async def until_text(self, session_id: str, text: str) -> None:
        while text not in _texts(self.seen, session_id):
            await self.next()

    async def open(self, capabilities: dict[str, Any] | None = None) -> tuple[str, str]:
        await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}})
        a = (await self.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
        b = (await self.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
        return a, b


@contextlib.asynccontextmanager
async def _hosted(make: Any, release: Any) -> AsyncIterator[tuple[AcpHost, list[Any], Any]]:
    """``make``'s agents served on 127.0.0.1 and one WebSocket to them; at the end every agent is
    released (``release(agent)``) and the host drained, bounded."""
    agents: list[Any] = []

    def factory() -> Any:
        agents.append(make())
        return agents[-1]

    host = await serve_ws(factory, "127.0.0.1", 0, limits=LIMITS)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{host.port}/acp") as ws:
            yield host, agents, ws
    finally:
        for agent in agents:
            release(agent)
        await asyncio.wait_for(host.drain(), BOUND_S)


def _updates_saying(messages: list[Any], texts: tuple[str, ...]) -> list[Any]:
    """The session/update messages whose content text is one of ``texts`` (any session)."""
    return [
        m
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"].get("content", {}).get("text") in texts
    ]


@pytest.mark.parametrize("shape", SHAPES)
def test_r30_r08_over_a_websocket_ignored_cancel_is_answered_and_the_rest_of_the_turn_dropped(
    run: Any, shape: str
) -> None:
    async def body() -> None:
        async with _hosted(IgnoresCancel, IgnoresCancel.unblock) as (_host, _agents, ws):
            c = _Client(ws)
            sid, other = await c.open()
            pid = await c.request("session/prompt", prompt_params(sid, shape))
            await c.until_text(sid, "started")
            await c.notify("session/cancel", {"sessionId": sid})
            answer = await c.until_response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            assert _texts(c.seen, sid) == ["started", "after cancel"]  # R05: before the answer
            busy = await c.call("session/prompt", prompt_params(sid, "quick"))  # R07: body still runs
            assert "still finishing its cancellation" in busy["error"]["message"], busy
            full = await c.call("session/prompt", prompt_params(other, "quick"))  # R08: its slot is held
            assert full["error"]["code"] == -32000 and "background" in full["error"]["message"], full
            released = (await c.call("_release", {}))["result"]
            assert released["dropped"] == _dropped(shape), released
            again = await c.call("session/prompt", prompt_params(sid, "quick"))
            assert again["result"] == {"stopReason": "end_turn"}, again
            assert _texts(c.seen, sid) == ["started", "after cancel"]  # nothing late reached the socket
            assert len([m for m in c.seen if m.get("id") == pid and "method" not in m]) == 1  # R04

    run(body())


def test_r30_r14_over_a_websocket_drain_while_a_turn_swallows_every_cancel_is_bounded(run: Any) -> None:
    async def body() -> None:
        async with _hosted(IgnoresCancel, IgnoresCancel.unblock) as (host, _agents, ws):
            c = _Client(ws)
            sid, _ = await c.open()
            pid = await c.request("session/prompt", prompt_params(sid, "forever"))
            await c.until_text(sid, "started")
            drained = asyncio.ensure_future(host.drain())
            answer = await c.until_response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            await asyncio.wait_for(drained, BOUND_S)  # R14: ends although the body never returns
            rest = []
            with pytest.raises(websockets.ConnectionClosed):
                for _ in range(1000):
                    rest.append(json.loads(await asyncio.wait_for(ws.recv(), BOUND_S)))
            assert _texts(rest, sid) == [], rest
            assert host.counts["connections"] == 0

    run(body())


def test_r30_over_a_websocket_subagent_child_that_ignores_cancel_is_muted_with_its_parent(run: Any) -> None:
    async def body() -> None:
        async with _hosted(_StubbornChildParent.make, lambda agent: agent.release.set()) as (_host, agents, ws):
            c = _Client(ws)
            sid, _ = await c.open({"subagents": {}})
            pid = await c.request("session/prompt", prompt_params(sid, "go"))
            await asyncio.wait_for(agents[0].started.wait(), BOUND_S)
            await c.notify("session/cancel", {"sessionId": sid})
            answer = await c.until_response(pid)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
            agents[0].release.set()
            await asyncio.wait_for(agents[0].child_exited.wait(), BOUND_S)
            # A request answered after the child exited: everything the child sent late would be before it.
            await c.call("session/list", {})
            late = _updates_saying(c.seen[c.seen.index(answer) + 1 :], ("child late", "parent late"))
            assert late == [], late
            child_started = _updates_saying(c.seen[: c.seen.index(answer)], ("child started",))
            assert len(child_started) == 1, c.seen  # the child's own updates did reach the socket

    run(body())
