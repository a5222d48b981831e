"""The WebSocket profile's door: picows hands over each upgrade request and gets the answer to send.

A health probe is answered as over HTTP (hosting/routes.py); a request for
``/acp`` passes the host's ``Admission`` (the same rules as a Streamable HTTP
request) and, admitted, gets a ``101`` with a fresh ``Acp-Connection-Id`` (a
label for logs and affinity, never a credential) and a ``WsPeer`` that starts
its connection once the handshake completes. An upgraded socket that sends no
``initialize`` within ``initialize_timeout_s`` is closed 1008.
"""

from __future__ import annotations

import uuid
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from picows import WSUpgradeRequest, WSUpgradeResponse, WSUpgradeResponseWithListener

from ..transports.client_faults import ClientFaults
from ..transports.ws import WsPeer
from ..transports.ws_deflate import EXTENSIONS_HEADER, negotiate
from ..wire.limits import Limits
from . import subprotocol
from .admission import Admission, Head, Refused
from .config import CONNECTION_ID_HEADER
from .front import Route
from .request import BadRequest, origin_form
from .routes import Routes

if TYPE_CHECKING:
    from ..observability.access_log import AccessLog

_UPGRADE_REQUIRED = (("Upgrade", "websocket"), ("Connection", "Upgrade"))


class UpgradeHost(Protocol):
    """What the upgrade needs of its host."""

    limits: Limits
    path: bytes
    admission: Admission
    routes: Routes
    client_faults: ClientFaults
    access_log: AccessLog | None

    def start_peer(self, peer: WsPeer, principal: str | None, key: str | None = None, client: str = "") -> bool: ...


class WebSocketUpgrade:
    """Answers upgrade requests; counts the upgraded sockets that never sent ``initialize``."""

    def __init__(self, host: UpgradeHost) -> None:
        self.host = host
        self.admission = host.admission
        self.initialize_timeouts = 0

    def route(self, request: WSUpgradeRequest, client: str = "") -> Route:
        """Answer an upgrade request; ``client`` is the peer's address ('' when unknown: a unix socket)."""
        host = self.host
        try:  # absolute-form too (GET http://host/acp), as for any other request (hosting/request.py)
            path = origin_form(b"GET", request.path).split(b"?", 1)[0]
        except BadRequest as exc:
            return self._refuse(400, str(exc), (), "")
        probe = host.routes.health(path)
        if probe is not None:
            return _plain(*probe)
        if path != host.path:
            return None  # 404
        headers = request.headers
        protocols = headers.getall(subprotocol.PROTOCOL_HEADER, [])
        admitted = self.admission.check(Head(headers.items(), headers, client, protocols))
        if isinstance(admitted, Refused):
            return self._refuse(admitted.status, admitted.reason, admitted.headers, client)
        if "websocket" not in headers.get("Upgrade", "").lower():
            return self._refuse(426, "this server offers ACP over WebSocket only", _UPGRADE_REQUIRED, client)
        principal = admitted.principal
        key = self.admission.room(principal, client)
        if isinstance(key, Refused):
            return self._refuse(key.status, key.reason, key.headers, client)
        connection_id = uuid.uuid4().hex
        extra = {CONNECTION_ID_HEADER: connection_id}
        offer = admitted.offer
        if offer is not None and offer.protocol is not None:
            extra[subprotocol.PROTOCOL_HEADER] = offer.protocol  # one the client offered, never the bearer entry
        deflate = negotiate(headers.getall(EXTENSIONS_HEADER, [])) if host.limits.ws_deflate else None
        if deflate is not None:
            extra[EXTENSIONS_HEADER] = deflate.response
        peer = WsPeer(connection_id, host.limits, lambda p: self._start(p, principal, key, client), deflate=deflate)
        peer.on_initialize_timeout = self._count_initialize_timeout
        peer.faults = host.client_faults
        response = WSUpgradeResponse.create_101_response(extra)
        return WSUpgradeResponseWithListener(response, peer)

    def _start(self, peer: WsPeer, principal: str | None, key: str | None, client: str) -> None:
        self.host.start_peer(peer, principal, key, client)

    def _count_initialize_timeout(self) -> None:
        self.initialize_timeouts += 1

    def _refuse(
        self, status: int, reason: str, headers: tuple[tuple[str, str], ...], client: str
    ) -> WSUpgradeResponseWithListener:
        host = self.host
        self.admission.count_refused(status)
        if host.access_log is not None:
            host.access_log.ws_refused(host.path.decode(), status, client)
        response = WSUpgradeResponse.create_error_response(
            HTTPStatus(status), f"{reason}\n".encode(), dict(headers) if headers else None
        )
        return WSUpgradeResponseWithListener(response, None)


def _plain(status: int, body: bytes) -> WSUpgradeResponseWithListener:
    if status == HTTPStatus.OK:
        response = WSUpgradeResponse.create_ok_response(body)
    else:
        response = WSUpgradeResponse.create_error_response(HTTPStatus(status), body, {"Content-Type": "text/plain"})
    return WSUpgradeResponseWithListener(response, None)
