"""R27-R29: many ACP connections per process over WebSocket on one /acp endpoint.

The host runs in the test's loop on 127.0.0.1 (port 0); clients are raw
``websockets`` connections, so every frame and close code is visible. Waits
are on incoming messages and events, never on time; loops are bounded.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from acp_fast.agent.base import Agent, current_turn
from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, bearer_token
from acp_fast.wire.limits import Limits
from tests.host_helpers import wait_counts_zero as _wait_counts_zero
from tests.host_helpers import with_host as _with_host
from tests.ws_helpers import WsClient, client_frame, read_frame

LONG = "stream 100000 5"  # only a cancel or a drain ends it


def _url(host: AcpHost, path: str = "/acp") -> str:
    return f"ws://127.0.0.1:{host.port}{path}"


async def _http_get(host: AcpHost, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A bare HTTP/1.1 GET on loopback; returns (status, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{host.port}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = await reader.read()  # the server closes after a non-101 answer
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


# -- R27: one WebSocket = one ACP connection, whole contract ------------------------------------------
def test_r27_walk_initialize_session_stream_cancel_set_mode_permission_second_session(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        c.auto_answer = lambda m: (
            {"outcome": {"outcome": "selected", "optionId": "allow"}}
            if m["method"] == "session/request_permission"
            else None
        )
        assert c.connection_id
        init = await c.initialize()
        assert init["protocolVersion"] == 1
        sid = await c.new_session()
        # a streaming prompt, cancelled mid-stream; set_mode answered while it runs (R01 vs R02)
        pid = await c.request_nowait("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]})
        await c.wait_for(lambda: len(c.updates(sid)) >= 3)
        mode = await c.request("session/set_mode", {"sessionId": sid, "modeId": "code"})
        assert mode.get("result") == {}, mode
        assert c.find(pid) is None  # the prompt still runs
        await c.notify("session/cancel", {"sessionId": sid})
        assert (await c.response(pid))["result"] == {"stopReason": "cancelled"}
        # a permission round trip
        tool = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tool"}]})
        assert tool["result"] == {"stopReason": "end_turn"}
        assert any(m.get("method") == "session/request_permission" for m in c.messages)
        # a second session on the same connection, both usable
        sid2 = await c.new_session()
        assert sid2 != sid
        short = {"sessionId": sid2, "prompt": [{"type": "text", "text": "stream 3 0"}]}
        done = await c.request("session/prompt", short)
        assert done["result"] == {"stopReason": "end_turn"}
        assert host.counts["sessions"] == 2
        await c.close()
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_r27_many_concurrent_connections_have_distinct_ids_and_own_pools(run: Any) -> None:
    n = 24

    async def one(host: AcpHost) -> str:
        c = await WsClient.open(_url(host))
        await c.initialize()
        sid = await c.new_session()
        pid = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 20 0"}]}
        )
        assert (await c.response(pid))["result"] == {"stopReason": "end_turn"}
        assert len([u for u in c.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]) == 20
        await c.close()
        assert c.connection_id is not None
        return c.connection_id

    async def body(host: AcpHost) -> None:
        ids = await asyncio.gather(*(one(host) for _ in range(n)))
        assert len(set(ids)) == n
        assert host.counts["accepted"] == n
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_r27_socket_close_is_eof_prompt_cancelled_and_released(run: Any) -> None:
    class Parking(Agent):
        started: asyncio.Event
        finished: list[str]

        async def new_session(self, cwd: str, mcp_servers: list[Any], **kw: Any) -> dict[str, Any]:
            return {}

        async def prompt(self, session_id: str, prompt: list[Any], **kw: Any) -> None:
            PARK.started.set()
            try:
                await current_turn().token.wait()
            finally:
                PARK.finished.append(session_id)

    class PARK:
        started = asyncio.Event()
        finished: list[str] = []

    async def body(host: AcpHost) -> None:
        PARK.started = asyncio.Event()
        c = await WsClient.open(_url(host))
        await c.initialize()
        sid = await c.new_session()
        await c.request_nowait("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
        await PARK.started.wait()
        assert host.counts["running_prompts"] == 1
        c.ws.transport.abort()  # TCP reset, no close frame
        await _wait_counts_zero(host)
        assert PARK.finished == [sid]

    run(_with_host(body, factory=Parking))


# -- bad input over the network ---------------------------------------------------------------------
def test_r27_non_json_frame_gets_parse_error_and_socket_stays_open(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        await c.send_raw("this is not json")
        err = await c.wait_for(lambda: next((m for m in c.messages if "error" in m), None))
        assert err["error"]["code"] == -32700 and err["id"] is None
        await c.initialize()  # still open, and initialize is still the first message
        await c.send_raw('[{"jsonrpc":"2.0","id":7,"method":"session/list"}]')
        batch = await c.wait_for(lambda: [m for m in c.messages if "error" in m][1:])
        assert batch[0]["error"]["code"] == -32600
        await c.send_raw(b"\x00\x01binary")
        await c.send_raw(b"more binary")
        sid = await c.new_session()  # binary frames were ignored, the connection still serves
        assert sid
        assert host.counts["binary_frames"] == 2
        await c.close()

    run(_with_host(body))


def test_r27_first_message_not_initialize_closes_1002(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        await c.request_nowait("session/new", {"cwd": "/", "mcpServers": []})
        await c.closed.wait()
        assert c.close_code == 1002
        assert c.messages == []
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_r27_oversize_frame_closes_1009(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        await c.initialize()
        await c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "x", "params": {"p": "a" * 5000}}))
        await c.closed.wait()
        assert c.close_code == 1009
        await _wait_counts_zero(host)

    run(_with_host(body, limits=Limits(max_line_bytes=4096)))


# -- before the upgrade: health, origin, auth, limits --------------------------------------------------
def test_r29_health_and_readiness_endpoints(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        assert await _http_get(host, "/healthz") == (200, b"ok\n")
        assert await _http_get(host, "/readyz") == (200, b"ready\n")
        assert (await _http_get(host, "/nowhere"))[0] == 404
        # neither an upgrade nor an event stream: the Streamable HTTP profile wants Accept: text/event-stream
        assert (await _http_get(host, "/acp", {"Connection": "close"}))[0] == 406
        host.draining = True
        assert (await _http_get(host, "/readyz"))[0] == 503
        assert (await _http_get(host, "/healthz"))[0] == 200
        host.draining = False

    run(_with_host(body))


def test_browser_origins_are_refused_unless_allowed(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        with pytest.raises(InvalidStatus) as refused:
            await WsClient.open(_url(host), origin="https://evil.example")  # type: ignore[arg-type]
        assert refused.value.response.status_code == 403
        ok = await WsClient.open(_url(host), origin="https://ide.example")  # type: ignore[arg-type]
        await ok.initialize()
        await ok.close()
        plain = await WsClient.open(_url(host))  # no Origin: not a browser
        await plain.initialize()
        await plain.close()

    run(_with_host(body, allowed_origins=["https://ide.example"]))


def test_auth_hook_refuses_with_401_before_any_acp_traffic(run: Any) -> None:
    created: list[DemoAgent] = []

    def factory() -> DemoAgent:
        created.append(DemoAgent())
        return created[-1]

    async def body(host: AcpHost) -> None:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Acp-Connection-Id": "0" * 32}):
            with pytest.raises(InvalidStatus) as refused:
                await WsClient.open(_url(host), additional_headers=headers)
            assert refused.value.response.status_code == 401
        assert created == []  # no agent, no ACP state for a refused client
        c = await WsClient.open(_url(host), additional_headers={"Authorization": "Bearer s3cret"})
        await c.initialize()
        await c.close()
        assert len(created) == 1

    run(_with_host(body, factory=factory, authorize=bearer_token("s3cret")))


def test_r28_connection_limit_answers_503_before_the_upgrade(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        held = [await WsClient.open(_url(host)) for _ in range(2)]
        with pytest.raises(InvalidStatus) as refused:
            await WsClient.open(_url(host))
        assert refused.value.response.status_code == 503
        await held[0].close()
        for _ in range(100_000):  # the slot frees once the first connection's shutdown ran
            if host.counts["connections"] < 2:
                break
            await asyncio.sleep(0)
        again = await WsClient.open(_url(host))
        await again.initialize()
        for c in [again, held[1]]:
            await c.close()

    run(_with_host(body, limits=Limits(max_connections=2)))


def test_r28_process_wide_session_and_prompt_limits(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        a, b = await WsClient.open(_url(host)), await WsClient.open(_url(host))
        for c in (a, b):
            await c.initialize()
        sa = await a.new_session()
        sb = await b.new_session()
        refused = await b.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert refused["error"]["code"] == -32000  # the process holds 2 sessions (limit 2)
        pa = await a.request_nowait("session/prompt", {"sessionId": sa, "prompt": [{"type": "text", "text": LONG}]})
        await a.wait_for(lambda: a.updates(sa))
        busy = await b.request("session/prompt", {"sessionId": sb, "prompt": [{"type": "text", "text": "x"}]})
        assert busy["error"]["code"] == -32000  # one prompt runs in the process (limit 1)
        await a.notify("session/cancel", {"sessionId": sa})
        assert (await a.response(pa))["result"] == {"stopReason": "cancelled"}
        ok = await b.request("session/prompt", {"sessionId": sb, "prompt": [{"type": "text", "text": "stream 2 0"}]})
        assert ok["result"] == {"stopReason": "end_turn"}
        await a.close()
        await b.close()
        await _wait_counts_zero(host)

    run(_with_host(body, limits=Limits(max_sessions_total=2, max_running_prompts=1)))


class BigAnswers(DemoAgent):
    """Answers ``_big`` on the control lane with 64 KiB: answers bypass producer backpressure."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * 65536}


class HugeAnswer(DemoAgent):
    """Answers ``_huge`` with 32 MiB at once: more than loopback socket buffers hold, past any cap."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * (32 * 1024 * 1024)}


def test_r28_output_past_the_cap_closes_1008_others_unaffected(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        slow = await WsClient.open(_url(host))
        fast = await WsClient.open(_url(host))
        for c in (slow, fast):
            await c.initialize()
        s_fast = await fast.new_session()
        slow.ws.transport.pause_reading()  # the slow client stops reading its socket
        await slow.request_nowait("_huge", {})
        # the other connection streams undisturbed meanwhile
        done = await fast.request(
            "session/prompt", {"sessionId": s_fast, "prompt": [{"type": "text", "text": "stream 50 0"}]}
        )
        assert done["result"] == {"stopReason": "end_turn"}
        for _ in range(2000):  # bounded: the stall timer is 0.05 s; the client must not read before it fires
            if any(p.out is not None and p.out.is_closing() for p in host.registry.peers):
                break
            await asyncio.sleep(0.01)
        slow.ws.transport.resume_reading()
        await slow.closed.wait()
        assert slow.close_code == 1008
        await fast.close()
        await _wait_counts_zero(host)

    limits = Limits(max_buffered_output_bytes=256 * 1024, output_stall_timeout_s=0.05, drain_flush_s=60.0)
    run(_with_host(body, factory=HugeAnswer, limits=limits))


class MediumAnswers(DemoAgent):
    """Answers ``_medium`` (any extension method) with 8 KiB on the control lane."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * 8192}


def test_r26_a_client_sending_without_reading_is_paused_not_closed(run: Any) -> None:
    """Answers count against the high-water mark: past it the socket is not read, so while the client
    floods without reading, its buffered output stays near the mark instead of growing to the cap."""

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        try:
            await c.initialize()
            c.ws.transport.pause_reading()
            for _ in range(2500):  # 2500 x 8 KiB answers: far past the loopback socket buffers plus the cap
                await c.request_nowait("_medium", {})
                await asyncio.sleep(0)  # requests trickle in, as from a live client
                assert host.counts["connections"] == 1, "closed instead of paused"
            counts = host.counts
            assert counts["connections"] == 1 and counts["reading_paused"] == 1, counts
            assert counts["max_buffered_output"] < 1024 * 1024, counts  # held, not growing to the cap
        finally:
            c.ws.transport.abort()  # also on failure: no socket left for a later test to collect
        await _wait_counts_zero(host)

    limits = Limits(max_buffered_output_bytes=1024 * 1024, drain_flush_s=1.0)
    run(_with_host(body, factory=MediumAnswers, limits=limits))


class SizedAnswers(DemoAgent):
    """Answers ``_sized`` with ``{"data": "y" * n}``."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "y" * int(params["n"])}


def test_r26_frames_queued_behind_a_slow_reader_arrive_intact(run: Any) -> None:
    """Large and small answers alternate while the client does not read, so frames queue in the transport;
    once it reads, each arrives whole. (picows frames a large payload with a view of a reused header
    buffer that uvloop and 3.12+ asyncio keep as is while the socket is backed up.)"""
    sizes = [12_000 + (i * 7919) % 50_000 if i % 2 == 0 else 100 + (i * 37) % 8000 for i in range(600)]

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        try:
            await c.initialize()
            c.ws.transport.pause_reading()
            ids = [await c.request_nowait("_sized", {"n": n}) for n in sizes]
            for _ in range(100_000):  # until the server holds its input: its output is queued
                if host.counts["reading_paused"] == 1:
                    break
                await asyncio.sleep(0)
            assert host.counts["reading_paused"] == 1, host.counts
            c.ws.transport.resume_reading()
            await c.wait_for(lambda: all(c.find(i) for i in ids))
            got = [len(c.find(i)["result"]["data"]) for i in ids]  # type: ignore[index]
            assert got == sizes
            assert c.non_json == [] and c.close_exc is None
        finally:
            c.ws.transport.abort()
        await _wait_counts_zero(host)

    run(_with_host(body, factory=SizedAnswers, limits=Limits(max_buffered_output_bytes=64 * 1024 * 1024)))


# -- R29: drain -----------------------------------------------------------------------------------------------
def test_r29_drain_cancels_running_prompts_answers_them_and_closes_1001(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        clients = [await WsClient.open(_url(host)) for _ in range(5)]
        pids = []
        for c in clients:
            await c.initialize()
            sid = await c.new_session()
            pid = await c.request_nowait(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}
            )
            await c.wait_for(lambda c=c, sid=sid: c.updates(sid))
            pids.append(pid)
        assert host.counts["running_prompts"] == 5
        port = host.port
        await host.drain()
        assert (await _http_get_refused(port)) is True  # the listener is closed after the drain
        for c, pid in zip(clients, pids, strict=True):
            await c.closed.wait()
            assert c.find(pid)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
            assert c.close_code == 1001
        assert host.counts == {**host.counts, "connections": 0, "sessions": 0, "running_prompts": 0}

    run(_with_host(body))


async def _http_get_refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return True
    writer.close()
    return False


def test_r29_upgrades_during_drain_get_503(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        host.draining = True
        with pytest.raises(InvalidStatus) as refused:
            await WsClient.open(_url(host))
        assert refused.value.response.status_code == 503
        host.draining = False

    run(_with_host(body))


def test_many_connections_dropped_mid_prompt_free_every_reservation(run: Any) -> None:
    n = 40

    async def one(host: AcpHost) -> None:
        c = await WsClient.open(_url(host))
        await c.initialize()
        sid = await c.new_session()
        await c.request_nowait("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]})
        await c.wait_for(lambda: c.updates(sid))
        sock = c.ws.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.ws.transport.abort()  # RST, mid-prompt

    async def body(host: AcpHost) -> None:
        await asyncio.gather(*(one(host) for _ in range(n)))
        await _wait_counts_zero(host)
        assert host.counts["accepted"] == n

    run(_with_host(body))


def test_unanswered_ping_closes_the_connection(run: Any) -> None:
    """A client that completes the upgrade, then never answers a ping, is disconnected."""

    async def body(host: AcpHost) -> None:
        reader, writer = await _raw_upgrade(host)
        rest = await reader.read()  # returns at EOF: the server gave up on the silent client
        writer.close()
        assert rest[:1] == b"\x89"  # what it sent first was a ping
        await _wait_counts_zero(host)

    run(_with_host(body, limits=Limits(ping_interval_s=0.05, ping_timeout_s=0.05)))


async def _raw_upgrade(host: AcpHost) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    writer.write(
        b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    return reader, writer


def test_a_close_frame_without_a_status_is_answered_with_a_valid_one(run: Any) -> None:
    """The TypeScript SDK closes with an empty close frame; echoing its 'code' sent the invalid status 0."""

    async def body(host: AcpHost) -> None:
        reader, writer = await _raw_upgrade(host)
        writer.write(b"\x88\x80\x00\x00\x00\x00")  # FIN+close, masked, empty payload
        reply = await reader.read()  # up to the server's EOF
        writer.close()
        assert reply[:2] == b"\x88\x02", reply  # one close frame with a 2-byte status...
        assert int.from_bytes(reply[2:4], "big") == 1000  # ...that is a valid one: normal closure
        await _wait_counts_zero(host)

    run(_with_host(body))


def _text(message: dict[str, Any]) -> bytes:
    return client_frame(0x1, json.dumps(message).encode())


CLOSE_1000 = client_frame(0x8, struct.pack(">H", 1000))


async def _until(reader: asyncio.StreamReader, seen: list[dict[str, Any]], done: Any) -> None:
    """Read server frames into ``seen`` until ``done(seen)``; a close frame first is a failure."""
    for _ in range(100_000):
        if done(seen):
            return
        b0, payload = await read_frame(reader)
        assert b0 & 0x0F != 0x8, f"closed early: {seen}"
        if b0 & 0x0F == 0x1:
            seen.append(json.loads(payload))
    raise AssertionError("condition never held")


async def _until_close(reader: asyncio.StreamReader, seen: list[dict[str, Any]]) -> int:
    """Read server frames into ``seen`` up to the close frame; return its status (nothing may follow it)."""
    for _ in range(100_000):
        b0, payload = await read_frame(reader)
        if b0 & 0x0F == 0x8:
            assert await reader.read() == b"", "bytes after the close frame"
            return int(struct.unpack(">H", payload[:2])[0])
        if b0 & 0x0F == 0x1:
            seen.append(json.loads(payload))
    raise AssertionError("no close frame")


def _answers(seen: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in seen if "id" in m and "method" not in m}


def test_r27_close_frame_behind_requests_is_eof_every_request_answered_before_the_close(run: Any) -> None:
    """Requests and the client's close in one write: the close is EOF, so each request is answered first."""

    async def body(host: AcpHost) -> None:
        reader, writer = await _raw_upgrade(host)
        writer.write(
            _text({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            + _text({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
            + _text({"jsonrpc": "2.0", "id": 3, "method": "no/such_method"})
            + CLOSE_1000
        )
        seen: list[dict[str, Any]] = []
        code = await _until_close(reader, seen)
        writer.close()
        answers = _answers(seen)
        assert sorted(answers) == [1, 2, 3], seen
        assert answers[1]["result"]["protocolVersion"] == 1
        assert answers[2]["result"]["sessionId"]
        assert answers[3]["error"]["code"] == -32601
        assert code == 1000
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_r27_close_frame_during_a_prompt_cancels_it_and_its_answer_precedes_the_close(run: Any) -> None:
    """A close while a prompt streams is EOF (R13): the prompt ends cancelled, answered before the close."""

    async def body(host: AcpHost) -> None:
        reader, writer = await _raw_upgrade(host)
        writer.write(
            _text({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            + _text({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
        )
        seen: list[dict[str, Any]] = []
        await _until(reader, seen, lambda s: 2 in _answers(s))
        sid = _answers(seen)[2]["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}
        writer.write(_text({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}))
        await _until(reader, seen, lambda s: any(m.get("method") == "session/update" for m in s))
        assert host.counts["running_prompts"] == 1
        writer.write(CLOSE_1000)
        code = await _until_close(reader, seen)
        writer.close()
        assert _answers(seen)[3]["result"] == {"stopReason": "cancelled"}
        assert code == 1000
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_r27_an_established_connection_keeps_no_upgrade_headers_and_the_auth_hook_still_saw_them(run: Any) -> None:
    """picows keeps the upgrade request and response for a connection's life: their header maps
    (read once, to route and authorize the upgrade) are dropped once the connection is up."""
    seen: list[str | None] = []

    def authorize(headers: Any) -> Any:
        seen.append(headers.get("authorization"))
        return "alice"

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host), additional_headers={"Authorization": "Bearer t0k"})
        await c.initialize()
        peers = [p for p in host.registry.peers if getattr(p, "ws", None) is not None]
        assert len(peers) == 1
        ws = peers[0].ws
        assert ws.request.path.startswith(b"/acp")  # the request itself is still there
        assert len(ws.request.headers) == 0 and len(ws.response.headers) == 0
        sid = await c.new_session()  # and the connection serves on
        assert (await c.request("session/set_mode", {"sessionId": sid, "modeId": "code"}))["result"] == {}
        await c.close()
        await _wait_counts_zero(host)

    run(_with_host(body, authorize=authorize))
    assert seen == ["Bearer t0k"]
