"""The WebSocket link of ``acp-fast client ws://...``: one text frame per message, over picows.

It imports picows (the server extra) at once, so the console imports this
module only for a ws:// or wss:// URL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from picows import WSError, WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

from ...client.connection import ClientHandler, ClientSideConnection
from ...peer.connection import Connection
from ...wire.limits import Limits
from .links import Link, LinkError, MessageReadControl, Tap, _first_line, _os_error, message_connection


class WsLink(Link):
    def __init__(self, client: ClientSideConnection, listener: _Listener) -> None:
        super().__init__(client)
        self._listener = listener

    def end_reason(self) -> str:
        code = self._listener.close_code
        return "the server closed the WebSocket" + (f" ({code})" if code is not None else "")


class _Listener(WSListener):
    """One text message per frame (continuations joined); frames before the Connection exists wait in ``early``."""

    def __init__(self) -> None:
        self.transport: WSTransport | None = None
        self.deliver: Callable[[bytes], None] | None = None
        self.conn: Connection | None = None
        self.close_code: int | None = None
        self._parts: bytearray | None = None
        self.early: list[bytes] = []
        self.gone = False

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        kind = frame.msg_type
        if kind is WSMsgType.TEXT:
            if frame.fin:
                self._deliver(frame.get_payload_as_bytes())
            else:
                self._parts = bytearray(frame.get_payload_as_bytes())
        elif kind is WSMsgType.CONTINUATION and self._parts is not None:
            self._parts += frame.get_payload_as_bytes()
            if frame.fin:
                data, self._parts = bytes(self._parts), None
                self._deliver(data)
        elif kind is WSMsgType.CLOSE:
            self.close_code = int(frame.get_close_code().value)
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def _deliver(self, data: bytes) -> None:
        if self.deliver is not None:
            self.deliver(data)
        else:  # a frame right behind the handshake, before the Connection exists
            self.early.append(data)

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.gone = True
        if self.conn is not None:
            self.conn.feed_eof(None)


async def open_ws(
    url: str, headers: Sequence[tuple[str, str]], handler: ClientHandler, limits: Limits, tap: Tap | None = None
) -> WsLink:
    """Connect to a hosted agent over WebSocket (one text frame per message)."""
    try:
        ws, listener = await ws_connect(_Listener, url, extra_headers=list(headers))
    except WSError as exc:
        raise LinkError(f"WebSocket handshake with {url} failed: {_first_line(exc)}") from None
    except (OSError, TimeoutError) as exc:
        raise LinkError(f"cannot connect to {url}: {_os_error(exc)}") from None
    assert isinstance(listener, _Listener)
    raw = ws.underlying_transport

    def send(line: bytes) -> None:
        ws.send(WSMsgType.TEXT, line)

    def close() -> None:
        ws.send_close()
        ws.disconnect()

    control = MessageReadControl(raw.pause_reading, raw.resume_reading, ws.disconnect)
    client, deliver = message_connection(limits, handler, tap, send, close, control)
    listener.deliver = deliver
    listener.conn = client.conn
    for data in listener.early:
        deliver(data)
    listener.early.clear()
    if listener.gone:  # closed before the Connection existed
        client.conn.feed_eof(None)
    client.run()
    return WsLink(client, listener)


__all__ = ["WsLink", "open_ws"]
