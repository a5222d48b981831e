"""The ``Sec-WebSocket-Protocol`` offer of an upgrade: the ACP subprotocol to select and a browser's token.

The browser's ``WebSocket`` API cannot set ``Authorization``; it can offer
subprotocols. Browser ACP clients name the protocol ``acp`` or ``acp.v1``
and carry a token in one of two forms::

    new WebSocket(url, ["acp", "acp.bearer." + base64url(token)])  // any token, encoded
    new WebSocket(url, ["acp.v1", "bearer." + token])               // a token that is a subprotocol name

``acp.bearer.`` is followed by the token's UTF-8 in unpadded base64url
(RFC 4648 §5; the precedent is Kubernetes'
``base64url.bearer.authorization.k8s.io.<token>``); ``bearer.`` by the token
itself, which must then be an RFC 7230 token (letters, digits and
``!#$%&'*+-.^_`|~``: what a browser lets through as a subprotocol name; no
``/``, no ``=``).

The host selects the first ACP name offered, in the client's order (RFC
6455: the server picks one of the client's), never the bearer entry, whose
secret is never echoed. It gives the auth hook the request's headers with
``Authorization: Bearer <token>`` in place of the offer (and only the
selected name in ``Sec-WebSocket-Protocol``), so a hook, and the principal a
token stands for, are the same whichever way the token came. An offer that
cannot be read is refused ``400``, with a reason that names the rule broken,
never the value: a token without an ACP name beside it (a browser fails a
connection whose answer selects none of its offers, and the token must not be
selected), two tokens (in one form or in both), a token that does not decode,
or a token beside an ``Authorization`` header (which credential would count?).
An offer without a token and without an ACP name (or no header at all) is
answered as before: a ``101`` that selects nothing.

Pure functions over header values.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

PROTOCOL_HEADER = "Sec-WebSocket-Protocol"
#: The subprotocol this project's own clients offer (the web console).
SUBPROTOCOL = "acp"
#: Every name of ACP a client may offer; the host selects the first offered.
SUBPROTOCOLS = (SUBPROTOCOL, "acp.v1")
#: The token's UTF-8 in unpadded base64url follows: any token fits.
BEARER_PREFIX = "acp.bearer."
#: The token itself follows, as other browser ACP clients send it: it must be an RFC 7230 token.
RAW_BEARER_PREFIX = "bearer."

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_TCHARS = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")  # RFC 7230 tchar: what a subprotocol name is made of
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ACP_NAMES = " or ".join(SUBPROTOCOLS)


class OfferError(ValueError):
    """The offered subprotocols cannot be read (answered 400); the message never holds the token."""


@dataclass(frozen=True, slots=True)
class Offer:
    """What a client offered: the ACP subprotocol to select in the 101 (None: none) and its token, if any."""

    protocol: str | None = None
    token: str | None = None


def bearer_entry(token: str) -> str:
    """The subprotocol that carries any ``token`` (what a client offers beside ``acp``)."""
    return BEARER_PREFIX + base64.urlsafe_b64encode(token.encode()).rstrip(b"=").decode("ascii")


def read_offer(values: Iterable[str]) -> Offer:
    """The ``Sec-WebSocket-Protocol`` header values of an upgrade request, in order, read; OfferError when malformed.

    Repeated header lines are one list, in order (RFC 7230 §3.2.2); an empty
    item, or an ACP name offered twice, is harmless.
    """
    protocol: str | None = None
    token: str | None = None
    for value in values:
        for item in value.split(","):
            name = item.strip()
            if name in SUBPROTOCOLS:
                protocol = protocol or name
                continue
            if name.startswith(BEARER_PREFIX):
                found = _decode(name[len(BEARER_PREFIX) :])
            elif name.startswith(RAW_BEARER_PREFIX):
                found = _raw(name[len(RAW_BEARER_PREFIX) :])
            else:
                continue
            if token is not None:
                raise OfferError("more than one bearer subprotocol offered")
            token = found
    if token is not None and protocol is None:
        raise OfferError(f"a bearer subprotocol must be offered beside the subprotocol {_ACP_NAMES}")
    return Offer(protocol, token)


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


def _raw(text: str) -> str:
    if not _TCHARS.fullmatch(text):
        raise OfferError(
            "the token in the bearer subprotocol is empty or holds a character a subprotocol name may not"
            " (send such a token as acp.bearer.<base64url>)"
        )
    return text


class AuthHeaders(Mapping[str, str]):
    """An upgrade request's headers as the auth hook sees them when the token came as a subprotocol.

    Case-insensitive (the last value of a repeated name, as for HTTP requests);
    ``Authorization`` is ``Bearer <token>`` and ``Sec-WebSocket-Protocol``
    holds only the ACP name selected, nothing secret.
    """

    __slots__ = ("_items",)

    def __init__(self, headers: Iterable[tuple[str, str]], offer: Offer) -> None:
        items = {name.lower(): value for name, value in headers}
        items["authorization"] = f"Bearer {offer.token}"
        items[PROTOCOL_HEADER.lower()] = offer.protocol or ""
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
        raise OfferError("a token in a bearer subprotocol and an Authorization header: send one")
    return AuthHeaders(headers.items(), offer)
