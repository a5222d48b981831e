"""The client's address on real loopback sockets: the PROXY protocol and forwarding headers from trusted proxies
only, the per-principal cap and the access log counting that address, and the per-address share of the sockets
that serve no connection yet. Clients bind 127.0.0.2, 127.0.0.3, ... (all of 127.0.0.0/8 is loopback on Linux);
waits are on the server's counts and answers, time bounds only hang guards."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from acp_fast.hosting import AcpHost
from acp_fast.hosting.forwarded import TrustedProxies
from acp_fast.hosting.proxy_header import V2_SIGNATURE
from acp_fast.observability.access_log import LOGGER
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host
from tests.http_helpers import request
from tests.test_http_hardening import read_eof, read_response
from tests.ws_helpers import WsClient

INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}).encode()
TRUST_LOOPBACK_ONE = TrustedProxies.parse(["127.0.0.1"])
PROXY_PROTOCOL = TrustedProxies.parse(["127.0.0.1"], proxy_protocol=True)
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def initialize_post(*extra: str) -> bytes:
    head = ["POST /acp HTTP/1.1", "Host: x", "Content-Type: application/json", *extra, f"Content-Length: {len(INIT)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + INIT


def proxy_v2(client: str, command: int = 1) -> bytes:
    addresses = bytes(map(int, client.split("."))) + bytes([127, 0, 0, 1]) + struct.pack("!HH", 40000, 80)
    return V2_SIGNATURE + bytes([0x20 | command, 0x11]) + struct.pack("!H", len(addresses)) + addresses


async def exchange(port: int, data: bytes, source: str = "127.0.0.1") -> int | None:
    """Send ``data`` from ``source`` on a fresh socket; the status of the answer (None: closed unanswered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(data)
    answer = await read_response(reader)
    writer.close()
    return None if answer is None else answer.status


@pytest.fixture
def access_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger(LOGGER)
    log.addHandler(handler)
    try:
        yield lines
    finally:
        log.removeHandler(handler)


# -- the PROXY protocol --
def test_a_proxy_protocol_header_names_the_client_the_cap_counts(run: Any, access_lines: list[str]) -> None:
    """Behind a PROXY-protocol proxy each relayed client has its own share of the per-principal cap."""

    async def body(host: AcpHost) -> None:
        for client in ("192.0.2.7", "192.0.2.8"):
            assert await exchange(host.port, proxy_v2(client) + initialize_post()) == 200
            assert await exchange(host.port, proxy_v2(client) + initialize_post()) == 503  # this client's one is used
        v1 = b"PROXY TCP4 192.0.2.9 127.0.0.1 40000 80\r\n"
        assert await exchange(host.port, v1 + initialize_post()) == 200
        assert host.counts["refused_per_principal"] == 2
        remotes = [json.loads(line)["remote"] for line in access_lines]
        assert remotes == ["192.0.2.7", "192.0.2.7", "192.0.2.8", "192.0.2.8", "192.0.2.9"]

    run(with_host(body, proxies=PROXY_PROTOCOL, limits=Limits(max_connections_per_principal=1), access_log="json"))


def test_proxy_headers_are_refused_from_untrusted_peers_and_garbage_from_trusted_ones(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        # An untrusted peer's socket is plain HTTP: a PROXY line is a malformed request line.
        assert await exchange(host.port, proxy_v2("192.0.2.7") + initialize_post(), "127.0.0.2") == 400
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        writer.write(b"PROXY TCP4 nonsense\r\n" + initialize_post())  # from a trusted peer: refused and closed
        answer = await read_response(reader)
        assert answer is not None and answer.status == 400 and answer.body == b"bad PROXY protocol header\r\n"
        assert answer.headers["connection"] == "close"
        assert await read_eof(reader) == b""
        writer.close()
        # A trusted peer without a header is refused the same way: its proxy is misconfigured.
        assert await exchange(host.port, initialize_post()) == 400
        # LOCAL (the proxy's own health check) keeps the proxy's address.
        assert await exchange(host.port, proxy_v2("0.0.0.0", command=0) + HEALTHZ) == 200
        assert host.counts["connections"] == 0

    run(with_host(body, proxies=PROXY_PROTOCOL))


# -- X-Forwarded-For and Forwarded --
def test_forwarding_headers_count_only_from_trusted_proxies(run: Any, access_lines: list[str]) -> None:
    async def body(host: AcpHost) -> None:
        spoof = "X-Forwarded-For: 192.0.2.7"
        assert await exchange(host.port, initialize_post(spoof), "127.0.0.2") == 200
        assert await exchange(host.port, initialize_post("X-Forwarded-For: 192.0.2.8"), "127.0.0.2") == 503
        assert await exchange(host.port, initialize_post("X-Forwarded-For: 198.51.100.1, 192.0.2.7")) == 200
        assert await exchange(host.port, initialize_post("Forwarded: for=192.0.2.7")) == 503  # the same client
        assert await exchange(host.port, initialize_post('Forwarded: for="[2001:db8::1]:9"')) == 200
        remotes = [json.loads(line)["remote"] for line in access_lines]
        assert remotes == ["127.0.0.2", "127.0.0.2", "192.0.2.7", "192.0.2.7", "2001:db8::1"]
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", additional_headers={"X-Forwarded-For": "192.0.2.44"})
        await c.initialize()
        refused = 0
        try:
            await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", additional_headers={"X-Forwarded-For": "192.0.2.44"})
        except Exception as exc:  # websockets: InvalidStatus 503
            refused = exc.response.status_code  # type: ignore[attr-defined]
        assert refused == 503
        await c.close()
        for _ in range(100_000):  # the WebSocket's line is written when it ends
            if any('"GET"' in line and '"status": 101' in line for line in access_lines):
                break
            await asyncio.sleep(0)
        ws_lines = [json.loads(line) for line in access_lines if '"GET"' in line]
        assert [(w["remote"], w["status"]) for w in ws_lines] == [("192.0.2.44", 503), ("192.0.2.44", 101)]

    limits = Limits(max_connections_per_principal=1)
    run(with_host(body, proxies=TRUST_LOOPBACK_ONE, limits=limits, access_log="json"))


# -- the per-address share of sockets without a connection --
async def _until(predicate: Any) -> None:
    for _ in range(100_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the server never got there")


def test_one_greedy_address_cannot_take_every_unbound_socket(run: Any) -> None:
    """20 silent sockets from 127.0.0.2: it holds its share (4), the rest get 503 at once (counted in the metrics),
    and 127.0.0.3 is served: health probes, an initialize POST and a WebSocket."""

    async def body(host: AcpHost) -> None:
        greedy = [await asyncio.open_connection("127.0.0.1", host.port, local_addr=("127.0.0.2", 0)) for _ in range(20)]
        await _until(lambda: host.unbound.held("127.0.0.2") == 4 and host.counts["refused_per_address"] == 16)
        statuses = []
        for reader, _ in greedy[4:]:  # answered before sending anything
            answer = await read_response(reader)
            statuses.append(answer.status if answer else None)
        assert statuses == [503] * 16
        assert await exchange(host.port, HEALTHZ, "127.0.0.3") == 200
        assert await exchange(host.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", "127.0.0.3") == 200
        assert await exchange(host.port, initialize_post(), "127.0.0.3") == 200
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", local_addr=("127.0.0.3", 0))
        await c.initialize()
        await c.close()
        assert host.unbound.held("127.0.0.2") == 4  # still held: the greedy sockets wait for their deadline
        scrape = await request(host.port, "GET", path="/metrics")
        assert b'acp_clients_refused_total{limit="per_address"} 16.0' in scrape.body
        for _, writer in greedy:
            writer.close()
        await _until(lambda: host.unbound.held("127.0.0.2") == 0)

    run(with_host(body, limits=Limits(max_unbound_sockets=8, max_unbound_per_address=4), metrics=True))


def test_behind_a_proxy_the_share_counts_the_client_the_proxy_names(run: Any) -> None:
    """The proxy's own sockets are not capped by the share; the clients it names each are."""

    async def body(host: AcpHost) -> None:
        held = []
        for _ in range(3):  # from the trusted proxy, naming 192.0.2.7, then silent
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            writer.write(proxy_v2("192.0.2.7"))
            held.append((reader, writer))
        await _until(lambda: host.unbound.held("192.0.2.7") == 2 and host.counts["refused_per_address"] == 1)
        assert host.unbound.held("127.0.0.1") == 0
        assert await exchange(host.port, proxy_v2("192.0.2.8") + HEALTHZ) == 200
        assert await exchange(host.port, proxy_v2("192.0.2.7") + HEALTHZ) == 503
        for _, writer in held:
            writer.close()

    limits = Limits(max_unbound_sockets=8, max_unbound_per_address=2)
    run(with_host(body, proxies=PROXY_PROTOCOL, limits=limits))


def test_an_auth_hook_taking_a_second_argument_is_given_the_client_address(run: Any) -> None:
    seen: list[str] = []

    def authorize(headers: Any, client: str) -> bool:
        seen.append(client)
        return client != "192.0.2.66"

    async def body(host: AcpHost) -> None:
        assert await exchange(host.port, initialize_post("X-Forwarded-For: 192.0.2.7")) == 200
        assert await exchange(host.port, initialize_post("X-Forwarded-For: 192.0.2.66")) == 401
        assert await exchange(host.port, initialize_post("X-Forwarded-For: 192.0.2.66"), "127.0.0.2") == 200
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", additional_headers={"X-Forwarded-For": "192.0.2.8"})
        await c.initialize()
        await c.close()
        assert seen == ["192.0.2.7", "192.0.2.66", "127.0.0.2", "192.0.2.8"]

    run(with_host(body, proxies=TRUST_LOOPBACK_ONE, authorize=authorize))


def test_a_proxy_header_and_head_sent_a_byte_at_a_time_are_read_whole(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        for header in (proxy_v2("192.0.2.7"), b"PROXY TCP4 192.0.2.8 127.0.0.1 1 2\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            for i, byte in enumerate(header + initialize_post()):
                writer.write(bytes([byte]))
                if i % 8 == 0:
                    await writer.drain()
            answer = await read_response(reader)
            assert answer is not None and answer.status == 200, answer
            writer.close()
        assert host.counts["http_connections"] == 2

    run(with_host(body, proxies=PROXY_PROTOCOL, limits=Limits(max_connections_per_principal=1)))
