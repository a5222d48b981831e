"""RFC 6455 where it says MUST, per-client admission and read-buffer release.

Every case writes raw, masked frames over a loopback socket (tests/ws_helpers.py),
so the test can send what a client library refuses to, and sees every byte the
server sends back: the close code, and that nothing follows the close frame.
Waits are bounded (a hang becomes a failure); nothing synchronizes on a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, serve_ws
from acp_fast.hosting.auth import bearer_token
from acp_fast.transports.ws import WsPeer
from acp_fast.wire.limits import Limits
from tests.host_helpers import wait_counts_zero, with_host
from tests.test_ws_hardening import (
    BOUND_S,
    INIT,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    answer_to,
    next_data,
    raw_upgrade,
    text,
)
from tests.ws_helpers import client_frame, read_frame

UPGRADE = (
    b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


async def close_status(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Frames up to the server's close; its status. The close is answered, so the server ends the TCP
    connection at once; nothing may follow the close frame (RFC 6455 5.5.1)."""
    for _ in range(10_000):
        b0, payload = await next_data(reader)
        if b0 & 0x0F == OP_CLOSE:
            writer.write(client_frame(OP_CLOSE, payload[:2]))
            rest = await asyncio.wait_for(reader.read(), BOUND_S)
            assert rest == b"", f"bytes after the close frame: {rest[:120]!r}"
            return int(struct.unpack(">H", payload[:2])[0]) if len(payload) >= 2 else 1005
    raise AssertionError("no close frame")


async def initialized(host: AcpHost) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await raw_upgrade(host)
    writer.write(text(INIT))
    assert "result" in await answer_to(reader, 1)
    return reader, writer


async def served_afterwards(host: AcpHost) -> None:
    """A fresh client is still served: the bad one changed nothing for others."""
    _, writer = await initialized(host)
    writer.close()


def big_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0) -> bytes:
    """A masked client frame with the 64-bit length form when needed (client_frame stops at 16 bits)."""
    if len(payload) < 65536:
        return client_frame(opcode, payload, fin=fin, rsv=rsv)
    mask = os.urandom(4)
    head = bytes([(0x80 if fin else 0) | rsv | opcode, 0x80 | 127]) + struct.pack(">Q", len(payload))
    key = int.from_bytes(mask * (len(payload) // 4 + 1), "little")
    body = (int.from_bytes(payload, "little") ^ (key & ((1 << (8 * len(payload))) - 1))).to_bytes(
        len(payload), "little"
    )
    return head + mask + body


# -- 27.5: RFC 6455 MUSTs ---------------------------------------------------------------------------------

_REQ = json.dumps(
    {"jsonrpc": "2.0", "id": 2, "method": "_ext", "params": {"s": "\u00e9\u20ac"}}, ensure_ascii=False
).encode()


@pytest.mark.parametrize(
    ("name", "frames", "expected"),
    [
        ("invalid UTF-8, one frame", [client_frame(OP_TEXT, b'{"jsonrpc":"2.0","method":"x\xff"}')], 1007),
        ("overlong encoding", [client_frame(OP_TEXT, b'"\xc0\xaf"')], 1007),
        ("a surrogate", [client_frame(OP_TEXT, b'"\xed\xa0\x80"')], 1007),
        (
            "invalid UTF-8 split across fragments",
            [client_frame(OP_TEXT, b'{"a":"\xe2\x82', fin=False), client_frame(OP_CONT, b'("}')],
            1007,
        ),
        (
            "truncated sequence at the message's end",
            [client_frame(OP_TEXT, b'"\xe2', fin=False), client_frame(OP_CONT, b"\x82")],
            1007,
        ),
        ("continuation without a start", [client_frame(OP_CONT, b"{}")], 1002),
        ("final continuation without a start", [client_frame(OP_CONT, b"x", fin=False)], 1002),
        (
            "text frame inside a fragmented text message",
            [client_frame(OP_TEXT, b"[", fin=False), client_frame(OP_TEXT, b"{}")],
            1002,
        ),
        (
            "binary frame inside a fragmented text message",
            [client_frame(OP_TEXT, b"[", fin=False), client_frame(OP_BINARY, b"x")],
            1002,
        ),
        (
            "text frame inside a fragmented binary message",
            [client_frame(OP_BINARY, b"x", fin=False), client_frame(OP_TEXT, b"{}")],
            1002,
        ),
        ("ping with RSV1", [client_frame(OP_PING, b"hi", rsv=0x40)], 1002),
        ("pong with RSV1", [client_frame(OP_PONG, b"hi", rsv=0x40)], 1002),
        ("close with RSV1", [client_frame(OP_CLOSE, struct.pack(">H", 1000), rsv=0x40)], 1002),
        ("ping with RSV3", [client_frame(OP_PING, b"", rsv=0x10)], 1002),
        ("ping of 126 bytes", [client_frame(OP_PING, b"p" * 126)], 1002),
        ("fragmented ping", [client_frame(OP_PING, b"p", fin=False)], 1002),
        ("reserved opcode 3", [client_frame(0x3, b"")], 1002),
        ("reserved control opcode 11", [client_frame(0xB, b"")], 1002),
        ("close 1004", [client_frame(OP_CLOSE, struct.pack(">H", 1004))], 1002),
        ("close 1016", [client_frame(OP_CLOSE, struct.pack(">H", 1016))], 1002),
        ("close 2999", [client_frame(OP_CLOSE, struct.pack(">H", 2999))], 1002),
        ("close 999", [client_frame(OP_CLOSE, struct.pack(">H", 999))], 1002),
        ("close with an invalid UTF-8 reason", [client_frame(OP_CLOSE, struct.pack(">H", 1000) + b"\xff")], 1007),
    ],
)
def test_protocol_errors_close_with_the_rfc_code(run: Any, name: str, frames: list[bytes], expected: int) -> None:
    """After initialize, a frame sequence RFC 6455 forbids closes with its code, and nothing follows the close."""

    async def body(host: AcpHost) -> None:
        reader, writer = await initialized(host)
        writer.write(b"".join(frames))
        assert await close_status(reader, writer) == expected, name
        writer.close()
        await served_afterwards(host)
        await wait_counts_zero(host)

    run(with_host(body))


def test_valid_utf8_split_inside_a_code_point_is_accepted(run: Any) -> None:
    """A multi-byte character cut between two fragments is valid: the message is answered."""

    async def body(host: AcpHost) -> None:
        reader, writer = await initialized(host)
        cut = _REQ.index("\u20ac".encode()) + 1
        writer.write(client_frame(OP_TEXT, _REQ[:cut], fin=False) + client_frame(OP_CONT, _REQ[cut:]))
        answer = await answer_to(reader, 2)
        assert answer["error"]["code"] == -32601, answer  # method not found: parsed, so UTF-8 passed
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


def test_ping_is_still_answered_with_its_payload(run: Any) -> None:
    """With picows' automatic PONG off, the server answers a PING itself, echoing the payload."""

    async def body(host: AcpHost) -> None:
        reader, writer = await initialized(host)
        writer.write(client_frame(OP_PING, b"hello"))
        b0, payload = await asyncio.wait_for(read_frame(reader), BOUND_S)
        assert (b0, payload) == (0x80 | OP_PONG, b"hello")
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


def test_nothing_follows_a_1002_for_a_request_read_with_the_bad_frame(run: Any) -> None:
    """``initialize`` and a reserved opcode in one write: the close frame is the last thing sent."""

    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        writer.write(text(INIT) + client_frame(0x3, b""))
        assert await close_status(reader, writer) == 1002
        writer.close()
        await served_afterwards(host)
        await wait_counts_zero(host)

    run(with_host(body))


def test_nothing_follows_a_1002_for_a_wrong_first_message_and_requests_behind_it(run: Any) -> None:
    """A first message that is not initialize closes 1002; the requests read with it are never answered."""

    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        other = {"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        writer.write(text(other) + text(INIT) + client_frame(OP_PING, b"x"))
        assert await close_status(reader, writer) == 1002
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body))


# -- 27.3: an upgraded socket that never sends initialize; per-principal connections ----------------------


def test_a_socket_that_never_sends_initialize_is_closed_1008_and_counted(run: Any) -> None:
    """Answering pings is not enough: past initialize_timeout_s without initialize the socket closes 1008."""

    async def body(host: AcpHost) -> None:
        reader, writer = await raw_upgrade(host)
        writer.write(client_frame(OP_PING, b"alive"))
        assert await close_status(reader, writer) == 1008
        assert host.counts["initialize_timeouts"] == 1
        writer.close()
        await wait_counts_zero(host)
        reader, writer = await initialized(host)  # one that initializes in time stays
        writer.write(client_frame(OP_PING, b"x"))
        b0, _ = await asyncio.wait_for(read_frame(reader), BOUND_S)
        assert b0 & 0x0F == OP_PONG
        assert host.counts["initialize_timeouts"] == 1
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(initialize_timeout_s=0.2)))


def test_connections_per_peer_address_are_capped_503_and_counted(run: Any) -> None:
    """With no auth hook the peer address is the principal: the cap refuses the next upgrade with 503."""

    async def body(host: AcpHost) -> None:
        held = [await initialized(host) for _ in range(3)]
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(UPGRADE + b"\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert head.startswith(b"HTTP/1.1 503"), head
        assert host.counts["refused_per_principal"] == 1
        writer.close()
        held.pop()[1].close()  # one leaves: the next one is served
        for _ in range(100_000):
            if host.counts["connections"] == 2:
                break
            await asyncio.sleep(0)
        await served_afterwards(host)
        for _, w in held:
            w.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(max_connections_per_principal=3)))


def test_connections_per_principal_are_capped_per_credential(run: Any) -> None:
    """With an auth hook the cap is per principal; HTTP initialize POSTs count against the same cap."""

    async def body(host: AcpHost) -> None:
        auth = b"Authorization: Bearer s3cret\r\n"
        held = [await raw_upgrade(host, auth) for _ in range(2)]
        for r, w in held:
            w.write(text(INIT))
            assert "result" in await answer_to(r, 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        init = json.dumps(INIT).encode()
        writer.write(
            b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, "
            b"text/event-stream\r\n" + auth + b"Content-Length: " + str(len(init)).encode() + b"\r\n\r\n" + init
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert head.startswith(b"HTTP/1.1 503"), head
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(UPGRADE + auth + b"\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert head.startswith(b"HTTP/1.1 503"), head
        assert host.counts["refused_per_principal"] == 2
        writer.close()
        for _, w in held:
            w.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(max_connections_per_principal=2), authorize=bearer_token("s3cret")))


# -- 27.7: two Authorization headers ------------------------------------------------------------------------


def test_duplicate_header_counts_case_insensitively() -> None:
    from acp_fast.hosting.auth import duplicate_header

    assert duplicate_header([("Authorization", "a"), ("authorization", "b")], "AUTHORIZATION")
    assert not duplicate_header([("Authorization", "a"), ("Host", "b")], "authorization")
    assert not duplicate_header([], "authorization")


@pytest.mark.parametrize("hook", [False, True])
def test_two_authorization_headers_on_the_upgrade_are_refused_400(run: Any, hook: bool) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(UPGRADE + b"Authorization: Bearer s3cret\r\nauthorization: Bearer other\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert head.startswith(b"HTTP/1.1 400"), head
        writer.close()
        reader, writer = await raw_upgrade(host, b"Authorization: Bearer s3cret\r\n")  # one is fine
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body, authorize=bearer_token("s3cret") if hook else None))


# -- 27.4: the read buffer a large message grew is given back -------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pages are released with madvise on Linux")
def test_the_read_buffer_of_a_large_message_is_released(run: Any) -> None:
    """picows grows its read buffer to the message and keeps it; the host gives its pages back once idle."""
    mib = 16

    async def body(host: AcpHost) -> None:
        reader, writer = await initialized(host)
        (peer,) = host.registry.peers
        big = json.dumps({"jsonrpc": "2.0", "method": "_big", "params": {"x": "a" * (mib << 20)}}).encode()
        writer.write(big_frame(OP_TEXT, big) + text({"jsonrpc": "2.0", "id": 2, "method": "_ping"}))
        del big
        await writer.drain()
        await answer_to(reader, 2)  # the large message was read before this answer
        grown = _rss_bytes()
        assert isinstance(peer, WsPeer)
        for _ in range(1000):  # bounded: the release runs ws_buffer_release_s (0.05 s) after the read
            if peer.released_bytes:
                break
            await asyncio.sleep(0.01)
        assert peer.released_bytes >= (mib - 1) << 20, peer.released_bytes
        assert grown - _rss_bytes() >= (mib * 3 // 4) << 20, (grown, _rss_bytes())
        writer.write(text({"jsonrpc": "2.0", "id": 3, "method": "_ping"}))  # the buffer still works
        await answer_to(reader, 3)
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(ws_buffer_release_s=0.05)), timeout=60)


# -- property: whatever frames arrive, the server answers or closes legally, and keeps serving ---------------

#: Close codes a server may put on the wire (RFC 6455 7.4.1-7.4.2): what the host sends, and what it echoes.
_LEGAL_CLOSE = frozenset(range(1000, 1004)) | frozenset(range(1007, 1015)) | frozenset(range(3000, 5000))


@pytest.fixture(scope="module")
def threaded_host() -> Iterator[int]:
    """One host on its own loop and thread for every generated case; the cases use blocking sockets."""
    ready: queue.Queue[int] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        host = await serve_ws(lambda: DemoAgent(pace_ms=1), "127.0.0.1", 0, limits=Limits(drain_flush_s=0.5))
        ready.put(host.port)
        await stop.wait()
        await host.drain()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    yield ready.get(timeout=BOUND_S)
    loop.call_soon_threadsafe(stop.set)
    thread.join(BOUND_S * 4)
    loop.close()


def _blocking_upgrade(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S)
    sock.sendall(UPGRADE + b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    assert head.endswith(b"\r\n\r\n"), "the server sent a frame before any request"
    return sock


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    for _ in range(100_000):
        chunk = sock.recv(65536)  # the socket's timeout turns a server that never closes into a failure
        if not chunk:
            return data
        data += chunk
    raise AssertionError("the server never closed")


def _server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """Parse what the server sent; every frame must be well formed and unmasked."""
    frames, at = [], 0
    while at < len(data):
        assert len(data) - at >= 2, data[at:]
        b0, b1 = data[at], data[at + 1]
        assert not b1 & 0x80, "a masked server frame"
        assert not b0 & 0x70 or b0 & 0x0F in (OP_TEXT, OP_BINARY), "reserved bits from the server"
        size, at = b1 & 0x7F, at + 2
        if size == 126:
            size, at = struct.unpack(">H", data[at : at + 2])[0], at + 2
        elif size == 127:
            size, at = struct.unpack(">Q", data[at : at + 8])[0], at + 8
        assert len(data) - at >= size, "a truncated server frame"
        frames.append((b0, data[at : at + size]))
        at += size
    return frames


def _masked(first: int, payload: bytes, masked: bool) -> bytes:
    size = len(payload)
    mask_bit = 0x80 if masked else 0
    head = bytes([first, mask_bit | min(size, 126)]) + (struct.pack(">H", size) if size >= 126 else b"")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _parse_level(opcode: int, fin: bool, payload: bytes, masked: bool) -> int | None:
    """A violation picows finds while parsing (its close may come first, before earlier frames are judged)."""
    if not masked or opcode not in (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
        return 1002
    if opcode >= 8 and (not fin or len(payload) > 125):
        return 1002
    if opcode == OP_CLOSE and payload:
        code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 0
        if len(payload) == 1 or (code < 3000 and code not in _PICOWS_CODES):
            return 1002
        if not _utf8(payload[2:]):
            return 1007
    return None


#: Close codes below 3000 picows lets through to the listener (its WSCloseCode enum).
_PICOWS_CODES = frozenset({0, 1000, 1001, 1002, 1003, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})


def _expected_closes(initialize: bool, frames: list[tuple[int, bool, int, bytes, bool]]) -> set[int]:
    """The close codes RFC 6455 (and ACP's first-message rule) allow for this sequence, ended by our close 1000."""
    fragmenting: int | None = None
    text_so_far = b""
    first_pending = not initialize
    for at, (opcode, fin, rsv, payload, masked) in enumerate(frames):
        later = {c for f in frames[at + 1 :] if (c := _parse_level(f[0], f[1], f[3], f[4])) is not None}
        code = _parse_level(opcode, fin, payload, masked)
        if code is not None:
            return {code}
        if rsv:
            return {1002} | later
        if opcode == OP_CLOSE:
            # Our appended close follows the client's: a second close frame is a protocol error the
            # parser may see before the echo leaves (the echo waits for the answers owed).
            if not payload:
                return {1000, 1002}
            code = struct.unpack(">H", payload[:2])[0]
            return {code if code in _LEGAL_CLOSE else 1002, 1002}
        if opcode in (OP_PING, OP_PONG):
            continue
        if (opcode == OP_CONT) == (fragmenting is None):  # a stray continuation, or a message inside one
            return {1002} | later
        if opcode != OP_CONT:
            fragmenting, text_so_far = opcode, b""
        if fragmenting == OP_TEXT:
            text_so_far += payload
        if fin:
            kind, fragmenting = fragmenting, None
            if kind == OP_TEXT:
                if not _utf8(text_so_far):
                    return {1007} | later
                if first_pending:  # the first message that parses must be initialize: else 1002
                    try:
                        json.loads(text_so_far)
                    except ValueError:
                        continue
                    return {1000, 1002} | later  # initialize itself passes; a model of the rest is not the point
    return {1000}


_payloads = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=80).map(lambda t: t.encode()),
    st.sampled_from(
        [
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "_x"}).encode(),
            b'{"jsonrpc":"2.0","method":"x\xff"}',
            b"\xe2\x82",
            b"\xac",
            struct.pack(">H", 1000),
            struct.pack(">H", 1006),
            struct.pack(">H", 4001) + b"bye",
        ]
    ),
)
_frames = st.tuples(
    st.sampled_from([OP_CONT, OP_TEXT, OP_BINARY, 0x3, 0x7, OP_CLOSE, OP_PING, OP_PONG, 0xB, 0xF]),
    st.booleans(),  # FIN
    st.sampled_from([0, 0, 0, 0, 0x40, 0x20, 0x10]),  # RSV bits
    _payloads,
    st.sampled_from([True, True, True, True, False]),  # masked (a client frame must be)
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(initialize=st.booleans(), frames=st.lists(_frames, min_size=1, max_size=6), split=st.integers(0, 64))
def test_any_frame_sequence_is_answered_or_closed_legally(
    threaded_host: int, initialize: bool, frames: list[tuple[int, bool, int, bytes, bool]], split: int
) -> None:
    """Generated frames and fragmentations (valid and invalid opcodes, reserved bits, lengths, masks, UTF-8):
    the server sends well-formed frames, closes with a code it may send, sends nothing after its close
    frame, and a fresh client is served afterwards."""
    sock = _blocking_upgrade(threaded_host)
    wire = (text(INIT) if initialize else b"") + b"".join(
        _masked((0x80 if fin else 0) | rsv | opcode, payload, masked) for opcode, fin, rsv, payload, masked in frames
    )
    wire += client_frame(OP_CLOSE, struct.pack(">H", 1000))
    cut = min(split, len(wire))
    sock.sendall(wire[:cut])  # one cut anywhere: frames arrive in two reads
    with contextlib.suppress(OSError):  # the server may close before the rest arrives
        sock.sendall(wire[cut:])
    try:
        received = _read_all(sock)
    except ConnectionResetError:
        received = b""  # the server dropped a socket that kept sending after its close: allowed
    finally:
        sock.close()
    server = _server_frames(received)
    closes = [i for i, (b0, _) in enumerate(server) if b0 & 0x0F == OP_CLOSE]
    if received:
        assert closes == [len(server) - 1], f"close frame missing or not last: {server[-3:]!r}"
        payload = server[-1][1]
        assert len(payload) >= 2 and struct.unpack(">H", payload[:2])[0] in _LEGAL_CLOSE, payload
        payload[2:].decode()  # the reason is UTF-8
        code = struct.unpack(">H", payload[:2])[0]
        assert code in _expected_closes(initialize, frames), (code, _expected_closes(initialize, frames))
    for b0, payload in server[:-1]:
        assert b0 & 0x0F in (OP_TEXT, OP_PING, OP_PONG), hex(b0)
        if b0 & 0x0F == OP_TEXT:
            json.loads(payload)  # one JSON-RPC message per text frame, valid UTF-8
    fresh = _blocking_upgrade(threaded_host)
    try:
        fresh.sendall(text(INIT))
        got = b""
        while b'"id":1' not in got:
            chunk = fresh.recv(65536)
            assert chunk, "a fresh client was not served"
            got += chunk
    finally:
        fresh.close()


def test_a_pong_with_rsv1_to_the_servers_ping_closes_1002(run: Any) -> None:
    """The PONG the keep-alive waits for is judged too: with a reserved bit it is a protocol error."""

    async def body(host: AcpHost) -> None:
        reader, writer = await initialized(host)
        b0, payload = await asyncio.wait_for(read_frame(reader), BOUND_S)
        assert b0 & 0x0F == OP_PING, b0  # the client is silent: the server pings it
        writer.write(client_frame(OP_PONG, payload, rsv=0x40))
        assert await close_status(reader, writer) == 1002
        writer.close()
        await wait_counts_zero(host)

    run(with_host(body, limits=Limits(ping_interval_s=0.3, ping_timeout_s=0.3)))
