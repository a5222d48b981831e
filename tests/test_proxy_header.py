"""The PROXY protocol parser without sockets: tables of headers, then properties over random bytes and splits."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_fast.hosting.proxy_header import V2_SIGNATURE, ProxyHeader, ProxyHeaderError, parse

MAX = 4096
HEAD = b"GET /acp HTTP/1.1\r\n\r\n"


def v2(
    command: int, family: int, transport: int, addresses: bytes, tlvs: bytes = b"", length: int | None = None
) -> bytes:
    """A version 2 header: signature, version 2 and ``command``, family and transport, length, addresses, TLVs."""
    body = addresses + tlvs
    size = len(body) if length is None else length
    return V2_SIGNATURE + bytes([0x20 | command, family << 4 | transport]) + struct.pack("!H", size) + body


def inet(source: str, destination: str = "10.0.0.1", sport: int = 40000, dport: int = 8080) -> bytes:
    return (
        ipaddress.IPv4Address(source).packed
        + ipaddress.IPv4Address(destination).packed
        + struct.pack("!HH", sport, dport)
    )


def inet6(source: str, destination: str = "2001:db8::1") -> bytes:
    return ipaddress.IPv6Address(source).packed + ipaddress.IPv6Address(destination).packed + struct.pack("!HH", 1, 2)


TLVS = bytes([0x01, 0x00, 0x02]) + b"h2" + bytes([0x05, 0x00, 0x04]) + b"\x00\x01\x02\x03"  # ALPN, unique id

ACCEPTED = [
    (b"PROXY TCP4 192.0.2.7 10.0.0.1 40000 8080\r\n", "192.0.2.7"),
    (b"PROXY TCP6 2001:db8::7 2001:db8::1 40000 8080\r\n", "2001:db8::7"),
    (b"PROXY TCP6 ::ffff:192.0.2.9 ::1 1 2\r\n", "192.0.2.9"),  # an IPv4-mapped address counts as the IPv4 one
    (b"PROXY UNKNOWN\r\n", None),
    (b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", None),
    (v2(1, 1, 1, inet("198.51.100.4")), "198.51.100.4"),
    (v2(1, 1, 1, inet("198.51.100.4"), TLVS), "198.51.100.4"),  # TLVs skipped
    (v2(1, 2, 1, inet6("2001:db8::42")), "2001:db8::42"),
    (v2(0, 1, 1, inet("198.51.100.4")), None),  # LOCAL: the proxy's own connection (its health check)
    (v2(0, 0, 0, b""), None),  # LOCAL, AF_UNSPEC
    (v2(1, 0, 0, b""), None),  # PROXY, AF_UNSPEC (UNKNOWN)
    (v2(1, 0, 0, b"\x00" * 12), None),  # AF_UNSPEC with bytes the receiver skips
    (v2(1, 3, 1, b"/run/a".ljust(108, b"\x00") + b"/run/b".ljust(108, b"\x00")), None),  # AF_UNIX
]

REFUSED = [
    (b"GET / HTTP/1.1\r\n\r\n", "not a PROXY protocol header"),
    (b"PROXY TCP4 192.0.2.7 10.0.0.1 40000\r\n", "TCP4|TCP6"),
    (b"PROXY TCP5 192.0.2.7 10.0.0.1 1 2\r\n", "TCP4|TCP6"),
    (b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n", "is not TCP4"),
    (b"PROXY TCP4 999.0.2.7 10.0.0.1 1 2\r\n", "does not parse"),
    (b"PROXY TCP4 192.0.2.7 10.0.0.1 70000 2\r\n", "0-65535"),
    (b"PROXY TCP4 192.0.2.7 10.0.0.1 -1 2\r\n", "0-65535"),
    (b"PROXY TCP4  192.0.2.7 10.0.0.1 1 2\r\n", "TCP4|TCP6"),
    (b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2\n", "without CRLF"),
    (b"PROXY TCP4 \xff.0.2.7 10.0.0.1 1 2\r\n", "not ASCII"),
    (b"PROXY " + b"A" * 120, "without CRLF"),
    (V2_SIGNATURE[:5] + b"X" * 20, "not a PROXY protocol header"),
    (V2_SIGNATURE + bytes([0x11, 0x11]) + struct.pack("!H", 12) + inet("192.0.2.1"), "version 1"),
    (v2(2, 1, 1, inet("192.0.2.1")), "command 2"),
    (v2(1, 4, 1, inet("192.0.2.1")), "not defined"),
    (v2(1, 1, 3, inet("192.0.2.1")), "not defined"),
    (v2(1, 1, 2, inet("192.0.2.1")), "datagram"),
    (v2(1, 1, 1, inet("192.0.2.1")[:8]), "cannot hold"),
    (v2(1, 2, 1, inet("192.0.2.1")), "cannot hold"),  # IPv6 needs 36 bytes
    (v2(1, 1, 1, b"", length=MAX), "at most"),
]


@pytest.mark.parametrize(("header", "client"), ACCEPTED)
def test_accepted_headers_name_their_client(header: bytes, client: str | None) -> None:
    assert parse(header + HEAD, MAX) == ProxyHeader(client, len(header))


@pytest.mark.parametrize(("header", "client"), ACCEPTED)
def test_every_proper_prefix_of_a_header_asks_for_more(header: bytes, client: str | None) -> None:
    for n in range(len(header)):
        assert parse(header[:n], MAX) is None, n


@pytest.mark.parametrize(("data", "why"), REFUSED)
def test_garbage_and_truncated_headers_are_refused_with_a_reason(data: bytes, why: str) -> None:
    with pytest.raises(ProxyHeaderError, match=why.replace("|", r"\|")):
        parse(data, MAX)


def test_a_v2_header_longer_than_the_bound_is_refused_before_its_bytes_arrive() -> None:
    header = v2(1, 1, 1, inet("192.0.2.1"), b"\x00" * 200)
    assert parse(header[:16], len(header)) is None  # within the bound: wait for the rest
    with pytest.raises(ProxyHeaderError, match="at most"):
        parse(header[:16], len(header) - 1)


@given(st.binary(max_size=300))
def test_any_bytes_give_a_header_a_wait_or_a_refusal(data: bytes) -> None:
    try:
        got = parse(data, MAX)
    except ProxyHeaderError:
        return
    if got is None:  # only a prefix of a header may ask for more, and it stays within the bounds
        assert len(data) < max(107, MAX)
        return
    assert 0 < got.length <= len(data)
    assert got.client is None or ipaddress.ip_address(got.client)


@given(
    st.sampled_from(ACCEPTED),
    st.lists(st.integers(min_value=1, max_value=40), max_size=10),
)
def test_a_header_split_anywhere_is_read_once_whole(case: tuple[bytes, str | None], cuts: list[int]) -> None:
    """Fed as a socket would feed it (growing prefixes), the parser waits until the header is whole."""
    header, client = case
    data = header + HEAD
    seen = 0
    for cut in [*cuts, len(data)]:
        seen = min(len(data), seen + cut)
        got = parse(data[:seen], MAX)
        if seen < len(header):
            assert got is None
        else:
            assert got == ProxyHeader(client, len(header))


@given(st.ip_addresses(v=4), st.integers(0, 65535), st.integers(0, 65535))
def test_v1_and_v2_agree_on_any_ipv4_client(address: ipaddress.IPv4Address, sport: int, dport: int) -> None:
    line = f"PROXY TCP4 {address} 10.0.0.1 {sport} {dport}\r\n".encode()
    binary = v2(1, 1, 1, inet(str(address), sport=sport, dport=dport))
    assert parse(line, MAX) == ProxyHeader(str(address), len(line))
    assert parse(binary, MAX) == ProxyHeader(str(address), len(binary))
