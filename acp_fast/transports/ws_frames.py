"""RFC 6455 as bytes: the close codes, the frames the server writes, and the checks picows leaves to us.

Its own room because none of it needs a socket or a loop: the header put in
front of each outgoing message (the Writer's framing strategies), the UTF-8
rule for text (1007) and the status a client's close is answered with are
functions of bytes, tested as such, and shared by the peer adapter
(``ws.py``) and the output side (``ws_output.py``). The per-message path
calls ``frame_text`` and ``valid_utf8`` as plain module functions.
"""

from __future__ import annotations

import codecs
import struct

from picows import WSCloseCode

from .ws_deflate import PerMessageDeflate

#: Close codes the official SDKs use for the same situations.
CLOSE_NORMAL = WSCloseCode.OK
CLOSE_GOING_AWAY = WSCloseCode.GOING_AWAY  # drain
CLOSE_PROTOCOL_ERROR = WSCloseCode.PROTOCOL_ERROR  # first message not initialize
CLOSE_POLICY = WSCloseCode.POLICY_VIOLATION  # output cap, initialize deadline, per-principal cap
CLOSE_INVALID_TEXT = WSCloseCode.INVALID_TEXT  # a text message that is not UTF-8
CLOSE_TOO_BIG = WSCloseCode.MESSAGE_TOO_BIG
CLOSE_INTERNAL = WSCloseCode.INTERNAL_ERROR


_FIN_TEXT = 0x81
_RSV1 = 0x40  # permessage-deflate: this message is compressed
#: Server frames are unmasked: the header is the first byte and the payload length (RFC 6455 5.2).
_SHORT_HEADERS = tuple(bytes((_FIN_TEXT, n)) for n in range(126))
_HEADER_16 = struct.Struct(">BBH").pack
_HEADER_64 = struct.Struct(">BBQ").pack


_decode_utf8 = codecs.utf_8_decode
#: Messages longer than this are checked for UTF-8 in pieces, so the check never holds a second copy of them.
_UTF8_PIECE = 256 * 1024


def valid_utf8(data: bytes | bytearray | memoryview) -> bool:
    """Is ``data`` well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF)?

    RFC 6455 8.1 makes a text message that is not UTF-8 fail the connection
    (1007). Python's strict decoder is exactly RFC 3629's grammar; an ASCII
    message costs one copy into a discarded str.
    """
    try:
        if len(data) <= _UTF8_PIECE:
            _decode_utf8(data, "strict", True)
            return True
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        view = memoryview(data)
        for start in range(0, len(view), _UTF8_PIECE):
            decoder.decode(view[start : start + _UTF8_PIECE], False)
        decoder.decode(b"", True)
    except UnicodeDecodeError:
        return False
    return True


def close_reply_code(payload: memoryview) -> WSCloseCode:
    """The status to answer a client's close with, from its close frame's ``payload`` (RFC 6455 5.5.1, 7.4).

    An empty close frame gets 1000. A status a client may send is echoed;
    one that must never be on the wire (0-999, 1004-1006, 1015, 1016-2999,
    5000 and up) or a one-byte payload makes the close a protocol error: 1002.
    """
    size = len(payload)
    if size == 0:
        return CLOSE_NORMAL
    if size == 1:
        return CLOSE_PROTOCOL_ERROR
    code = int.from_bytes(payload[:2], "big")
    if 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999:
        return WSCloseCode(code)
    return CLOSE_PROTOCOL_ERROR


def text_frame_header(size: int, first_byte: int = _FIN_TEXT) -> bytes:
    """The header of one unmasked frame (server to client) with a ``size``-byte payload."""
    if size < 126:
        return _SHORT_HEADERS[size] if first_byte == _FIN_TEXT else bytes((first_byte, size))
    if size < 65536:
        return _HEADER_16(first_byte, 126, size)
    return _HEADER_64(first_byte, 127, size)


def frame_text(buf: bytearray, data: bytes) -> None:
    """The WebSocket framing of the Writer (``peer/writer.py`` ``Framing``): each message one text frame.

    Every message the Connection writes is one encoded JSON-RPC message ending
    in the encoder's newline; here that newline is replaced by a frame header
    in front, so a loop turn's messages leave in one socket write, each its
    own frame. The Writer's logic (flow control, R26, the flush bound) is
    unchanged; only how a message enters the buffer differs.
    """
    size = len(data)
    newline = data.endswith(b"\n")
    if newline:
        size -= 1
    if size < 126:
        buf += _SHORT_HEADERS[size]
    elif size < 65536:
        buf += _HEADER_16(_FIN_TEXT, 126, size)
    else:
        buf += _HEADER_64(_FIN_TEXT, 127, size)
    buf += data
    if newline:
        del buf[-1]


class DeflateFraming:
    """The framing of a connection that agreed on permessage-deflate: each message compressed on its own."""

    __slots__ = ("_deflate",)

    def __init__(self, deflate: PerMessageDeflate) -> None:
        self._deflate = deflate

    def __call__(self, buf: bytearray, data: bytes) -> None:
        body = self._deflate.compress(memoryview(data)[:-1] if data.endswith(b"\n") else data)
        buf += text_frame_header(len(body), _FIN_TEXT | _RSV1)
        buf += body
