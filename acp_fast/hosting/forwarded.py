"""Which address is the client: trusted proxies and the headers they write, sans-IO.

Behind a proxy every socket comes from the proxy; the client's own address
is only in what the proxy says: a PROXY protocol header (hosting/proxy_header.py)
or an ``X-Forwarded-For`` / ``Forwarded`` (RFC 7239) request header. Anyone
can send those headers, so they are read only when the peer is a trusted
proxy (``--forwarded-allow-ips``; none by default), and the list they carry is
read from the right: each trusted hop vouches for the one before it, and the
first hop that is not a trusted proxy is the client. An entry that does not
parse (``unknown``, an obfuscated name, garbage) ends the walk at the last hop
that could be identified, so nothing left of it is believed.

A proxy appends to one of the two headers; a client may send the other one
itself, and which one the proxy wrote cannot be told from the request. So a
request carrying both is not believed: it counts under the peer's address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Fields = Iterable[tuple[bytes, bytes]]
#: The allow-list entry that trusts a unix-socket peer (a proxy on the same machine).
UNIX = "unix"


def canonical(text: str) -> str | None:
    """``text`` as one address, written one way (an IPv4-mapped IPv6 address as IPv4); None if it is none."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if address.scope_id is not None:
            return None
    return str(address)


@dataclass(frozen=True, slots=True)
class TrustedProxies:
    """The peers whose forwarding headers and PROXY headers are believed."""

    networks: tuple[Network, ...] = ()
    everyone: bool = False
    unix: bool = False
    #: Their sockets open with a PROXY header (``--proxy-protocol``); other peers' never do.
    proxy_protocol: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str], proxy_protocol: bool = False) -> TrustedProxies:
        """Addresses, CIDRs, ``*`` (every peer) or ``unix``, each entry possibly comma-separated."""
        networks: list[Network] = []
        everyone = unix = False
        for entry in (part.strip() for item in entries for part in item.split(",")):
            if not entry:
                continue
            if entry == "*":
                everyone = True
            elif entry == UNIX:
                unix = True
            else:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"{entry!r} is not an address, a CIDR, '*' or 'unix'") from None
        if proxy_protocol and not (networks or everyone or unix):
            raise ValueError("the PROXY protocol is read only from trusted proxies: name them (--forwarded-allow-ips)")
        return cls(tuple(networks), everyone, unix, proxy_protocol)

    def __bool__(self) -> bool:
        return bool(self.networks) or self.everyone or self.unix

    def trusts(self, peer: str) -> bool:
        """Is ``peer`` (an address; '' for a unix socket) a trusted proxy?"""
        if self.everyone:
            return True
        if not peer:
            return self.unix
        if not self.networks:  # the default: no address is parsed per socket
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.networks)


def client_address(peer: str, fields: Fields, trusted: TrustedProxies) -> str:
    """The client of a request from ``peer`` carrying ``fields`` (names lowercased): ``peer`` unless it is trusted."""
    if not trusted.trusts(peer):
        return peer
    xff: list[bytes] = []
    forwarded: list[bytes] = []
    for name, value in fields:
        if name == b"x-forwarded-for":
            xff.append(value)
        elif name == b"forwarded":
            forwarded.append(value)
    if xff and forwarded:  # one of them the client wrote, and nothing says which
        return peer
    if xff:
        hops = [_node(entry) for entry in b",".join(xff).split(b",")]
    elif forwarded:
        hops = forwarded_for(b",".join(forwarded))
    else:
        return peer
    client = peer
    for hop in reversed(hops):
        if hop is None or not trusted.trusts(client):
            break
        client = hop
    return client


def forwarded_for(value: bytes) -> list[str | None]:
    """The ``for=`` node of each element of a ``Forwarded`` value (RFC 7239), None where it has none that parses."""
    hops: list[str | None] = []
    for element in _split(value, ord(",")):
        node: str | None = None
        for pair in _split(element, ord(";")):
            name, sep, raw = pair.partition(b"=")
            if sep and name.strip().lower() == b"for":
                raw = raw.strip()
                if raw[:1] == b'"' and raw[-1:] == b'"' and len(raw) >= 2:
                    raw = raw[1:-1].replace(b"\\", b"")
                node = _node(raw)
        hops.append(node)
    return hops


def _split(value: bytes, sep: int) -> list[bytes]:
    """``value`` split at ``sep`` outside quoted strings."""
    parts: list[bytes] = []
    start, quoted, escaped = 0, False, False
    for i, byte in enumerate(value):
        if escaped:
            escaped = False
        elif quoted and byte == 0x5C:  # backslash
            escaped = True
        elif byte == 0x22:  # double quote
            quoted = not quoted
        elif byte == sep and not quoted:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return parts


def _node(raw: bytes) -> str | None:
    """One hop: ``1.2.3.4``, ``1.2.3.4:80``, ``2001:db8::1``, ``[2001:db8::1]:80``; None for anything else."""
    try:
        text = raw.strip().decode("ascii")
    except UnicodeDecodeError:
        return None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return canonical(host) if ":" in host else None
    if text.count(":") == 1:  # IPv4 with a port
        host, _, port = text.partition(":")
        return canonical(host) if port.isdigit() and "." in host else None
    return canonical(text)


def head_fields(head: bytes | bytearray) -> list[tuple[bytes, bytes]]:
    """The header fields of a raw request head (names lowercased, values stripped), for ``client_address``."""
    out: list[tuple[bytes, bytes]] = []
    for line in bytes(head).split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            out.append((name.strip().lower(), value.strip()))
    return out


__all__ = ["UNIX", "TrustedProxies", "canonical", "client_address", "forwarded_for", "head_fields"]
