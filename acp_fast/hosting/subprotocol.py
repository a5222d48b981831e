"""A bearer token a browser can send on a WebSocket: the ``acp.bearer.<base64url>`` subprotocol.

The browser's ``WebSocket`` API cannot set ``Authorization``; it can offer
subprotocols. A client offers two: ``acp`` and ``acp.bearer.`` followed by
its token in unpadded base64url (RFC 4648 §5; the precedent is Kubernetes'
``base64url.bearer.authorization.k8s.io.<token>``)::

    new WebSocket(url, ["acp", "acp.bearer." + base64url(token)])

The host decodes the token and gives the auth hook the request's headers
with ``Authorization: Bearer <token>`` in place of the offer (and the
bearer entry taken out of ``Sec-WebSocket-Protocol``), so a hook, and the
principal a token stands for, are the same whichever way the token came.
The ``101`` selects ``acp``: the secret entry is never echoed, and a refusal
names the rule broken, never the value. An offer that cannot be read is
refused ``400``: a bearer entry without ``acp`` (a browser fails a
connection whose answer selects none of its offers), two bearer entries,
one that is not base64url of UTF-8 text, or a bearer entry beside an
``Authorization`` header (which credential would count?).

Pure functions over header values.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

PROTOCOL_HEADER = "Sec-WebSocket-Protocol"
#: The subprotocol a client offers (alone, or beside its bearer entry) and the host selects.
SUBPROTOCOL = "acp"
BEARER_PREFIX = "acp.bearer."

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class OfferError(ValueError):
    """The offered subprotocols cannot be read (answered 400); the message never holds the token."""


@dataclass(frozen=True, slots=True)
class Offer:
    """What a client offered: ``acp`` (select it in the 101) and the token it carries, if any."""

    acp: bool = False
    token: str | None = None


def bearer_entry(token: str) -> str:
    """The subprotocol that carries ``token`` (what a client offers beside ``acp``)."""
    return BEARER_PREFIX + base64.urlsafe_b64encode(token.encode()).rstrip(b"=").decode("ascii")


def read_offer(values: Iterable[str]) -> Offer:
    """The ``Sec-WebSocket-Protocol`` header values of an upgrade request, read; OfferError when malformed."""
    acp = False
    token: str | None = None
    for value in values:
        for item in value.split(","):
            name = item.strip()
            if name == SUBPROTOCOL:
                acp = True
            elif name.startswith(BEARER_PREFIX):
                if token is not None:
                    raise OfferError("more than one acp.bearer subprotocol offered")
                token = _decode(name[len(BEARER_PREFIX) :])
    if token is not None and not acp:
        raise OfferError("an acp.bearer subprotocol must be offered beside the subprotocol acp")
    return Offer(acp, token)


def _decode(text: str) -> str:
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise OfferError("the acp.bearer subprotocol does not hold unpadded base64url")
    try:
        token = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise OfferError("the acp.bearer subprotocol does not hold base64url of UTF-8 text") from None
    if not token or _CONTROL.search(token):
        raise OfferError("the token in the acp.bearer subprotocol is empty or holds control characters")
    return token


class AuthHeaders(Mapping[str, str]):
    """An upgrade request's headers as the auth hook sees them when the token came as a subprotocol.

    Case-insensitive (the last value of a repeated name, as for HTTP requests);
    ``Authorization`` is ``Bearer <token>`` and ``Sec-WebSocket-Protocol``
    lists only what is not secret.
    """

    __slots__ = ("_items",)

    def __init__(self, headers: Iterable[tuple[str, str]], offer: Offer) -> None:
        items = {name.lower(): value for name, value in headers}
        items["authorization"] = f"Bearer {offer.token}"
        items[PROTOCOL_HEADER.lower()] = SUBPROTOCOL
        self._items = items

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"AuthHeaders({sorted(self._items)!r})"  # names only: the values hold the token


def hook_headers(headers: Mapping[str, str], offer: Offer) -> Mapping[str, str]:
    """What the auth hook is given: the request's own headers, or ``AuthHeaders`` for a subprotocol token."""
    if offer.token is None:
        return headers
    if headers.get("Authorization") is not None:
        raise OfferError("a token in the acp.bearer subprotocol and an Authorization header: send one")
    return AuthHeaders(headers.items(), offer)
