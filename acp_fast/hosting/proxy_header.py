"""The PROXY protocol header (versions 1 and 2), sans-IO: bytes in, the client's address out.

A layer-4 proxy (HAProxy's ``send-proxy`` / ``send-proxy-v2``, cloud load
balancers) opens each backend connection with one header naming the client
it relays; without it every client would be the proxy's address. ``parse``
reads that header from the first bytes of a socket and says how many bytes
it took; the socket front (hosting/front.py) accepts it only from a trusted
peer (hosting/forwarded.py) and reads the request head after it.

Version 1 is one text line, ``PROXY TCP4|TCP6|UNKNOWN ...\\r\\n``, 107 bytes at
most. Version 2 is a 16-byte binary preamble (signature, command, family,
length) followed by the addresses and optional TLVs, which are skipped. A
``LOCAL`` command (the proxy's own health check), ``UNKNOWN`` or an
unspecified or unix family carry no client address: the peer's own address
stands. Anything else (a wrong signature, a truncated or oversized header,
an address that does not parse, a datagram transport) is refused.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .forwarded import canonical

#: The 12 bytes every version 2 header starts with.
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX = b"PROXY "
#: Longest version 1 line, CRLF included (the protocol's own bound).
V1_MAX_BYTES = 107
_V2_PREAMBLE = 16
# Address block sizes of version 2 by family: IPv4 and IPv6 (source, destination, two ports), unix (two paths).
_V2_INET, _V2_INET6, _V2_UNIX = 0x1, 0x2, 0x3
_V2_BLOCK = {_V2_INET: 12, _V2_INET6: 36, _V2_UNIX: 216}


class ProxyHeaderError(ValueError):
    """The first bytes are not a PROXY header this server accepts: the socket is answered 400 and closed."""


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """A complete header: ``client`` is the relayed source address (None: keep the peer's), ``length`` its bytes."""

    client: str | None
    length: int


def parse(data: bytes | bytearray, max_bytes: int) -> ProxyHeader | None:
    """The header at the start of ``data``; None while it may still be incomplete.

    ``max_bytes`` bounds a version 2 header (its length field allows 64 KiB);
    a version 1 line is bounded by the protocol's 107 bytes.
    """
    if data[:1] == b"P":
        if not V1_PREFIX.startswith(bytes(data[: len(V1_PREFIX)])):
            raise ProxyHeaderError("not a PROXY protocol header")
        return _parse_v1(data)
    if data[:1] == b"\r":
        if not V2_SIGNATURE.startswith(bytes(data[: len(V2_SIGNATURE)])):
            raise ProxyHeaderError("not a PROXY protocol header")
        return _parse_v2(data, max_bytes)
    if not data:
        return None
    raise ProxyHeaderError("not a PROXY protocol header")


def _parse_v1(data: bytes | bytearray) -> ProxyHeader | None:
    end = data.find(b"\r\n", 0, V1_MAX_BYTES)
    if end < 0:
        if len(data) >= V1_MAX_BYTES or b"\n" in data[:V1_MAX_BYTES]:
            raise ProxyHeaderError("PROXY v1 line without CRLF within 107 bytes")
        return None
    line = bytes(data[:end])
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise ProxyHeaderError("PROXY v1 line is not ASCII") from None
    parts = text.split(" ")
    if parts[:2] == ["PROXY", "UNKNOWN"]:
        return ProxyHeader(None, end + 2)  # whatever follows UNKNOWN is ignored, as the protocol says
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError("PROXY v1 line needs TCP4|TCP6 SRC DST SPORT DPORT")
    _, family, source, destination, sport, dport = parts
    version = 4 if family == "TCP4" else 6
    for address in (source, destination):
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            raise ProxyHeaderError(f"PROXY v1 address {address[:45]!r} does not parse") from None
        if parsed.version != version:
            raise ProxyHeaderError(f"PROXY v1 address {address!r} is not {family}")
    for port in (sport, dport):
        if not (port.isdigit() and port.isascii() and len(port) <= 5 and int(port) <= 65535):
            raise ProxyHeaderError(f"PROXY v1 port {port[:8]!r} is not 0-65535")
    return ProxyHeader(canonical(source), end + 2)


def _parse_v2(data: bytes | bytearray, max_bytes: int) -> ProxyHeader | None:
    if len(data) < _V2_PREAMBLE:
        return None
    version, command = data[12] >> 4, data[12] & 0xF
    family, transport = data[13] >> 4, data[13] & 0xF
    length = _V2_PREAMBLE + int.from_bytes(data[14:16], "big")
    if version != 2:
        raise ProxyHeaderError(f"PROXY v2 header of version {version}")
    if command > 1:
        raise ProxyHeaderError(f"PROXY v2 command {command} is neither LOCAL nor PROXY")
    if length > max_bytes:
        raise ProxyHeaderError(f"PROXY v2 header of {length} bytes (at most {max_bytes})")
    if family > _V2_UNIX or transport > 2:
        raise ProxyHeaderError(f"PROXY v2 family/transport byte {data[13]:#04x} is not defined")
    block = _V2_BLOCK.get(family, 0)
    if length < _V2_PREAMBLE + block:
        raise ProxyHeaderError(f"PROXY v2 header of {length} bytes cannot hold its addresses")
    if len(data) < length:
        return None
    if command == 0 or family not in (_V2_INET, _V2_INET6):  # LOCAL, AF_UNSPEC or AF_UNIX: no client address
        return ProxyHeader(None, length)
    if transport != 1:
        raise ProxyHeaderError("PROXY v2 header relays a datagram or unspecified transport, not a stream")
    raw = bytes(data[_V2_PREAMBLE : _V2_PREAMBLE + (4 if family == _V2_INET else 16)])
    client = ipaddress.IPv4Address(raw) if family == _V2_INET else ipaddress.IPv6Address(raw)
    return ProxyHeader(canonical(str(client)), length)  # the TLVs after the addresses are skipped


__all__ = ["V1_MAX_BYTES", "V2_SIGNATURE", "ProxyHeader", "ProxyHeaderError", "parse"]
