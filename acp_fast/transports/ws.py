"""WebSocket as a peer transport: one socket carries one JSON-RPC peer, one message per text frame.

A message-oriented transport needs no line framer: each complete text
message goes straight to the Connection's ``feed_line`` (the same decoder,
inbox and dispatch as stdio), and ``feed_end`` follows the last frame of a
socket read, so inline dispatch and answer coalescing behave as they do
over a pipe. On the way out, ``frame_text`` frames each message as it is
queued (header in front, the encoder's newline dropped), so the messages of
one loop turn leave as consecutive text frames in one socket write, exactly
as lines coalesce over stdio.

Socket close is EOF for the Connection (R13-R15 via R27), and so is the
client's close frame: the shutdown that follows cancels and answers what was
running, and every answer leaves ahead of the server's close frame. Flow
control is the socket's: the Writer's high-water mark is applied to the TCP
transport, and a client that stops reading is closed with 1008 by the output
cap (transports/output_cap.py: past ``max_buffered_output_bytes`` with no
progress for ``output_stall_timeout_s``; one message up to ``max_line_bytes``
always passes to a reading client).

picows does the framing in C and calls ``on_ws_frame`` synchronously from
the loop's read callback, which is what the inline dispatch path wants.
picows checks opcodes, masks, control-frame sizes and close codes; the rest
of RFC 6455's MUSTs are here: text must be UTF-8 (1007), a continuation needs
a message to continue and a new message may not start inside one (1002),
reserved bits need an agreed extension (1002; PINGs are answered here, after
that check, not by picows), and nothing follows our close frame. picows'
read buffer grows for a large message and never shrinks: its unused pages are
given back ``ws_buffer_release_s`` after a large read (``release_pages``).
"""

from __future__ import annotations

import asyncio
import codecs
import ctypes
import logging
import mmap
import os
import struct
import sys
from collections.abc import Callable
from typing import cast

from multidict import CIMultiDict, CIMultiDictProxy
from picows import WSCloseCode, WSFrame, WSListener, WSMsgType, WSTransport

from ..peer.connection import Connection
from ..peer.flow import Pause, ReadPauses
from ..peer.writer import Writer
from ..wire import jsonrpc
from ..wire.errors import AcpError
from ..wire.jsonrpc import Request
from ..wire.limits import Limits
from .client_faults import ClientFaults
from .output_cap import OutputCap
from .ws_deflate import InflateError, InflateTooBig, PerMessageDeflate, inflate

log = logging.getLogger(__name__)
_UNHOSTED = ClientFaults()  # a peer no host counts for

#: Close codes the official SDKs use for the same situations.
CLOSE_NORMAL = WSCloseCode.OK
CLOSE_GOING_AWAY = WSCloseCode.GOING_AWAY  # drain
CLOSE_PROTOCOL_ERROR = WSCloseCode.PROTOCOL_ERROR  # first message not initialize
CLOSE_POLICY = WSCloseCode.POLICY_VIOLATION  # output cap, initialize deadline, per-principal cap
CLOSE_INVALID_TEXT = WSCloseCode.INVALID_TEXT  # a text message that is not UTF-8
CLOSE_TOO_BIG = WSCloseCode.MESSAGE_TOO_BIG
CLOSE_INTERNAL = WSCloseCode.INTERNAL_ERROR


_FIN_TEXT = 0x81
#: What an upgrade's header maps are replaced with once the connection is up (see _forget_upgrade).
_NO_HEADERS = CIMultiDictProxy(CIMultiDict[str]())
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


#: A frame (with what followed it in the same read) this large means picows grew its read buffer
#: past the initial ``ws_read_buffer_bytes``; the buffer never shrinks, so its pages are returned
#: ``ws_buffer_release_s`` later (``release_pages``). 64 KiB is uvloop's read size: below it a
#: read fits the buffer picows starts with after its first doublings.
_BIG_READ = 64 * 1024
_MADV_DONTNEED = 4  # Linux: the pages are dropped; the next touch maps zeroed ones


def _find_madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` on Linux (where MADV_DONTNEED frees at once), else None: nothing is released."""
    if sys.platform != "linux":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], fn)


_madvise = _find_madvise()


def release_pages(view: memoryview) -> int:
    """Give the whole memory pages inside ``view`` back to the OS; the bytes released.

    ``view`` must be memory whose contents nobody needs (picows' ``get_buffer``
    is exactly that: the part of its read buffer the next read will fill).
    The allocation stays as it is (address, size); only its resident pages
    go, and a later read maps fresh zeroed pages as it writes them.
    """
    if _madvise is None or not len(view) or view.readonly:
        return 0
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    page = mmap.PAGESIZE
    start = -(-address // page) * page
    end = (address + len(view)) // page * page
    if end <= start or _madvise(start, end - start, _MADV_DONTNEED) != 0:
        return 0
    return end - start


def text_frame_header(size: int, first_byte: int = _FIN_TEXT) -> bytes:
    """The header of one unmasked frame (server to client) with a ``size``-byte payload."""
    if size < 126:
        return _SHORT_HEADERS[size] if first_byte == _FIN_TEXT else bytes((first_byte, size))
    if size < 65536:
        return _HEADER_16(first_byte, 126, size)
    return _HEADER_64(first_byte, 127, size)


def _reply_code(frame: WSFrame) -> WSCloseCode:
    """The status to answer a client's close with (RFC 6455 5.5.1, 7.4).

    An empty close frame gets 1000. A status a client may send is echoed;
    one that must never be on the wire (0-999, 1004-1006, 1015, 1016-2999,
    5000 and up) or a one-byte payload makes the close a protocol error: 1002.
    """
    size = len(frame.get_payload_as_memoryview())
    if size == 0:
        return CLOSE_NORMAL
    if size == 1:
        return CLOSE_PROTOCOL_ERROR
    code = int.from_bytes(frame.get_payload_as_memoryview()[:2], "big")
    if 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999:
        return WSCloseCode(code)
    return CLOSE_PROTOCOL_ERROR


class FrameWriteTransport(asyncio.WriteTransport):
    """The Writer's transport over one WebSocket: every line it writes leaves as one text frame."""

    def __init__(self, ws: WSTransport, limits: Limits, on_close_sent: Callable[[], None]) -> None:
        super().__init__()
        self._ws = ws
        self._on_close_sent = on_close_sent
        self._tcp = ws.underlying_transport
        self._fd = self._tcp.get_extra_info("socket").fileno()
        self._cap = OutputCap(
            asyncio.get_running_loop(),
            cap=limits.max_buffered_output_bytes,
            max_message=limits.max_line_bytes + 16,  # one message and its frame header
            stall_s=limits.output_stall_timeout_s,
            size=self._tcp.get_write_buffer_size,
            on_stalled=self._stalled,
        )
        self._closing = False
        self.lost = False
        self.writer_closed = False
        self.close_code = CLOSE_NORMAL
        self.close_reason = b""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hand frames already built by the Writer (``frame_text``) to the socket, and enforce the output cap.

        Frames go straight to the TCP transport, not through picows's
        ``send``: one write for all the frames of a loop turn, and no frame
        header in a buffer picows reuses (its ``send`` passes large payloads
        to ``writelines`` with the header as a view of that buffer, which the
        loop may keep while the socket is backed up).
        """
        if self._closing or self._ws.is_close_frame_sent:
            return  # nothing follows a close frame (RFC 6455 5.5.1), whoever sent it
        tcp = self._tcp
        if not tcp.get_write_buffer_size():
            try:
                sent = os.write(self._fd, data)
            except OSError:  # EAGAIN, or a socket that failed: the transport queues or reports it
                sent = 0
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
        tcp.write(data)
        if self._cap.over():
            log.warning(
                "closing a connection whose client is not reading: %d bytes queued", tcp.get_write_buffer_size()
            )
            self.close_with(CLOSE_POLICY, b"output buffer limit exceeded")

    def _stalled(self) -> None:
        if not self._closing:
            log.warning(
                "closing a connection whose client is not reading: %d bytes queued, none taken for a while",
                self._tcp.get_write_buffer_size(),
            )
            self.close_with(CLOSE_POLICY, b"output buffer limit exceeded")

    def get_write_buffer_size(self) -> int:
        return 0 if self.lost else self._tcp.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._tcp.set_write_buffer_limits(high=high, low=low)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """The Writer's close, at the end of the Connection's shutdown: close frame behind the answers."""
        self.writer_closed = True
        self._close()

    def close_with(self, code: WSCloseCode, reason: bytes = b"") -> None:
        """Close now, on the transport's own decision (protocol error, output cap, client's close)."""
        self.close_code = code
        self.close_reason = reason
        self._close()

    def _close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._cap.cancel()
        if not self.lost:
            self._ws.send_close(self.close_code, self.close_reason)
            self._on_close_sent()

    def abort(self) -> None:
        """The Writer's flush bound passed: drop the socket and whatever it still held."""
        self._closing = True
        if not self.lost:
            self._ws.disconnect(graceful=False)

    def mark_lost(self) -> None:
        """The socket is gone: nothing more is sent, nothing counts as buffered."""
        self.lost = True
        self._closing = True
        self._cap.cancel()


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


class WsPeer(WSListener):
    """One WebSocket connection serving one Connection.

    ``on_start`` runs once the upgrade completed and the Connection exists:
    the host attaches its handlers there and starts ``conn.run()``.
    ``first_method`` (``initialize`` for ACP) must be the method of the first
    message that parses, else the socket closes with 1002; frames that do not
    parse get their JSON-RPC error first and change nothing.
    """

    def __init__(
        self,
        connection_id: str,
        limits: Limits,
        on_start: Callable[[WsPeer], None],
        first_method: str | None = "initialize",
        deflate: PerMessageDeflate | None = None,
    ) -> None:
        self.connection_id = connection_id
        self.deflate = deflate
        self.limits = limits
        self._on_start = on_start
        self._first_method = first_method
        self.conn: Connection | None = None
        self.writer: Writer | None = None
        self.out: FrameWriteTransport | None = None
        self.ws: WSTransport | None = None
        self.binary_frames = 0
        self._fragments: bytearray | None = None
        self._fragment_kind: WSMsgType | None = None
        self._fragments_compressed = False
        self.pauses = ReadPauses(self._pause_edge, self.out_close)  # the Connection's ReadControl too
        self._socket_paused = False
        self.ended = False
        self._awaiting_close_reply = False
        self._peer_closed = False
        self._drop_timer: asyncio.TimerHandle | None = None
        self._init_timer: asyncio.TimerHandle | None = None
        self._release_timer: asyncio.TimerHandle | None = None
        self.released_bytes = 0  # read-buffer pages given back to the OS (release_pages)
        self.on_end: Callable[[WsPeer], None] | None = None
        self.faults = _UNHOSTED  # counts and logs what the client does wrong; the host sets its own
        #: Called once if ``first_method`` did not come within ``initialize_timeout_s`` (the host counts it).
        self.on_initialize_timeout: Callable[[], None] | None = None

    # -- picows callbacks ------------------------------------------------------------------
    def on_ws_connected(self, transport: WSTransport) -> None:
        loop = asyncio.get_running_loop()
        self.ws = transport
        _forget_upgrade(transport)
        deflate = self.deflate
        writer = Writer(loop, self.limits, frame_text if deflate is None else DeflateFraming(deflate))
        out = FrameWriteTransport(transport, self.limits, self._close_sent)
        writer.attach(out)
        conn = Connection(loop, writer, self.limits, name=f"acp[{self.connection_id[:8]}]")
        conn.reader_attached(self.pauses)  # the Connection pauses its inbox's reason, or closes the socket
        self.writer, self.out, self.conn = writer, out, conn
        if self._first_method is not None:
            self._init_timer = loop.call_later(self.limits.initialize_timeout_s, self._initialize_overdue)
        self._on_start(self)

    def is_user_specific_pong(self, frame: WSFrame) -> bool:
        """The PONG picows' keep-alive waits for; one with a reserved bit goes to ``on_ws_frame`` (1002)."""
        return frame.msg_type is WSMsgType.PONG and not (frame.rsv1 or frame.rsv2 or frame.rsv3)

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        kind = frame.msg_type
        if frame.rsv1 or frame.rsv2 or frame.rsv3:
            self._extension_frame(frame)
        elif kind is WSMsgType.TEXT:
            if self._fragment_kind is not None:
                self._protocol_error(b"a new message inside a fragmented one")
            elif frame.fin:
                self._deliver(frame.get_payload_as_memoryview())
            else:
                self._fragment_kind = WSMsgType.TEXT
                self._fragments = bytearray(frame.get_payload_as_memoryview())
                self._fragments_compressed = False
        elif kind is WSMsgType.CONTINUATION:
            self._continue(frame)
        elif kind is WSMsgType.PING:
            # picows' automatic PONG is off (hosting/front.py) so that a PING with a reserved bit
            # reaches the check above; picows sends nothing once a close frame left.
            transport.send_pong(frame.get_payload_as_bytes())
        elif kind is WSMsgType.BINARY:
            if self._fragment_kind is not None:
                self._protocol_error(b"a new message inside a fragmented one")
            else:
                self.binary_frames += 1  # ACP messages are text; binary frames are ignored
                if not frame.fin:
                    self._fragment_kind = WSMsgType.BINARY
        elif kind is WSMsgType.CLOSE:
            self._close_received(transport, frame)
            return
        if frame.payload_size + frame.tail_size > _BIG_READ:
            self._big_read()
        if frame.last_in_buffer:
            # The fast path: dispatch the read's messages now. A read whose last frame picows keeps for
            # itself (a PING, the PONG to its own ping) needs nothing here: the Connection ends every
            # batch it was given one loop turn later (LineSink's contract, peer/reader.py).
            conn = self.conn
            if conn is not None:
                conn.feed_end()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self._fragments = None
        for timer in (self._drop_timer, self._init_timer, self._release_timer):
            if timer is not None:
                timer.cancel()
        self._drop_timer = self._init_timer = self._release_timer = None
        out, writer, conn = self.out, self.writer, self.conn
        if out is None or writer is None or conn is None:
            return
        writer_closed = out.writer_closed
        out.mark_lost()
        if writer_closed:
            writer.connection_lost(None)  # Writer.close may be waiting for the socket to finish
        else:
            writer.resume_writing()  # nothing more can leave: producers stop waiting for the socket
        conn.feed_eof(None)

    def _close_received(self, transport: WSTransport, frame: WSFrame) -> None:
        """The client's close is its EOF: what it sent before is answered, then our close follows.

        RFC 6455 lets the server send until its own close frame. Answering the
        close at once would drop the answers to requests read just before it
        (often in the same segment); instead the messages read so far are
        dispatched as at the end of any read, the Connection's EOF shutdown
        answers them, and its ``Writer.close`` sends our close behind the
        answers (``_close_sent``).
        """
        self._peer_closed = True
        out, conn = self.out, self.conn
        if out is None or conn is None or out.is_closing():
            transport.disconnect()  # this was the reply to our close: the handshake is complete
            return
        conn.feed_end()  # what this read delivered is dispatched ahead of the EOF
        if not self.ended:  # else a drain already ran the EOF shutdown, and closes with its own code
            self.ended = True
            out.close_code = _reply_code(frame)
            conn.feed_eof(None)

    def _close_sent(self) -> None:
        """Our close frame is queued: read on (discarding) until the client's reply, within a bound.

        Closing the TCP socket at once would drop the close frame and the last
        answers whenever input is still unread (the kernel resets instead); a
        client that never replies, or never reads, is dropped after
        ``drain_flush_s``. If the client closed first, the handshake is
        complete: the socket closes once its output is out, within the same bound.
        """
        self.ended = True
        self._drop_timer = asyncio.get_running_loop().call_later(self.limits.drain_flush_s, self._drop)
        ws = self.ws
        if self._peer_closed and ws is not None:
            ws.disconnect()
            return
        self._awaiting_close_reply = True
        self._fragments = None
        self._apply_pauses()

    def _drop(self) -> None:
        ws = self.ws
        if ws is not None and not ws.is_disconnected:
            self.faults.report("ws_close_timeout", "close not answered in time; dropping it", self.connection_id)
            ws.disconnect(graceful=False)

    def pause_writing(self) -> None:
        """Output is above the high-water mark: producers wait, and no more input is read (R26),
        so a client that sends without reading cannot grow its answers' buffer either."""
        if self.writer is not None:
            self.writer.pause_writing()
        self.pauses.hold(Pause.OUTPUT)

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer.resume_writing()
        self.pauses.release(Pause.OUTPUT)

    # -- input -----------------------------------------------------------------------------------
    def _extension_frame(self, frame: WSFrame) -> None:
        """A frame with a reserved bit set: the first frame of a compressed message, else a protocol error.

        Only RSV1, only with permessage-deflate agreed, and only on the first
        frame of a data message (RFC 7692 section 6.1); anything else closes 1002.
        """
        kind = frame.msg_type
        if frame.rsv2 or frame.rsv3 or self.deflate is None or kind not in (WSMsgType.TEXT, WSMsgType.BINARY):
            self._protocol_error(b"reserved bit set without an extension that defines it")
            return
        if self._fragment_kind is not None:
            self._protocol_error(b"a new message inside a fragmented one")
            return
        if kind is WSMsgType.BINARY:
            self.binary_frames += 1
            if not frame.fin:
                self._fragment_kind = WSMsgType.BINARY
            return
        if frame.fin:
            self._inflate_and_deliver(frame.get_payload_as_memoryview())
        else:
            self._fragment_kind = WSMsgType.TEXT
            self._fragments = bytearray(frame.get_payload_as_memoryview())
            self._fragments_compressed = True

    def _inflate_and_deliver(self, payload: bytes | bytearray | memoryview) -> None:
        """Inflate one compressed message, never past ``max_line_bytes`` (1009 beyond), and deliver it."""
        try:
            message = inflate(payload, self.limits.max_line_bytes)
        except InflateTooBig:
            self.close(CLOSE_TOO_BIG, b"message exceeds the size limit")
            return
        except InflateError:
            self.close(CLOSE_PROTOCOL_ERROR, b"invalid compressed message")
            return
        self._deliver(message)

    def _continue(self, frame: WSFrame) -> None:
        if self._fragment_kind is WSMsgType.BINARY:
            if frame.fin:
                self._fragment_kind = None
            return
        buf = self._fragments
        if buf is None:
            if not self.ended:  # after our close, what is still read is discarded, not judged
                self._protocol_error(b"a continuation frame without a message to continue")
            return
        buf += frame.get_payload_as_memoryview()
        if len(buf) > self.limits.max_line_bytes:
            self._fragments = self._fragment_kind = None
            self.close(CLOSE_TOO_BIG, b"message exceeds the size limit")
            return
        if frame.fin:
            self._fragments = self._fragment_kind = None
            if self._fragments_compressed:
                self._fragments_compressed = False
                self._inflate_and_deliver(buf)
            else:
                self._deliver(bytes(buf))

    def _deliver(self, payload: bytes | memoryview) -> None:
        conn = self.conn
        if conn is None or self.ended:
            return
        if not valid_utf8(payload):
            self.faults.report("ws_invalid_text", "a text message that is not UTF-8; closing 1007", self.connection_id)
            self.close(CLOSE_INVALID_TEXT, b"text message is not valid UTF-8")
            return
        if self._first_method is not None and not self._admit_first(payload):
            return
        conn.feed_line(payload)

    def _protocol_error(self, reason: bytes) -> None:
        """A frame RFC 6455 forbids here: drop any half-read message and close 1002."""
        self._fragments = self._fragment_kind = None
        if not self.ended:
            self.faults.report("ws_protocol", f"{reason.decode()}; closing 1002", self.connection_id)
        self.close(CLOSE_PROTOCOL_ERROR, reason)

    def _initialize_overdue(self) -> None:
        """``first_method`` did not come in time: the socket holds a slot and serves nobody; close 1008."""
        self._init_timer = None
        if self.ended or self._first_method is None:
            return
        what = f"no {self._first_method} within {self.limits.initialize_timeout_s:.3g} s; closing 1008"
        self.faults.report("ws_initialize_timeout", what, self.connection_id)
        if self.on_initialize_timeout is not None:
            self.on_initialize_timeout()
        self.close(CLOSE_POLICY, f"{self._first_method} not received in time".encode())

    def _big_read(self) -> None:
        """picows' read buffer grew for this read: give its unused pages back a little later."""
        if self._release_timer is None:
            loop = asyncio.get_running_loop()
            self._release_timer = loop.call_later(self.limits.ws_buffer_release_s, self._release_read_buffer)

    def _release_read_buffer(self) -> None:
        """Return the pages of picows' read buffer that hold no unread bytes (it grows, never shrinks).

        Called between reads, so ``get_buffer`` is exactly the part the next
        read fills: with nothing buffered, all of it. The allocation keeps
        its size; a later large message touches the pages again.
        """
        self._release_timer = None
        ws = self.ws
        if ws is None or ws.is_disconnected:
            return
        protocol = ws.underlying_transport.get_protocol()
        get_buffer = getattr(protocol, "get_buffer", None)
        if get_buffer is not None:
            self.released_bytes += release_pages(get_buffer(-1))

    def _admit_first(self, payload: bytes | bytearray | memoryview) -> bool:
        """Until the first message that parses: is it ``first_method``? Else close 1002."""
        try:
            message = jsonrpc.decode(payload)
        except (jsonrpc.InvalidMessage, AcpError):
            return True  # answered -32700/-32600 by the Connection; still waiting for the first message
        if type(message) is Request and message.method == self._first_method:
            self._first_method = None
            if self._init_timer is not None:
                self._init_timer.cancel()
                self._init_timer = None
            return True
        what = f"first message was not {self._first_method}; closing 1002"
        self.faults.report("ws_first_message", what, self.connection_id)
        self.close(CLOSE_PROTOCOL_ERROR, f"the first message must be {self._first_method}".encode())
        return False

    # -- control from the Connection and the host --------------------------------------------------
    @property
    def reading_paused(self) -> bool:
        return self._socket_paused

    @property
    def buffered_output(self) -> int:
        return self.out.get_write_buffer_size() if self.out is not None else 0

    def _pause_edge(self, paused: bool) -> None:
        self._apply_pauses()

    def _apply_pauses(self) -> None:
        """Read while nothing holds reading, and always while waiting for the client's close reply."""
        want_paused = self.pauses.paused and not self._awaiting_close_reply
        ws = self.ws
        if ws is None or want_paused == self._socket_paused:
            return
        tcp = ws.underlying_transport
        if tcp.is_closing():
            return
        self._socket_paused = want_paused
        if want_paused:
            tcp.pause_reading()
        else:
            tcp.resume_reading()

    def out_close(self) -> None:
        if self.out is not None:
            self.out.close()

    def close(self, code: WSCloseCode, reason: bytes = b"") -> None:
        """Close the socket now with ``code``; the Connection sees EOF when it is gone."""
        self.ended = True
        if self.out is not None:
            self.out.close_with(code, reason)

    def end(self, code: WSCloseCode = CLOSE_GOING_AWAY) -> None:
        """Graceful end (drain): stop reading, run the EOF shutdown, close with ``code`` after its answers."""
        if self.ended or self.conn is None or self.out is None:
            return
        self.ended = True
        self.out.close_code = code
        self.pauses.hold(Pause.DRAIN)  # what the client sends now stays unread, so nothing goes unanswered
        self.conn.feed_eof(None)

    def abort(self) -> None:
        """Drop the socket without a close handshake (a peer that outlived the drain bound)."""
        if self.ws is not None and not self.ws.is_disconnected:
            self.ws.disconnect(graceful=False)


def _forget_upgrade(transport: WSTransport) -> None:
    """Drop the header maps of the upgrade request and response picows keeps for the connection's life.

    They are read once, while the upgrade is routed and authorized; kept,
    they were about a tenth of an idle connection's memory. The request and
    response objects stay (``transport.request.path`` and the like still
    answer), with empty, read-only headers.
    """
    for message in (transport.request, transport.response):
        if message is not None and getattr(message, "headers", None) is not None:
            message.headers = _NO_HEADERS  # type: ignore[assignment]  # read-only on purpose
