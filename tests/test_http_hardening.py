"""The HTTP/1.1 front under hostile clients: every test over a real loopback socket.

Admission on the request head, body and head deadlines, the cap on sockets
that serve no ACP connection, pipelining, head limits however the bytes
arrive, RFC 9112 framing, duplicate Authorization, and the connection id as a
capability; then a property-based test sending random chunkings of valid and
invalid requests. Waits are on the server's answers; time bounds are hang guards.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_fast.hosting import AcpHost, bearer_token
from acp_fast.hosting.auth import duplicate_header
from acp_fast.hosting.http import BadRequest, parse_head
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host
from tests.http_helpers import HttpAcpClient, request

GUARD = 10.0  # seconds: only turns a hang into a failure
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
_STATUS_LINE = re.compile(rb"HTTP/1\.1 [1-5][0-9][0-9] [ -~]*\Z")


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.headers}, {self.body[:80]!r})"


async def read_response(reader: asyncio.StreamReader, *, head_only: bool = False) -> Response | None:
    """One answer, checked well formed (status line, fields, Content-Length body); None at a clean EOF."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    except asyncio.IncompleteReadError as exc:
        assert exc.partial == b"", f"a truncated answer: {exc.partial!r}"
        return None
    except ConnectionResetError:
        return None
    lines = head[:-4].split(b"\r\n")
    assert _STATUS_LINE.match(lines[0]), lines[0]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        assert sep and name and b" " not in name, line
        headers[name.decode().lower()] = value.decode().strip()
    status = int(lines[0].split(b" ")[1])
    length = int(headers.get("content-length", "0"))
    body = b"" if head_only else await asyncio.wait_for(reader.readexactly(length), GUARD)
    return Response(status, headers, body)


async def read_eof(reader: asyncio.StreamReader) -> bytes:
    """What the server still sends until it closes the socket (a hang fails the test)."""
    try:
        return await asyncio.wait_for(reader.read(), GUARD)
    except ConnectionResetError:
        return b""


async def connect(host: AcpHost) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", host.port)


def post(body: bytes, *extra: str, target: str = "/acp") -> bytes:
    head = [f"POST {target} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    return ("\r\n".join([*head, f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode() + body


def get(target: str = "/healthz", *extra: str, method: str = "GET") -> bytes:
    return ("\r\n".join([f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", *extra]) + "\r\n\r\n").encode()


#: A request answered with the socket kept alive (400: only initialize starts a connection); health probes close.
KEEP = post(b"{}")


# -- admission on the head, deadlines, the unbound-socket cap, drain --
def test_refused_on_the_head_before_the_body_is_read(run: Any) -> None:
    """Four sockets start 32 MiB bodies against a hook that refuses everyone: each is answered 401 at once,
    the hook ran on the head, and the server keeps serving a fresh client."""
    seen: list[str] = []

    def refuse(headers: Any) -> bool:
        seen.append(headers.get("Content-Length", ""))
        return False

    async def body(host: AcpHost) -> None:
        socks = [await connect(host) for _ in range(4)]
        for _, writer in socks:
            writer.write(post(b"", "X-Test: 1").replace(b"Content-Length: 0", b"Content-Length: 33554432"))
            writer.write(b"{" + b" " * 65536)  # part of the body, never finished
        for reader, writer in socks:
            answer = await read_response(reader)
            assert answer is not None and answer.status == 401, answer
            assert answer.headers.get("connection") == "close"
            assert await read_eof(reader) == b""  # our side ended: nothing more comes
            writer.close()
        assert seen == ["33554432"] * 4
        reply = await request(host.port, "GET", path="/healthz")
        assert reply.status == 200

    run(with_host(body, authorize=refuse))


def test_body_deadline_answers_408_and_closes(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        writer.write(post(b"").replace(b"Content-Length: 0", b"Content-Length: 100") + b'{"jsonrpc"')
        answer = await read_response(reader)
        assert answer is not None and answer.status == 408, answer
        assert await read_eof(reader) == b""
        writer.close()

    run(with_host(body, limits=Limits(http_request_timeout_s=0.2)))


def test_drain_ends_a_socket_with_a_pending_request(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        writer.write(KEEP + post(b"").replace(b"Content-Length: 0", b"Content-Length: 1000") + b"{")
        first = await read_response(reader)
        assert first is not None and first.status == 400
        assert host.unbound_sockets == 1
        await host.drain()
        assert await read_eof(reader) == b""  # closed by the drain, not left waiting for its body
        assert host.unbound_sockets == 0
        writer.close()

    run(with_host(body))


async def _until_unbound(host: AcpHost, n: int) -> None:
    for _ in range(100_000):  # the server accepted them
        if host.unbound_sockets == n:
            return
        await asyncio.sleep(0)
    assert host.unbound_sockets == n


async def _answered_503(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    answer = await read_response(reader)
    assert answer is not None and answer.status == 503 and answer.headers.get("retry-after") == "1", answer
    assert await read_eof(reader) == b""
    writer.close()


def test_sockets_serving_no_connection_are_capped_503_and_health_probes_keep_a_reserve(run: Any) -> None:
    """Past ``max_unbound_sockets`` a socket of the health reserve answers /healthz and /readyz and nothing else;
    past the reserve too, every socket is answered 503 before anything is read."""

    async def body(host: AcpHost) -> None:
        idle = [await connect(host) for _ in range(3)]
        await _until_unbound(host, 3)
        reply = await request(host.port, "GET", path="/healthz")  # the front is full: the reserve answers
        assert reply.status == 200
        await _until_unbound(host, 3)  # the probe's socket is closed and no longer counted
        reply = await request(host.port, "GET", path="/readyz?verbose")
        assert reply.status == 200
        await _until_unbound(host, 3)
        reader, writer = await connect(host)  # a reserve socket asking for anything else
        writer.write(KEEP)
        await _answered_503(reader, writer)
        assert host.refused.get(503) == 1
        held = await connect(host)  # holds the reserve's one socket, sending nothing
        await _until_unbound(host, 4)
        reader, writer = await connect(host)
        writer.write(get("/healthz"))
        await _answered_503(reader, writer)  # no room left at all
        assert host.refused.get(503) == 2
        held[1].close()
        _, first = idle.pop()
        first.close()
        await _until_unbound(host, 2)
        reply = await request(host.port, "POST", path="/acp", body=b"{}", headers={"Content-Type": "application/json"})
        assert reply.status == 400  # room again: served
        for _, w in idle:
            w.close()

    run(with_host(body, limits=Limits(max_unbound_sockets=3, health_reserve_sockets=1)))


# -- pipelining --
def test_300_pipelined_posts_in_one_write_are_all_answered_in_order(run: Any, caplog: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        n = 300
        writer.write(b"".join(post(b"{}") for _ in range(n)) + get("/healthz", "Connection: close"))
        statuses = []
        for _ in range(n + 1):
            answer = await read_response(reader)
            assert answer is not None, f"only {len(statuses)} answered"
            statuses.append(answer.status)
        assert statuses == [400] * n + [200]
        assert await read_eof(reader) == b""
        writer.close()

    with caplog.at_level(logging.INFO):
        run(with_host(body))
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) <= 1


@pytest.mark.parametrize("prompts", [0, 40])
def test_300_pipelined_posts_on_a_live_connection_are_all_fed_and_answered(run: Any, prompts: int) -> None:
    """300 POSTs in one write on a live connection (all set_mode, or 40 prompts first): every one is
    accepted (202, in order) and answered on the session stream, and the connection still answers."""

    async def body(host: AcpHost) -> None:
        c = HttpAcpClient(host.port)
        await c.initialize()
        sid = await c.new_session()
        assert c.connection_id is not None
        ids = list(range(10_000, 10_300))

        def message(i: int) -> bytes:
            if i - ids[0] < prompts:
                params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 2 0"}]}
                return json.dumps({"jsonrpc": "2.0", "id": i, "method": "session/prompt", "params": params}).encode()
            params = {"sessionId": sid, "modeId": "code"}
            return json.dumps({"jsonrpc": "2.0", "id": i, "method": "session/set_mode", "params": params}).encode()

        burst = b"".join(
            post(message(i), f"Acp-Connection-Id: {c.connection_id}", f"Acp-Session-Id: {sid}") for i in ids
        )
        reader, writer = await connect(host)
        writer.write(burst)
        for k in range(len(ids)):
            answer = await read_response(reader)
            assert answer is not None and answer.status == 202, (k, answer)
        await c.wait_for(lambda: all(c.find(i) is not None for i in ids))
        assert all(c.find(i)[1].get("result") == {} for i in ids[prompts:])  # type: ignore[index]
        assert (await c.request("session/set_mode", {"sessionId": sid, "modeId": "ask"}, sid)).get("result") == {}
        writer.close()
        await c.delete()
        c.close()

    run(with_host(body))


# -- the head limit however the bytes arrive, and the head deadline --
@pytest.mark.parametrize("writes", [1, 3])
def test_a_head_over_16_kib_gets_431_in_one_write_or_many(run: Any, writes: int) -> None:
    async def body(host: AcpHost) -> None:
        for keep_alive_first in (False, True):
            reader, writer = await connect(host)
            if keep_alive_first:  # the limit holds for the next head on a keep-alive socket as well
                writer.write(KEEP)
                first = await read_response(reader)
                assert first is not None and first.status == 400
            head = get("/healthz", "X-Big: " + "a" * (20 * 1024))
            step = len(head) // writes + 1
            for i in range(0, len(head), step):
                writer.write(head[i : i + step])
                await writer.drain()
            answer = await read_response(reader)
            assert answer is not None and answer.status == 431, answer
            assert await read_eof(reader) == b""
            writer.close()

    run(with_host(body))


def test_a_trickled_next_head_on_keep_alive_is_closed_by_its_deadline(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        writer.write(KEEP)
        first = await read_response(reader)
        assert first is not None and first.status == 400
        head = get("/healthz")
        closed = False
        for byte in head[:-4]:  # one byte every 50 ms: each restarts no timer
            if reader.at_eof() or writer.is_closing():
                break
            writer.write(bytes([byte]))
            try:
                answer = await asyncio.wait_for(read_response(reader), 0.05)
            except TimeoutError:
                continue
            assert answer is not None and answer.status == 408, answer
            closed = True
            break
        assert closed, "the trickled head was never cut off"
        assert await read_eof(reader) == b""
        writer.close()

    # 0.5 s for a head; the trickle takes 50 ms x 40 bytes = 2 s; the keep-alive idle bound (20 s) is far away
    run(with_host(body, limits=Limits(handshake_timeout_s=0.5)))


# -- what one socket may open --
def test_one_socket_opens_at_most_max_initialize_per_socket_connections(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        statuses = []
        for _ in range(3):
            writer.write(post(json.dumps(INIT).encode()))
            answer = await read_response(reader)
            assert answer is not None
            statuses.append(answer.status)
        assert statuses == [200, 200, 503]
        assert await read_eof(reader) == b""
        assert host.counts["http_connections"] == 2
        writer.close()

    run(with_host(body, limits=Limits(max_initialize_per_socket=2)))


def test_a_post_without_connection_id_is_bounded_to_max_initialize_body_bytes(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        big = json.dumps({**INIT, "params": {**INIT["params"], "_meta": {"pad": "x" * 4096}}}).encode()  # type: ignore[dict-item]
        reader, writer = await connect(host)
        writer.write(post(big))
        answer = await read_response(reader)
        assert answer is not None and answer.status == 413, answer
        writer.close()
        chunked = (
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunked += b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
        reader, writer = await connect(host)
        writer.write(chunked)
        answer = await read_response(reader)
        assert answer is not None and answer.status == 413, answer
        writer.close()
        assert host.counts["http_connections"] == 0
        ok = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
        assert ok.status == 200

    run(with_host(body, limits=Limits(max_initialize_body_bytes=1024)))


# -- RFC 9112 framing --
@pytest.mark.parametrize(
    ("name", "raw", "status"),
    [
        (
            "content-length-and-transfer-encoding",
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            400,
        ),
        (
            "overflowing-chunk-size",
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"1000000000000000000000002\r\n{}\r\n0\r\n\r\n",
            400,
        ),
        (
            "bare-lf-chunk-lines",
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\n{}\n0\n\n",
            400,
        ),
        (
            "long-chunk-extension",
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2;ext=" + b"e" * 6000 + b"\r\n{}\r\n0\r\n\r\n",
            400,
        ),
        ("bare-lf-head", b"GET /healthz HTTP/1.1\nHost: x\n\n", 400),
        ("http-2-version", b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("space-before-colon", b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        ("obs-fold", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", 400),
        ("no-host", b"GET /healthz HTTP/1.1\r\n\r\n", 400),
        ("gzip-coding", b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        ("bad-target", b"GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ],
)
def test_faulty_framing_is_refused_and_the_socket_closes(run: Any, name: str, raw: bytes, status: int) -> None:
    async def body(host: AcpHost) -> None:
        for prefix in (b"", KEEP):  # as the first request, and as the next one on a keep-alive socket
            reader, writer = await connect(host)
            writer.write(prefix + raw)
            if prefix:
                first = await read_response(reader)
                assert first is not None and first.status == 400
            answer = await read_response(reader)
            assert answer is not None and answer.status == status, (name, answer)
            assert answer.headers.get("connection") == "close"
            assert await read_eof(reader) == b"", name  # nothing after it: no smuggled second answer
            writer.close()
        reply = await request(host.port, "GET", path="/healthz")
        assert reply.status == 200

    run(with_host(body))


def test_head_gets_the_head_of_the_answer_without_a_body(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        writer.write(get("/healthz", method="HEAD"))
        head = await read_response(reader, head_only=True)
        assert head is not None and head.status == 200 and head.headers["content-length"] == "3"
        assert await read_eof(reader) == b""  # no body
        writer.close()
        reader, writer = await connect(host)
        writer.write(get("/acp", method="HEAD") + get("/healthz", "Connection: close"))
        head = await read_response(reader, head_only=True)
        assert head is not None and head.status == 405 and int(head.headers["content-length"]) > 0
        after = await read_response(reader)  # the next answer starts right after the head: no body was sent
        assert after is not None and after.status == 200 and after.body == b"ok\n"
        writer.close()

    run(with_host(body))


def test_an_absolute_form_target_is_served(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        for target in (f"http://127.0.0.1:{host.port}/healthz", "HTTP://127.0.0.1/readyz?x=1"):
            reader, writer = await connect(host)
            writer.write(get(target, "Connection: close"))
            answer = await read_response(reader)
            assert answer is not None and answer.status == 200, (target, answer)
            writer.close()
        reader, writer = await connect(host)
        writer.write(get("ftp://127.0.0.1/healthz"))
        answer = await read_response(reader)
        assert answer is not None and answer.status == 400
        writer.close()

    run(with_host(body))


# -- two Authorization headers --
def test_duplicate_header_helper() -> None:
    assert duplicate_header([("Authorization", "a"), ("authorization", "b")], "AUTHORIZATION")
    assert not duplicate_header([("Authorization", "a"), ("Host", "b")], "authorization")
    assert not duplicate_header([], "authorization")


def test_two_authorization_headers_are_refused_400(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        init = json.dumps(INIT).encode()
        for order in (("Bearer wrong", "Bearer s3cret"), ("Bearer s3cret", "Bearer wrong")):
            reader, writer = await connect(host)
            writer.write(post(init, *(f"Authorization: {v}" for v in order)))
            answer = await read_response(reader)
            assert answer is not None and answer.status == 400, answer
            writer.close()
        assert host.counts["http_connections"] == 0
        ok = await request(
            host.port, "POST", {"Content-Type": "application/json", "Authorization": "Bearer s3cret"}, init
        )
        assert ok.status == 200

    run(with_host(body, authorize=bearer_token("s3cret")))


# -- the connection id is a capability --
def test_connection_id_is_honoured_only_for_its_principal(run: Any) -> None:
    def by_token(headers: Any) -> str | bool:
        token = headers.get("Authorization", "")
        return token.removeprefix("Bearer ") if token.startswith("Bearer ") else False

    async def body(host: AcpHost) -> None:
        alice = HttpAcpClient(host.port, {"Authorization": "Bearer alice"})
        await alice.initialize()
        cid = alice.connection_id
        assert cid is not None
        mallory = {"Authorization": "Bearer mallory", "Acp-Connection-Id": cid}
        stream = await request(host.port, "GET", {**mallory, "Accept": "text/event-stream"})
        assert stream.status == 404
        delete = await request(host.port, "DELETE", mallory)
        assert delete.status == 404
        ping = {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        posted = await request(
            host.port, "POST", {**mallory, "Content-Type": "application/json"}, json.dumps(ping).encode()
        )
        assert posted.status == 404
        assert host.counts["http_connections"] == 1
        await alice.new_session()  # still alice's, still working
        assert (await alice.delete()).status == 202
        alice.close()

    run(with_host(body, authorize=by_token))


def test_connection_ids_are_128_random_bits_never_logged_in_full(run: Any, caplog: Any) -> None:
    ids: list[str] = []

    async def body(host: AcpHost) -> None:
        for _ in range(8):
            init = await request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(INIT).encode())
            assert init.status == 200
            ids.append(init.headers["acp-connection-id"])
        for _ in range(100_000):  # no stream is read: each connection ends on its idle bound, and says so
            if host.counts["http_connections"] == 0:
                break
            await asyncio.sleep(0.01)
        assert host.counts["http_connections"] == 0

    # The idle bound must outlast an initialize answered on a loaded machine: the connection ends on it unread.
    with caplog.at_level(logging.DEBUG):
        run(with_host(body, limits=Limits(ping_interval_s=0.5, ping_timeout_s=0.5)))
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert not all(i[12] == "4" and i[16] in "89ab" for i in ids)  # not UUID4s: 122 random bits (one in 2**24 false)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert any(i[:8] in text for i in ids)  # the idle ends were logged, by prefix
    assert not any(i in text for i in ids)


# -- property: random chunkings of valid and invalid requests --
_CHUNKED_OK = (
    b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"1;a=b\r\n{\r\n1\r\n}\r\n0\r\nX-T: 1\r\n\r\n"
)
_KEEP = [  # answered, the socket kept alive
    post(b"{}"),
    post(b"[1]"),
    post(b"not json"),
    _CHUNKED_OK,
    b"\r\n" + post(b"{}"),  # an empty line before a request line is ignored (RFC 9112 2.2)
    get("/acp"),
    get("/acp", method="HEAD"),
    b"DELETE /acp HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
]
_CLOSE = [  # answered, then the server closes (health probes and the like)
    get("/healthz"),
    get("/readyz"),
    get("/nowhere"),
    get("/healthz", method="HEAD"),
    get("http://x/healthz"),
    post(b"{}", "Connection: close"),
]
_INVALID = [
    b"GET /healthz HTTP/1.1\nHost: x\n\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\n0\n\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + b"y" * 17000 + b"\r\n\r\n",
    b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad\x00: v\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # a TLS hello on the plain port
]


async def _exchange(host: AcpHost, items: list[tuple[str, bytes]], cuts: list[int]) -> None:
    data = b"".join(raw for _, raw in items) + get("/healthz", "Connection: close")
    reader, writer = await connect(host)
    last = 0
    for cut in sorted({c % len(data) for c in cuts} | {len(data)}):
        if cut > last:
            writer.write(data[last:cut])
            await writer.drain()
            await asyncio.sleep(0)
            last = cut
    answers: list[Response] = []
    heads = [raw.split(b" ", 1)[0].lstrip(b"\r\n") == b"HEAD" for _, raw in items] + [False]
    for i in range(len(items) + 1):
        answer = await read_response(reader, head_only=heads[i] if i < len(heads) else False)
        if answer is None:
            break
        answers.append(answer)
        if answer.headers.get("connection") == "close":
            break
    assert await read_eof(reader) == b""
    writer.close()
    kinds = [kind for kind, _ in items] + ["close"]
    last = next(i for i, kind in enumerate(kinds) if kind != "keep")  # the answer after which the server closes
    assert len(answers) == last + 1, (answers, items)
    assert answers[-1].headers.get("connection") == "close", answers
    if kinds[last] == "bad":
        assert 400 <= answers[-1].status < 600, answers
    assert all(a.status < 500 for a in answers[:last]), answers


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(
        st.one_of(
            st.sampled_from(_KEEP).map(lambda raw: ("keep", raw)),
            st.sampled_from(_CLOSE).map(lambda raw: ("close", raw)),
            st.sampled_from(_INVALID).map(lambda raw: ("bad", raw)),
        ),
        min_size=1,
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=100_000), max_size=6),
)
def test_property_random_chunkings_get_well_formed_answers_and_the_server_serves_on(
    run: Any, items: list[tuple[str, bytes]], cuts: list[int]
) -> None:
    async def body(host: AcpHost) -> None:
        await _exchange(host, items, cuts)
        reply = await request(host.port, "GET", path="/healthz")  # a fresh client is served
        assert reply.status == 200
        assert host.unbound_sockets <= 1

    run(with_host(body))


@settings(max_examples=200, deadline=None)
@given(
    head=st.one_of(
        st.binary(max_size=300),
        st.lists(st.sampled_from(_KEEP + _CLOSE + _INVALID), min_size=1, max_size=2).flatmap(
            lambda parts: st.integers(0, len(b"".join(parts))).map(lambda cut: b"".join(parts)[:cut])
        ),
    )
)
def test_property_the_head_parser_answers_any_bytes_with_a_request_or_a_status(head: bytes) -> None:
    """No input makes parse_head raise anything but BadRequest (a 4xx/5xx the channel answers)."""
    try:
        request = parse_head(head.split(b"\r\n\r\n", 1)[0])
    except BadRequest as exc:
        assert 400 <= exc.status < 600
    else:
        assert request.method and request.target[:1] in (b"/", b"*")
        assert request.content_length >= 0 and not (request.chunked and request.content_length)


# -- an initialize whose id acp_fast refuses is answered at once ---------------------------------------------
@pytest.mark.parametrize("rid", [1.5, True, None, 2**63, [1]])
def test_an_initialize_with_a_refused_id_is_answered_at_once(run: Any, rid: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await connect(host)
        writer.write(post(json.dumps({**INIT, "id": rid}).encode()))
        answer = await read_response(reader)
        assert answer is not None and answer.status == 400, answer
        assert json.loads(answer.body)["error"]["code"] == -32600
        assert host.counts["http_connections"] == 0 and host.counts["connections"] == 0
        writer.close()

    run(with_host(body))


def test_refusals_the_channel_answers_itself_are_counted(run: Any) -> None:
    """A head that cannot be parsed (400) or is too large (431) is answered by the channel, and counted
    in the host's ``refused`` like the refusals the host makes (they were not before)."""

    async def body(host: AcpHost) -> None:
        for raw, status in (
            (b"GET /healthz HTTP/1.1\nHost: x\n\n", 400),
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (20 * 1024) + b"\r\n\r\n", 431),
        ):
            reader, writer = await connect(host)
            writer.write(raw)
            answer = await read_response(reader)
            assert answer is not None and answer.status == status, answer
            writer.close()
        assert host.refused.get(400) == 1 and host.refused.get(431) == 1, host.refused

    run(with_host(body))
