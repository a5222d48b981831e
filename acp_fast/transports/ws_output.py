"""The output side of a WebSocket: the transport the Writer writes its frames to.

Its own room because the way out has rules of its own that the read side
never touches: frames go straight to the TCP socket (one write per loop
turn, no header in a buffer picows reuses), the output cap closes a client
that stops reading (1008), and nothing follows the close frame, whoever
decided to send it (RFC 6455 5.5.1). The peer adapter (``ws.py``) builds one
per connection and is told when the close frame is queued.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from picows import WSCloseCode, WSTransport

from ..wire.limits import Limits
from .output_cap import OutputCap
from .ws_frames import CLOSE_NORMAL, CLOSE_POLICY

#: Log lines name the WebSocket transport as a whole, whichever of its modules writes them.
log = logging.getLogger("acp_fast.transports.ws")


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
