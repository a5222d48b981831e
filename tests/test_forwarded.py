"""Which address is the client, without sockets: the trusted-proxy list and X-Forwarded-For / Forwarded."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_fast.hosting.forwarded import TrustedProxies, client_address, forwarded_for, head_fields

PROXIES = TrustedProxies.parse(["127.0.0.1, 10.0.0.0/8", "2001:db8:aa::/48"])


def xff(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-forwarded-for", v.encode()) for v in values]


def fwd(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"forwarded", v.encode()) for v in values]


CASES = [
    # (peer, fields, client)
    ("127.0.0.1", xff("192.0.2.7"), "192.0.2.7"),
    ("127.0.0.1", xff("192.0.2.7:5555"), "192.0.2.7"),
    ("127.0.0.1", xff("[2001:db8::7]:5555"), "2001:db8::7"),
    ("127.0.0.1", xff("2001:db8::7"), "2001:db8::7"),
    ("127.0.0.1", xff("::ffff:192.0.2.7"), "192.0.2.7"),
    ("127.0.0.1", xff("198.51.100.1, 192.0.2.7"), "192.0.2.7"),  # the rightmost untrusted hop
    ("127.0.0.1", xff("198.51.100.1", "192.0.2.7"), "192.0.2.7"),  # two header lines read as one list
    ("127.0.0.1", xff("192.0.2.7, 10.1.2.3"), "192.0.2.7"),  # a trusted hop vouches for the one before it
    ("127.0.0.1", xff("10.9.9.9, 10.1.2.3"), "10.9.9.9"),  # every hop trusted: the leftmost
    ("127.0.0.1", xff("192.0.2.7, garbage"), "127.0.0.1"),  # garbage stops the walk at the last known hop
    ("127.0.0.1", xff("garbage, 10.1.2.3"), "10.1.2.3"),
    ("127.0.0.1", xff("unknown"), "127.0.0.1"),
    ("127.0.0.1", xff(""), "127.0.0.1"),
    ("127.0.0.1", xff("192.0.2.7:port"), "127.0.0.1"),
    ("127.0.0.1", xff("[192.0.2.7]:1"), "127.0.0.1"),  # brackets are for IPv6
    ("127.0.0.1", xff("fe80::1%eth0"), "127.0.0.1"),
    ("192.0.2.50", xff("192.0.2.7"), "192.0.2.50"),  # an untrusted peer: its header is not read
    ("", xff("192.0.2.7"), ""),  # a unix socket is not trusted unless the list says 'unix'
    ("127.0.0.1", [], "127.0.0.1"),
    ("127.0.0.1", fwd("for=192.0.2.7"), "192.0.2.7"),
    ("127.0.0.1", fwd('for="[2001:db8::7]:4711"'), "2001:db8::7"),
    ("127.0.0.1", fwd('For="192.0.2.7:80";proto=https;by=10.0.0.1'), "192.0.2.7"),
    ("127.0.0.1", fwd("for=198.51.100.1, for=192.0.2.7"), "192.0.2.7"),
    ("127.0.0.1", fwd('for=192.0.2.7;host="a,b", for=10.1.2.3'), "192.0.2.7"),  # a comma inside quotes
    ("127.0.0.1", fwd("for=unknown"), "127.0.0.1"),
    ("127.0.0.1", fwd("for=_hidden"), "127.0.0.1"),
    ("127.0.0.1", fwd("proto=https"), "127.0.0.1"),  # no for=: the hop is unknown
    ("127.0.0.1", fwd("for=2001:db8::7"), "2001:db8::7"),  # RFC 7239 wants IPv6 quoted and bracketed: tolerated
    ("127.0.0.1", [*xff("192.0.2.7"), *fwd("for=198.51.100.1")], "127.0.0.1"),  # both: neither is believed
    ("10.1.2.3", xff("192.0.2.7"), "192.0.2.7"),
    ("2001:db8:aa::1", xff("192.0.2.7"), "192.0.2.7"),
]


@pytest.mark.parametrize(("peer", "fields", "client"), CASES)
def test_the_client_of_a_request(peer: str, fields: list[tuple[bytes, bytes]], client: str) -> None:
    assert client_address(peer, fields, PROXIES) == client


def test_forwarded_for_reads_each_element() -> None:
    assert forwarded_for(b'for=192.0.2.7;proto=http, by=10.0.0.1, for="[::1]:80"') == ["192.0.2.7", None, "::1"]


def test_nothing_is_trusted_by_default_and_everything_with_a_star() -> None:
    assert not TrustedProxies()
    assert client_address("127.0.0.1", xff("192.0.2.7"), TrustedProxies()) == "127.0.0.1"
    everyone = TrustedProxies.parse(["*"])
    assert client_address("203.0.113.5", xff("192.0.2.7, 198.51.100.1"), everyone) == "192.0.2.7"
    assert client_address("", xff("192.0.2.7"), TrustedProxies.parse(["unix"])) == "192.0.2.7"


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "example.com", "10.0.0.1/8/8", "unix:/x"])
def test_an_entry_that_is_no_address_is_refused_at_start(entry: str) -> None:
    with pytest.raises(ValueError, match="not an address"):
        TrustedProxies.parse([entry])


def test_the_proxy_protocol_needs_trusted_proxies() -> None:
    with pytest.raises(ValueError, match="forwarded-allow-ips"):
        TrustedProxies.parse([], proxy_protocol=True)
    assert TrustedProxies.parse(["127.0.0.1"], proxy_protocol=True).proxy_protocol


def test_head_fields_lowercases_names_and_strips_values() -> None:
    head = b"GET /acp HTTP/1.1\r\nHost: x\r\nX-Forwarded-For:  192.0.2.7 \r\nbroken line\r\n"
    assert head_fields(head) == [(b"host", b"x"), (b"x-forwarded-for", b"192.0.2.7")]


addresses = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)


@given(st.lists(addresses, min_size=1, max_size=6), st.lists(st.sampled_from(["10.0.0.5", "127.0.0.1"]), max_size=3))
def test_a_client_cannot_name_an_address_left_of_the_first_untrusted_hop(
    spoofed: list[str], proxies: list[str]
) -> None:
    """Whatever a client writes, the rightmost untrusted hop wins: the address the last trusted proxy saw."""
    real = "203.0.113.77"
    value = ", ".join([*spoofed, real, *proxies])
    assert client_address("127.0.0.1", xff(value), PROXIES) == real
    quoted = ", ".join(f'for="[{a}]"' if ":" in a else f"for={a}" for a in [*spoofed, real, *proxies])
    assert client_address("127.0.0.1", fwd(quoted), PROXIES) == real


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_garbage_headers_never_fail_and_give_an_address_or_the_peer(a: bytes, b: bytes) -> None:
    for fields in ([(b"x-forwarded-for", a)], [(b"forwarded", a), (b"forwarded", b)]):
        got = client_address("127.0.0.1", fields, PROXIES)
        assert got == "127.0.0.1" or ipaddress.ip_address(got)
