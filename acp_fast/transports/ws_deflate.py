"""permessage-deflate (RFC 7692) for the WebSocket transport: negotiation, and each message (de)compressed whole.

acp_fast accepts the extension only without context takeover in either
direction: its answer always carries ``server_no_context_takeover`` and
``client_no_context_takeover``. Each message is then compressed and
decompressed on its own, so a connection keeps no zlib state between
messages: outgoing messages share one compressor per window size for the
whole process (reset after every message by a full flush), and each
incoming compressed message gets a fresh decompressor that is dropped
after it. With context takeover zlib would hold a window and a hash table
per connection in each direction (about 300 KiB with its defaults), which
is what makes deflate expensive for many idle connections.

Negotiation takes the first offer it can honour: ``server_max_window_bits``
is honoured from 9 to 15 (zlib cannot compress with an 8-bit window, so an
offer that demands it is declined); ``client_max_window_bits`` needs no
answer (every window up to 15 bits inflates with the default one); any
other parameter, a repeated one or a bad value declines that offer.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

EXTENSIONS_HEADER = "Sec-WebSocket-Extensions"
NAME = "permessage-deflate"
#: The empty stored block every flushed deflate stream ends with; RFC 7692 drops it from the frame.
_TAIL = b"\x00\x00\xff\xff"
_DEFAULT_WBITS = 15
_MIN_WBITS = 9  # zlib's raw deflate turns a window of 8 bits into 9, which an 8-bit inflater rejects


class InflateError(Exception):
    """A compressed message that is not a valid deflate stream."""


class InflateTooBig(Exception):
    """A compressed message that inflates past the size limit (it was not inflated further)."""


@dataclass(frozen=True, slots=True)
class PerMessageDeflate:
    """What was agreed for one connection: the window our messages are compressed with."""

    server_window_bits: int = _DEFAULT_WBITS
    offered_server_window_bits: bool = False

    @property
    def response(self) -> str:
        """The ``Sec-WebSocket-Extensions`` value of the 101 answer."""
        params = [NAME, "server_no_context_takeover", "client_no_context_takeover"]
        if self.offered_server_window_bits:
            params.append(f"server_max_window_bits={self.server_window_bits}")
        return "; ".join(params)

    def compress(self, payload: bytes | bytearray | memoryview) -> bytes:
        """The frame payload of one message (the deflate stream without its final empty block)."""
        compressor = _compressor(self.server_window_bits)
        out = compressor.compress(payload) + compressor.flush(zlib.Z_FULL_FLUSH)
        return out[:-4] if out.endswith(_TAIL) else out


_COMPRESSORS: dict[int, zlib._Compress] = {}


def _compressor(wbits: int) -> zlib._Compress:
    """One per window size for the process: a full flush after each message leaves it with no history."""
    c = _COMPRESSORS.get(wbits)
    if c is None:
        c = _COMPRESSORS[wbits] = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -wbits)
    return c


def inflate(payload: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """One message, inflated by a decompressor of its own that never produces more than ``max_size`` + 1 bytes."""
    d = zlib.decompressobj(-_DEFAULT_WBITS)
    try:
        out = d.decompress(payload, max_size + 1)
        if len(out) <= max_size and not d.unconsumed_tail:
            out += d.decompress(_TAIL, max_size + 1 - len(out))
    except zlib.error as exc:
        raise InflateError(str(exc)) from exc
    if len(out) > max_size or d.unconsumed_tail:
        raise InflateTooBig(f"the message inflates past {max_size} bytes")
    return out


def negotiate(header_values: list[str]) -> PerMessageDeflate | None:
    """The first permessage-deflate offer in the request's extension headers we can honour, or None (declined)."""
    for value in header_values:
        for offer in _split(value, ","):
            name, _, rest = offer.partition(";")
            if name.strip().lower() != NAME:
                continue
            agreed = _accept(_split(rest, ";"))
            if agreed is not None:
                return agreed
    return None


def _split(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside double quotes; empty items dropped."""
    items: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == sep and not quoted:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    items.append("".join(current).strip())
    return [i for i in items if i]


def _accept(params: list[str]) -> PerMessageDeflate | None:
    seen: set[str] = set()
    server_bits: int | None = None
    for param in params:
        key, eq, raw = param.partition("=")
        key = key.strip().lower()
        value = raw.strip().strip('"') if eq else None
        if key in seen:
            return None  # a parameter given twice: the offer is invalid (RFC 7692 section 7)
        seen.add(key)
        if key in ("server_no_context_takeover", "client_no_context_takeover"):
            if value is not None:
                return None
        elif key == "server_max_window_bits":
            bits = _window_bits(value)
            if bits is None or bits < _MIN_WBITS:
                return None
            server_bits = bits
        elif key == "client_max_window_bits":
            if value is not None and _window_bits(value) is None:
                return None
        else:
            return None
    if server_bits is None:
        return PerMessageDeflate()
    return PerMessageDeflate(server_bits, offered_server_window_bits=True)


#: The values a window-bits parameter may take: 8 to 15, no sign, no leading zero (RFC 7692 section 7.1.2).
_WINDOW_VALUES = {str(bits): bits for bits in range(8, 16)}


def _window_bits(value: str | None) -> int | None:
    return None if value is None else _WINDOW_VALUES.get(value)
