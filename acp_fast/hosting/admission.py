"""Who may open an ACP connection: one set of rules for the WebSocket upgrade and the Streamable HTTP profile.

On the request head, in order: one ``Authorization`` header at most (400),
the Origin allow-list (403, hosting/cors.py), a token offered as a WebSocket
subprotocol (400 if unreadable, hosting/subprotocol.py), the auth hook (401).
Then, before a connection starts: the drain state, the connection limit and
the per-principal limit (503). A refusal is a value (``Refused``), answered by
whichever profile asked, so a refused client costs one HTTP exchange and no ACP state.
"""

from __future__ import annotations

import enum
import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import cors, subprotocol
from .auth import duplicate_header, with_client
from .config import HostConfig
from .registry import PeerRegistry

log = logging.getLogger("acp_fast.hosting.server")  # the host's logger, as operators filter it

_RETRY = (("Retry-After", "1"),)


class Refusal(enum.Enum):
    """Why a request was refused (the ``code`` of a ``Refused``)."""

    DUPLICATE_AUTHORIZATION = "duplicate-authorization"
    ORIGIN = "origin"
    OFFER = "offer"
    UNAUTHORIZED = "unauthorized"
    DRAINING = "draining"
    CONNECTION_LIMIT = "connection-limit"
    SOCKET_SHARE = "socket-share"
    PRINCIPAL_LIMIT = "principal-limit"


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal: the status, why, the sentence the client reads, extra headers; ``close`` ends the socket."""

    status: int
    code: Refusal
    reason: str
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False

    @property
    def origin_allowed(self) -> bool:
        """Refused after the Origin check passed: a browser may read this refusal (CORS headers on it)."""
        return self.code not in (Refusal.DUPLICATE_AUTHORIZATION, Refusal.ORIGIN)


@dataclass(frozen=True, slots=True)
class Admitted:
    """Admitted on its head: who the auth hook named (None without one) and the subprotocol offer, if any."""

    principal: str | None = None
    offer: subprotocol.Offer | None = None


@dataclass(frozen=True, slots=True)
class Head:
    """What admission reads of a request head: the header pairs as sent and a case-insensitive view.

    ``protocols``: the ``Sec-WebSocket-Protocol`` values of an upgrade (None on
    HTTP); ``preflight``: a CORS preflight, which carries no credentials.
    """

    pairs: Iterable[tuple[str, str]]
    headers: Mapping[str, str]
    client: str = ""
    protocols: list[str] | None = None
    preflight: bool = False


_ORIGIN = Refused(403, Refusal.ORIGIN, "origin not allowed")
_UNAUTHORIZED = Refused(401, Refusal.UNAUTHORIZED, "unauthorized", (("WWW-Authenticate", "Bearer"),))
_DRAINING = Refused(503, Refusal.DRAINING, "draining", _RETRY)
_FULL = Refused(503, Refusal.CONNECTION_LIMIT, "connection limit reached", _RETRY)
_SOCKET_SHARE = Refused(503, Refusal.SOCKET_SHARE, "this socket opened its share of connections; reconnect", (), True)
_PRINCIPAL = Refused(503, Refusal.PRINCIPAL_LIMIT, "too many connections for this client", _RETRY)


class Admission:
    """The admission rules of one host, and the counts of what they refused."""

    def __init__(self, config: HostConfig, registry: PeerRegistry) -> None:
        self.limits = config.limits
        self.registry = registry
        self.allowed_origins: set[str] = set(config.allowed_origins)  # grows by the console's own origin
        self.hook = with_client(config.authorize) if config.authorize is not None else None
        self.draining = False
        self.refused: dict[int, int] = {}  # by status, the front's and the channel's refusals included
        self.refused_per_principal = 0

    def check(self, head: Head) -> Admitted | Refused:
        """The head's credentials: one Authorization (400), Origin (403), a readable offer (400), the hook (401)."""
        if duplicate_header(head.pairs, "Authorization"):  # which one counts would differ by reader
            return Refused(400, Refusal.DUPLICATE_AUTHORIZATION, "more than one Authorization header")
        if head.preflight:
            return Admitted()  # answered before auth: a preflight carries no credentials
        if not cors.origin_allowed(self.allowed_origins, head.headers.get("Origin")):
            return _ORIGIN
        offer: subprotocol.Offer | None = None
        auth_headers = head.headers
        if head.protocols is not None:
            try:  # the ACP subprotocol to select, and a token offered as one (hosting/subprotocol.py)
                offer = subprotocol.read_offer(head.protocols)
                auth_headers = subprotocol.hook_headers(head.headers, offer)
            except subprotocol.OfferError as exc:
                return Refused(400, Refusal.OFFER, str(exc))
        principal: str | None = None
        if self.hook is not None:
            principal = self.principal(auth_headers, head.client)
            if principal is None:
                return _UNAUTHORIZED
        return Admitted(principal, offer)

    def room(self, principal: str | None, client: str, socket_full: bool = False) -> str | Refused | None:
        """Room for one more connection: the drain, the connection limit, ``socket_full``, the per-principal limit.

        Returns the connection's admission key (see ``admission_key``), or the refusal.
        """
        if self.draining:
            return _DRAINING
        if len(self.registry) >= self.limits.max_connections:
            return _FULL
        if socket_full:
            return _SOCKET_SHARE
        key = admission_key(principal, client)
        if self.over_principal_cap(key):
            return _PRINCIPAL
        return key

    def principal(self, headers: Mapping[str, str], client: str = "") -> str | None:
        """Who the auth hook accepted (None: refused).

        A string from the hook names the principal; ``True`` makes the
        credential itself the principal (a digest of ``Authorization``), so
        every holder of one bearer token is one principal.
        """
        assert self.hook is not None
        try:
            verdict = self.hook(headers, client)
        except Exception:
            log.exception("the authorize hook failed; refusing the request")
            return None
        if isinstance(verdict, str):
            return f"hook:{verdict}" if verdict else None
        if not verdict:
            return None
        credential = headers.get("Authorization", "").encode()
        return "authorization:" + hashlib.sha256(credential).hexdigest()

    def over_principal_cap(self, key: str | None) -> bool:
        """Does ``key`` already hold ``max_connections_per_principal`` live connections? (Counted when so.)"""
        if key is None or self.registry.live(key) < self.limits.max_connections_per_principal:
            return False
        self.refused_per_principal += 1
        log.debug("refusing a connection: this %s holds %d already", key.partition(":")[0], self.registry.live(key))
        return True

    def count_refused(self, status: int) -> None:
        code = int(status)
        self.refused[code] = self.refused.get(code, 0) + 1


def admission_key(principal: str | None, client: str) -> str | None:
    """Whose connection this is, for ``max_connections_per_principal``: None (not capped) on a unix socket."""
    if principal is not None:
        return principal
    return f"address:{client}" if client else None
