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
of RFC 6455's MUSTs are checked here, frame by frame: a continuation needs
a message to continue and a new message may not start inside one (1002),
reserved bits need an agreed extension (1002; PINGs are answered here, after
that check, not by picows), text must be UTF-8 (1007, ``ws_frames.py``),
and nothing follows our close frame (``ws_output.py``).

This module is the peer adapter: picows' callbacks, message assembly, the
close handshake and flow control, with the state the per-message path reads
kept on the peer itself. Its neighbours hold what that path never needs: the
frame bytes and RFC checks (``ws_frames.py``), the Writer's transport and
output cap (``ws_output.py``), the first message's rule and deadline
(``ws_first_message.py``), an idle connection's memory (``ws_memory.py``).
Their public names import from here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from picows import WSCloseCode, WSFrame, WSListener, WSMsgType, WSTransport

from ..peer.connection import Connection
from ..peer.flow import Pause, ReadPauses
from ..peer.writer import Writer
from ..wire.limits import Limits
from .client_faults import ClientFaults
from .ws_deflate import InflateError, InflateTooBig, PerMessageDeflate, inflate
from .ws_first_message import FirstMessageGate
from .ws_frames import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL,
    CLOSE_INVALID_TEXT,
    CLOSE_NORMAL,
    CLOSE_POLICY,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    DeflateFraming,
    close_reply_code,
    frame_text,
    text_frame_header,
    valid_utf8,
)
from .ws_memory import BIG_READ, ReadBufferRelease, forget_upgrade, release_pages
from .ws_output import FrameWriteTransport

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL",
    "CLOSE_INVALID_TEXT",
    "CLOSE_NORMAL",
    "CLOSE_POLICY",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_TOO_BIG",
    "DeflateFraming",
    "FrameWriteTransport",
    "WsPeer",
    "frame_text",
    "release_pages",
    "text_frame_header",
    "valid_utf8",
]

_UNHOSTED = ClientFaults()  # a peer no host counts for


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
        self._gate = FirstMessageGate(first_method) if first_method is not None else None
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
        self._read_buffer: ReadBufferRelease | None = None  # made at the first large read
        self.on_end: Callable[[WsPeer], None] | None = None
        self.faults = _UNHOSTED  # counts and logs what the client does wrong; the host sets its own
        #: Called once if ``first_method`` did not come within ``initialize_timeout_s`` (the host counts it).
        self.on_initialize_timeout: Callable[[], None] | None = None

    # -- picows callbacks ------------------------------------------------------------------
    def on_ws_connected(self, transport: WSTransport) -> None:
        loop = asyncio.get_running_loop()
        self.ws = transport
        forget_upgrade(transport)
        deflate = self.deflate
        writer = Writer(loop, self.limits, frame_text if deflate is None else DeflateFraming(deflate))
        out = FrameWriteTransport(transport, self.limits, self._close_sent)
        writer.attach(out)
        conn = Connection(loop, writer, self.limits, name=f"acp[{self.connection_id[:8]}]")
        conn.reader_attached(self.pauses)  # the Connection pauses its inbox's reason, or closes the socket
        self.writer, self.out, self.conn = writer, out, conn
        if self._gate is not None:
            self._gate.start(loop, self.limits.initialize_timeout_s, self._initialize_overdue)
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
        if frame.payload_size + frame.tail_size > BIG_READ:
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
        if self._drop_timer is not None:
            self._drop_timer.cancel()
            self._drop_timer = None
        if self._gate is not None:
            self._gate.stop()
        if self._read_buffer is not None:
            self._read_buffer.cancel()
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
            out.close_code = close_reply_code(frame.get_payload_as_memoryview())
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
        if self._gate is not None and not self._admit_first(payload):
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
        gate = self._gate
        if self.ended or gate is None:
            return
        what = f"no {gate.method} within {self.limits.initialize_timeout_s:.3g} s; closing 1008"
        self.faults.report("ws_initialize_timeout", what, self.connection_id)
        if self.on_initialize_timeout is not None:
            self.on_initialize_timeout()
        self.close(CLOSE_POLICY, f"{gate.method} not received in time".encode())

    def _big_read(self) -> None:
        """picows' read buffer grew for this read: its unused pages go back a little later."""
        if self._read_buffer is None:  # frames come only after on_ws_connected set self.ws
            self._read_buffer = ReadBufferRelease(cast(WSTransport, self.ws), self.limits.ws_buffer_release_s)
        self._read_buffer.after_big_read()

    def _admit_first(self, payload: bytes | bytearray | memoryview) -> bool:
        """Until the first message that parses: is it ``first_method``? Else close 1002."""
        gate = self._gate
        if gate is None:
            return True
        admitted = gate.admits(payload)
        if admitted is None:
            return True  # answered -32700/-32600 by the Connection; still waiting for the first message
        if admitted:
            gate.stop()
            self._gate = None
            return True
        what = f"first message was not {gate.method}; closing 1002"
        self.faults.report("ws_first_message", what, self.connection_id)
        self.close(CLOSE_PROTOCOL_ERROR, f"the first message must be {gate.method}".encode())
        return False

    # -- control from the Connection and the host --------------------------------------------------
    @property
    def reading_paused(self) -> bool:
        return self._socket_paused

    @property
    def released_bytes(self) -> int:
        """Read-buffer bytes given back to the OS so far (``release_pages``)."""
        return self._read_buffer.released_bytes if self._read_buffer is not None else 0

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
