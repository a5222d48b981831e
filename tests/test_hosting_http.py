"""The Streamable HTTP profile on /acp: POST in, event streams out, each connection the whole contract (R27-R29).

The host runs in the test's loop on 127.0.0.1 (port 0); the client is raw h11
over sockets (tests/http_helpers.py), so every status and header is visible.
Waits are on incoming messages and stream ends, never on time.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from acp_fast.wire.limits import Limits
from tests.host_helpers import wait_counts_zero as _wait_counts_zero
from tests.host_helpers import with_host as _with_host
from tests.http_helpers import HttpAcpClient, SseStream, request

LONG = "stream 100000 5"  # only a cancel or a drain ends it
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}


def _allow(m: dict[str, Any]) -> Any:
    if m["method"] == "session/request_permission":
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}
    return None


def test_r27_http_walk_initialize_session_stream_cancel_set_mode_permission_second_session(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        c.auto_answer = _allow
        init = await c.initialize()
        assert init["protocolVersion"] == 1 and c.connection_id
        sid = await c.new_session()
        assert c.find(next(m["id"] for _, m in c.messages if "result" in m and "sessionId" in m["result"]))[0] is None  # type: ignore[index]
        pid = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}, sid
        )
        await c.wait_for(lambda: len(c.updates(sid)) >= 3)
        assert all(where == sid for where, m in c.messages if m.get("method") == "session/update")
        mode = await c.request("session/set_mode", {"sessionId": sid, "modeId": "code"}, sid)
        assert mode.get("result") == {}, mode
        assert c.find(pid) is None  # the prompt still runs
        await c.notify("session/cancel", {"sessionId": sid}, sid)
        where, answer = await c.wait_for(lambda: c.find(pid))
        assert answer["result"] == {"stopReason": "cancelled"} and where == sid
        tool = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tool"}]}, sid)
        assert tool["result"] == {"stopReason": "end_turn"}
        assert any(m.get("method") == "session/request_permission" and where == sid for where, m in c.messages)
        sid2 = await c.new_session()
        assert sid2 != sid
        done = await c.request(
            "session/prompt", {"sessionId": sid2, "prompt": [{"type": "text", "text": "stream 3 0"}]}, sid2
        )
        assert done["result"] == {"stopReason": "end_turn"}
        assert host.counts["sessions"] == 2 and host.counts["connections"] == 1
        reply = await c.delete()
        assert reply.status == 202
        await asyncio.gather(*(s.closed.wait() for s in c.streams.values()))
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_http_requests_refused_with_their_status(run: Any) -> None:
    """415, 406, 400, 404, 405 and the initialize answer's header, on raw requests."""

    async def body(host: AcpHost) -> None:
        port = host.port
        assert (await request(port, "POST", {"Content-Type": "text/plain"}, json.dumps(INIT).encode())).status == 415
        init = await request(
            port, "POST", {"Content-Type": "application/json; charset=utf-8"}, json.dumps(INIT).encode()
        )
        assert init.status == 200 and init.headers["content-type"] == "application/json"
        assert init.json()["id"] == 0 and "result" in init.json()
        cid = init.headers["acp-connection-id"]
        assert len(cid) == 32
        assert (await request(port, "GET", {"Acp-Connection-Id": cid})).status == 406  # no Accept: text/event-stream
        sse = {"Accept": "text/event-stream"}
        assert (await request(port, "GET", sse)).status == 400  # no connection id
        assert (await request(port, "GET", {**sse, "Acp-Connection-Id": "0" * 32})).status == 404
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        json_ = {"Content-Type": "application/json"}
        assert (await request(port, "POST", json_, json.dumps(new).encode())).status == 400  # not initialize, no id
        unknown = await request(port, "POST", {**json_, "Acp-Connection-Id": "f" * 32}, json.dumps(new).encode())
        assert unknown.status == 404
        again = await request(port, "POST", {**json_, "Acp-Connection-Id": cid}, json.dumps(INIT).encode())
        assert again.status == 400  # initialize on an existing connection
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        no_session = await request(port, "POST", {**json_, "Acp-Connection-Id": cid}, json.dumps(prompt).encode())
        assert no_session.status == 400 and b"Acp-Session-Id" in no_session.body
        other = {**json_, "Acp-Connection-Id": cid, "Acp-Session-Id": "t"}
        assert (await request(port, "POST", other, json.dumps(prompt).encode())).status == 400  # mismatched
        accepted = await request(port, "POST", {**json_, "Acp-Connection-Id": cid}, json.dumps(new).encode())
        assert accepted.status == 202 and accepted.body == b""
        assert (await request(port, "PUT", {"Acp-Connection-Id": cid})).status == 405
        assert (await request(port, "DELETE", {})).status == 400
        assert (await request(port, "DELETE", {"Acp-Connection-Id": cid})).status == 202
        await _wait_counts_zero(host)
        assert (await request(port, "DELETE", {"Acp-Connection-Id": cid})).status == 404

    run(_with_host(body))


def test_http_bad_json_and_batches_get_json_rpc_errors_and_the_connection_serves_on(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        await c.initialize()
        bad = await c.post(None, raw=b"this is not json")
        assert bad.status == 400 and bad.json()["error"]["code"] == -32700 and bad.json()["id"] is None
        batch = await c.post(None, raw=b'[{"jsonrpc":"2.0","id":7,"method":"session/list"}]')
        assert batch.status == 400 and batch.json()["error"]["code"] == -32600
        scalar = await c.post(None, raw=b"3")
        assert scalar.status == 400 and scalar.json()["error"]["code"] == -32600
        assert await c.new_session()  # still serving
        unknown = await c.request("no/such_method", {})
        assert unknown["error"]["code"] == -32601  # answered on the connection stream
        await c.delete()
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_http_second_reader_of_a_stream_gets_409(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        await c.initialize()
        sid = await c.new_session()
        headers = {"Accept": "text/event-stream", "Acp-Connection-Id": c.connection_id or ""}
        assert (await request(host.port, "GET", headers)).status == 409
        assert (await request(host.port, "GET", {**headers, "Acp-Session-Id": sid})).status == 409
        c.streams[sid].close()  # the reader goes away: the stream takes a new one
        await c.streams[sid].closed.wait()
        for _ in range(100_000):
            if host.counts["http_streams"] == 1:
                break
            await asyncio.sleep(0)
        again = await c.open_stream(sid)
        assert again.status == 200
        await c.delete()
        await _wait_counts_zero(host)

    run(_with_host(body))


def test_http_body_over_the_message_limit_gets_413(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        big = json.dumps({**INIT, "params": {"pad": "a" * 5000}}).encode()
        assert (await request(host.port, "POST", {"Content-Type": "application/json"}, big)).status == 413
        assert host.counts["connections"] == 0

    run(_with_host(body, limits=Limits(max_line_bytes=4096)))


def test_http_keep_alive_pipelined_and_chunked_requests(run: Any) -> None:
    """Two requests in one write on one socket, the second with a chunked body: both answered in order."""

    async def body(host: AcpHost) -> None:
        init = json.dumps(INIT).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        first = b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            len(init),
            init,
        )
        second = (
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(init), init)
        )
        writer.write(first + second)
        data = await reader.read()  # the server closes after the second answer (Connection: close)
        writer.close()
        answers = data.split(b"HTTP/1.1 ")[1:]
        assert len(answers) == 2, data
        assert all(a.startswith(b"200") and b"Acp-Connection-Id" in a for a in answers)
        assert host.counts["connections"] == 2

    run(_with_host(body))


def test_http_auth_and_principal_and_origin_on_every_request(run: Any) -> None:
    def who(headers: Any) -> str | bool:
        token = headers.get("Authorization", "")
        return token.removeprefix("Bearer ") if token in ("Bearer alice", "Bearer bob") else False

    async def body(host: AcpHost) -> None:
        port = host.port
        json_ = {"Content-Type": "application/json"}
        assert (await request(port, "POST", json_, json.dumps(INIT).encode())).status == 401
        alice = HttpAcpClient(port, {"Authorization": "Bearer alice"})
        await alice.initialize()
        cid = alice.connection_id or ""
        bob = {"Authorization": "Bearer bob", "Acp-Connection-Id": cid}
        new = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
        assert (await request(port, "POST", {**json_, **bob}, new.encode())).status == 404  # another principal
        assert (await request(port, "GET", {**bob, "Accept": "text/event-stream"})).status == 404
        assert (await request(port, "DELETE", bob)).status == 404
        no_token = {**json_, "Acp-Connection-Id": cid}
        assert (await request(port, "POST", no_token, new.encode())).status == 401
        browser = {**json_, "Authorization": "Bearer alice", "Acp-Connection-Id": cid, "Origin": "https://evil.example"}
        assert (await request(port, "POST", browser, new.encode())).status == 403
        assert await alice.new_session()
        assert (await alice.delete()).status == 202
        await _wait_counts_zero(host)

    run(_with_host(body, authorize=who))


def test_r28_http_connections_count_against_max_connections(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        a, b = HttpAcpClient(host.port), HttpAcpClient(host.port)
        await a.initialize()
        await b.initialize()
        refused = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
        assert refused.status == 503
        await a.delete()
        for _ in range(100_000):
            if host.counts["connections"] < 2:
                break
            await asyncio.sleep(0)
        c = HttpAcpClient(host.port)
        await c.initialize()
        for x in (b, c):
            await x.delete()
        await _wait_counts_zero(host)

    run(_with_host(body, limits=Limits(max_connections=2)))


def test_r29_http_drain_answers_running_prompts_cancelled_and_ends_every_stream(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        clients, pids = [], []
        for _ in range(3):
            c = HttpAcpClient(host.port)
            await c.initialize()
            sid = await c.new_session()
            pid = await c.request_nowait(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}, sid
            )
            await c.wait_for(lambda c=c, sid=sid: c.updates(sid))
            clients.append(c)
            pids.append((pid, sid))
        assert host.counts["running_prompts"] == 3
        await host.drain()
        for c, (pid, sid) in zip(clients, pids, strict=True):
            await asyncio.gather(*(s.closed.wait() for s in c.streams.values()))
            found = c.find(pid)
            assert found is not None and found[0] == sid and found[1]["result"] == {"stopReason": "cancelled"}
        assert host.counts == {**host.counts, "connections": 0, "sessions": 0, "running_prompts": 0}

    run(_with_host(body))


def test_http_connection_with_no_stream_read_ends_after_the_ping_bounds(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        init = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
        assert init.status == 200
        assert host.counts["connections"] == 1
        await _wait_counts_zero(host)  # nobody opened a stream: the connection ends by itself
        cid = init.headers["acp-connection-id"]
        assert (await request(host.port, "DELETE", {"Acp-Connection-Id": cid})).status == 404

    run(_with_host(body, limits=Limits(ping_interval_s=0.05, ping_timeout_s=0.05)))


def test_http_streams_get_keep_alive_comments_while_idle(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        await c.initialize()
        stream: SseStream = c.streams[None]
        for _ in range(100_000):
            if stream.comments >= 2:
                break
            await asyncio.sleep(0.01)  # waiting for the server's clock, which is what is tested
        assert stream.comments >= 2
        await c.delete()

    run(_with_host(body, limits=Limits(ping_interval_s=0.02, ping_timeout_s=0.02)))


class HugeAnswer(DemoAgent):
    """Answers any extension method with 8 MiB at once: past the cap below."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * (8 * 1024 * 1024)}


def test_r28_http_stream_past_the_output_cap_ends_the_connection(run: Any) -> None:
    """Nobody reads the connection stream: output past max_buffered_output_bytes that does not shrink for
    output_stall_timeout_s ends the connection."""

    async def body(host: AcpHost) -> None:
        init = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
        cid = init.headers["acp-connection-id"]
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "_huge", "params": {}}).encode()
        reply = await request(host.port, "POST", {"Content-Type": "application/json", "Acp-Connection-Id": cid}, big)
        assert reply.status == 202
        await _wait_counts_zero(host)
        assert (await request(host.port, "DELETE", {"Acp-Connection-Id": cid})).status == 404

    limits = Limits(max_buffered_output_bytes=1024 * 1024, output_stall_timeout_s=0.05)
    run(_with_host(body, factory=HugeAnswer, limits=limits))


class MediumAnswers(DemoAgent):
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": "x" * 8192}


def test_r26_http_output_above_the_mark_holds_further_posts(run: Any) -> None:
    """Answers wait on a stream nobody reads: past the high-water mark the next POST is held, not answered."""

    async def body(host: AcpHost) -> None:
        init = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
        cid = init.headers["acp-connection-id"]
        headers = {"Content-Type": "application/json", "Acp-Connection-Id": cid}
        for i in range(20):  # 20 x 8 KiB answers queue for the connection stream: above 64 KiB
            msg = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "_medium", "params": {}}).encode()
            assert (await request(host.port, "POST", headers, msg)).status == 202
            if host.counts["reading_paused"]:
                break
        assert host.counts["reading_paused"] == 1, host.counts
        held = asyncio.ensure_future(
            request(host.port, "POST", headers, json.dumps({"jsonrpc": "2.0", "id": 99, "method": "_m"}).encode())
        )
        c = HttpAcpClient(host.port)
        c.connection_id = cid
        for _ in range(1000):  # the held POST is not answered while nothing reads
            await asyncio.sleep(0)
        assert not held.done()
        await c.open_stream(None)  # a reader drains the stream: the held POST goes through
        assert (await held).status == 202
        await c.wait_for(lambda: c.find(99))
        assert c.find(99)[1]["result"]["data"] == "x" * 8192  # type: ignore[index]
        await c.delete()
        await _wait_counts_zero(host)

    run(_with_host(body, factory=MediumAnswers))


def test_r27_http_delete_right_behind_posts_is_eof_and_the_posted_requests_are_answered(run: Any) -> None:
    """POSTs and a DELETE pipelined in one write: every accepted (202) request is answered on its stream first."""

    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        await c.initialize()
        sid = await c.new_session()
        assert c.connection_id is not None
        posts = [
            ({"jsonrpc": "2.0", "id": 101, "method": "no/such_method"}, None),
            ({"jsonrpc": "2.0", "id": 102, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}, None),
            (
                {
                    "jsonrpc": "2.0",
                    "id": 103,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]},
                },
                sid,
            ),
        ]
        data = b""
        for message, session in posts:
            raw = json.dumps(message).encode()
            extra = b"" if session is None else b"Acp-Session-Id: %s\r\n" % session.encode()
            data += (
                b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAcp-Connection-Id: %s\r\n"
                b"%sContent-Length: %d\r\n\r\n%s" % (c.connection_id.encode(), extra, len(raw), raw)
            )
        data += b"DELETE /acp HTTP/1.1\r\nHost: x\r\nAcp-Connection-Id: %s\r\nConnection: close\r\n\r\n" % (
            c.connection_id.encode()
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(data)
        replies = await reader.read()  # the server closes after the DELETE's answer (Connection: close)
        writer.close()
        assert [r[:3] for r in replies.split(b"HTTP/1.1 ")[1:]] == [b"202"] * 4, replies
        await asyncio.gather(*(s.closed.wait() for s in c.streams.values()))
        answers = {m["id"]: (where, m) for where, m in c.messages if "id" in m and "method" not in m}
        assert answers[101][0] is None and answers[101][1]["error"]["code"] == -32601
        assert answers[102][0] is None and "sessionId" in answers[102][1]["result"]
        assert answers[103][0] == sid and answers[103][1]["result"] == {"stopReason": "cancelled"}
        await _wait_counts_zero(host)

    run(_with_host(body))
