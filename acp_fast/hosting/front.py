"""The first protocol on every accepted socket: read the request head, then hand the socket over.

Both ACP profiles share one port and one ``/acp`` path, and only the request
head tells them apart. The front buffers that head (bounded by
``max_request_head_bytes``; past it ``431``), then:

- a ``GET`` carrying ``Upgrade: websocket`` goes to picows: its server
  protocol is built exactly as ``picows.ws_create_server`` builds it, takes
  the transport (``set_protocol``) and is fed the bytes already read through
  its own ``get_buffer``/``buffer_updated``. From then on the loop calls
  picows directly, so the WebSocket data path has nothing of the front left
  in it.
- anything else goes to the HTTP/1.1 channel (hosting/http.py): health
  probes, the Streamable HTTP profile, errors.

On a unix socket picows' ``connection_made`` would set TCP options and fail;
there it gets the transport through ``UnixTransportView``, whose socket
ignores TCP options and which forwards everything else.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any, Protocol, cast

from picows import WSAutoPingStrategy, WSListener, WSUpgradeRequest, WSUpgradeResponseWithListener
from picows.picows import WSProtocol  # type: ignore[attr-defined]  # public class, absent from the stubs

from ..transports.client_faults import ClientFaults
from ..wire.limits import Limits
from . import forwarded, proxy_header
from .forwarded import TrustedProxies
from .picows_log import PicowsLog
from .unbound import SocketAdmission, UnboundSockets, is_health_probe

#: picows' answer to an upgrade request: a listener (101), a response (with or without one), None (404).
Route = WSListener | WSUpgradeResponseWithListener | None


class FrontHost(Protocol):
    """What the front needs of the host it hands sockets to."""

    limits: Limits
    proxies: TrustedProxies
    unbound: UnboundSockets
    client_faults: ClientFaults

    def route(self, request: WSUpgradeRequest, client: str) -> Route:
        """Answer a WebSocket upgrade request from ``client``."""

    def http_channel(self, transport: asyncio.Transport, already_read: bytes, peer: str, client: str) -> None:
        """Serve the socket as HTTP/1.1 from the request whose bytes were ``already_read``."""

    def count_refused(self, status: int) -> None:
        """A socket was answered ``status`` and closed before it reached either profile."""


log = logging.getLogger(__name__)


_HEAD_END = b"\r\n\r\n"
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
_BAD_PROXY_HEADER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 27\r\nConnection: close\r\n\r\n"
    b"bad PROXY protocol header\r\n"
)


class Front(asyncio.Protocol):
    """Reads one request head and gives the socket to picows (upgrade) or to the HTTP channel.

    A trusted proxy's socket may open with a PROXY header (``--proxy-protocol``),
    read first; the client it names, or the one its forwarding headers name
    (hosting/forwarded.py), is the socket's client from then on.
    """

    __slots__ = ("_address", "_buf", "_health_only", "_host", "_peer", "_proxy", "_refused", "_timer", "_transport",
                 "_unix")  # fmt: skip

    def __init__(self, host: FrontHost, unix: bool) -> None:
        self._host = host
        self._unix = unix
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._peer = ""  # the client as far as known: the socket's peer, or what its PROXY header named
        self._address = ""  # whose share of the unbound sockets this one counts in ('' none)
        self._proxy = False  # a PROXY header is still to be read
        self._health_only = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self._peer = peer_address(transport)
        trusted = self._host.proxies.trusts(self._peer)
        self._proxy = trusted and self._host.proxies.proxy_protocol
        self._address = "" if trusted else self._peer  # a proxy counts under the clients it names
        admission = self._host.unbound.front_opened(self, self._address)
        if admission is SocketAdmission.REFUSE:  # too many sockets serve no connection yet
            self._refuse(_BUSY, 503)
            return
        self._health_only = admission is SocketAdmission.HEALTH_ONLY
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._host.limits.handshake_timeout_s, self._transport.abort)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_timer()
        self._host.unbound.front_closed(self)

    def drain(self) -> None:
        """The host drains: a socket still sending its first head is closed."""
        self._stop_timer()
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        buf = self._buf
        buf += data
        if self._proxy and not self._read_proxy_header():
            return
        limit = self._host.limits.max_request_head_bytes
        end = buf.find(_HEAD_END, 0, limit + len(_HEAD_END))  # the limit holds however the bytes arrive
        transport = self._transport
        assert transport is not None
        bare = end < 0 and buf.find(b"\n\n", 0, limit + 2) >= 0  # bare-LF lines: the HTTP side answers 400
        if end < 0 and not bare and len(buf) <= limit:
            return
        # A whole head, or one past the limit (the HTTP side answers 431 and lingers before closing)
        host, client = self._host, self._peer
        if end >= 0 and host.proxies.trusts(client):
            client = forwarded.client_address(client, forwarded.head_fields(buf[:end]), host.proxies)
            if not self._count_as("" if host.proxies.trusts(client) else client):
                return
        if self._health_only and not (end >= 0 and is_health_probe(buf)):
            self._refuse(_BUSY, 503)  # a socket of the health reserve serves nothing else
            return
        self._stop_timer()
        host.unbound.front_closed(self)
        if end >= 0 and not bare and _is_websocket_upgrade(buf, end):
            hand_to_picows(
                transport,
                bytes(buf),
                lambda request: host.route(request, client),
                host.limits,
                unix=self._unix,
                faults=host.client_faults,
            )
        else:
            host.http_channel(transport, bytes(buf), self._peer, client)
        self._buf = bytearray()

    def eof_received(self) -> bool | None:
        return False

    @property
    def address(self) -> str:
        """The client address this socket counts under ('' none)."""
        return self._address

    def _read_proxy_header(self) -> bool:
        """Take the PROXY header off the buffer: True once it is read and the socket may go on."""
        try:
            header = proxy_header.parse(self._buf, self._host.limits.max_proxy_header_bytes)
        except proxy_header.ProxyHeaderError as exc:
            log.info("closing a socket from a trusted proxy: %s", exc)
            self._refuse(_BAD_PROXY_HEADER, 400)
            return False
        if header is None:
            return False
        self._proxy = False
        del self._buf[: header.length]
        if header.client is not None:  # LOCAL and UNKNOWN keep the proxy's own address
            self._peer = header.client
        return self._count_as("" if self._host.proxies.trusts(self._peer) else self._peer)

    def _count_as(self, address: str) -> bool:
        """Count the socket under ``address`` from now on; refuse it (False) if that address holds its share."""
        if address == self._address:
            return True
        moved = self._host.unbound.front_moved(self, address)
        self._address = address
        if not moved:
            self._refuse(_BUSY, 503)
        return moved

    def _refuse(self, answer: bytes, status: int) -> None:
        """Answer and close; what the client still sends is discarded: a reset could lose the answer."""
        self._host.count_refused(status)
        self._stop_timer()
        self._host.unbound.front_closed(self)
        self._refused = True
        transport = self._transport
        assert transport is not None
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = asyncio.get_running_loop().call_later(self._host.limits.http_linger_s, transport.abort)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def peer_address(transport: asyncio.BaseTransport) -> str:
    """The peer's address without its port (one client, however many sockets); '' on a unix socket."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        host = str(peer[0])
        return (forwarded.canonical(host) or host) if ":" in host else host  # an IPv4-mapped IPv6 peer as IPv4
    return ""


def _is_websocket_upgrade(buf: bytearray, end: int) -> bool:
    """A ``GET`` whose ``Upgrade`` header names websocket (the rest is picows' to validate)."""
    if not buf.startswith(b"GET "):
        return False
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"upgrade":
            return b"websocket" in value.lower()
    return False


def hand_to_picows(
    transport: asyncio.Transport,
    already_read: bytes,
    route: Callable[[Any], Route],
    limits: Any,
    *,
    unix: bool,
    faults: ClientFaults | None = None,
) -> None:
    """Make picows' server protocol the socket's protocol and replay what the front read.

    ``faults``: where picows' reports of a client's bad frames go (hosting/picows_log.py).
    """
    ws_protocol = WSProtocol(
        None,  # host+port: server side
        None,  # ws path: server side
        False,  # is_client_side
        route,
        PicowsLog(faults or ClientFaults()),  # one per connection: its client's bad frames are reported once
        True,  # disconnect_on_exception
        limits.handshake_timeout_s,
        True,  # enable_auto_ping
        limits.ping_interval_s,
        limits.ping_timeout_s,
        WSAutoPingStrategy.PING_WHEN_IDLE,
        False,  # enable_auto_pong: WsPeer answers PINGs itself, after checking the reserved bits (RFC 6455 5.2)
        limits.max_line_bytes,
        None,  # extra headers
        limits.ws_read_buffer_bytes,
    )
    view: asyncio.Transport = UnixTransportView(transport) if unix else transport
    transport.set_protocol(ws_protocol)
    ws_protocol.connection_made(view)
    data = memoryview(already_read)
    while data:
        if transport.is_closing():
            return
        room = ws_protocol.get_buffer(-1)
        n = min(len(room), len(data))
        room[:n] = data[:n]
        data = data[n:]
        ws_protocol.buffer_updated(n)


class _UnixSocketView:
    """The socket picows inspects on connect: TCP options are ignored, everything else is the socket's."""

    __slots__ = ("_sock",)

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def setsockopt(self, level: int, option: int, value: Any) -> None:
        if level != socket.IPPROTO_TCP:
            self._sock.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int, *args: Any) -> Any:
        if level == socket.IPPROTO_TCP:
            return 0
        return self._sock.getsockopt(level, option, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class UnixTransportView(asyncio.Transport):
    """A unix-socket transport as picows sees it: its ``socket`` extra is a ``_UnixSocketView``."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._t = transport

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        value = self._t.get_extra_info(name, default)
        if name == "socket" and value is not None:
            return _UnixSocketView(value)
        return value

    def write(self, data: Any) -> None:
        self._t.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._t.writelines(list_of_data)

    def get_write_buffer_size(self) -> int:
        return self._t.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._t.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._t.get_write_buffer_limits()

    def pause_reading(self) -> None:
        self._t.pause_reading()

    def resume_reading(self) -> None:
        self._t.resume_reading()

    def is_reading(self) -> bool:
        return self._t.is_reading()

    def is_closing(self) -> bool:
        return self._t.is_closing()

    def close(self) -> None:
        self._t.close()

    def abort(self) -> None:
        self._t.abort()

    def write_eof(self) -> None:
        self._t.write_eof()

    def can_write_eof(self) -> bool:
        return self._t.can_write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._t.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._t.get_protocol()
