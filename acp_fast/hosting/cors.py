"""Which browser origins may use ``/acp``, and the CORS headers that tell the browser so (Fetch standard).

One notion of allowed origins serves every path into ``/acp``: the WebSocket
upgrade and each Streamable HTTP request are refused ``403`` when they carry
an ``Origin`` that is not allowed (a request without ``Origin`` is no
browser's cross-origin request and passes to the auth hook). The same set
decides the CORS answers:

- a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``)
  is answered before auth, since a browser never sends credentials on one:
  ``204`` with ``Access-Control-Allow-Origin`` (the origin itself),
  ``-Allow-Methods``, ``-Allow-Headers``, ``-Max-Age`` and ``Vary: Origin``
  for an allowed origin; ``403`` without any CORS header for another;
- every other answer to an allowed origin carries
  ``Access-Control-Allow-Origin`` and ``Access-Control-Expose-Headers``
  (``Acp-Connection-Id`` first: a page must read it to go on).

``*`` allows every origin and is refused when an auth hook is set: the token
then is the only thing between any web page and the agent, and pages the
operator never named would be told they may send it.
``Access-Control-Allow-Credentials`` is never sent: a client passes its
token in ``Authorization`` (explicit, not ambient), so no cookie or HTTP auth
crosses origins, and ``Access-Control-Allow-Origin`` names the one origin
asking, never ``*``.

Pure functions: request headers in, status and response headers out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

ANY_ORIGIN = "*"
#: The methods of the Streamable HTTP profile.
ALLOW_METHODS = "GET, POST, DELETE"
#: Every request header a client of the profile sets (the non-safelisted ones need naming).
ALLOW_HEADERS = "authorization, content-type, accept, acp-connection-id, acp-session-id, last-event-id"
#: Response headers a page must read beyond the safelisted ones: the connection id after
#: ``initialize``, the session a stream belongs to, when to retry a 503, which auth a 401 wants.
EXPOSE_HEADERS = "Acp-Connection-Id, Acp-Session-Id, Retry-After, WWW-Authenticate"

# scheme "://" host [":" port], as a browser serializes an origin (lower case, no path, no trailing slash).
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://(?:\[[0-9a-f:.]+\]|[a-z0-9._~%!$&'()*+,;=-]+)(?::[0-9]{1,5})?")

Headers = list[tuple[str, str]]


def check_origins(origins: Iterable[str], *, auth: bool) -> frozenset[str]:
    """The allowed origins, in the form a browser sends them; ValueError naming the bad one.

    ``*`` only without auth; ``null`` (sandboxed frames, ``file:`` pages) never:
    every such page sends the same value, so allowing it allows them all.
    """
    allowed: set[str] = set()
    for raw in origins:
        origin = raw.strip()
        if origin == ANY_ORIGIN:
            if auth:
                raise ValueError(
                    "'*' (every origin) cannot be combined with an auth hook (--auth-token-env): "
                    "name the origins of the pages that may send the token"
                )
            allowed.add(ANY_ORIGIN)
            continue
        if origin.lower() == "null":
            raise ValueError("'null' is the origin of every sandboxed or file: page; allowing it allows them all")
        normal = origin.rstrip("/").lower()
        if not _ORIGIN.fullmatch(normal):
            raise ValueError(f"{raw!r} is not an origin: expected SCHEME://HOST[:PORT], e.g. https://app.example")
        allowed.add(normal)
    return frozenset(allowed)


def origin_allowed(allowed: Collection[str], origin: str | None) -> bool:
    """May a request carrying this ``Origin`` header (None: none) go on? (403 otherwise.)"""
    return origin is None or origin in allowed or ANY_ORIGIN in allowed


def is_preflight(method: bytes, headers: Mapping[str, str]) -> bool:
    """A CORS preflight: ``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``."""
    return (
        method == b"OPTIONS"
        and headers.get("Origin") is not None
        and headers.get("Access-Control-Request-Method") is not None
    )


def preflight(allowed: Collection[str], headers: Mapping[str, str], max_age_s: int) -> tuple[int, Headers]:
    """The answer to a preflight: 204 with the CORS headers, or 403 with none for an origin not allowed.

    What the page asked for is not judged here: the lists name what this
    endpoint takes, and the browser refuses a request outside them (Fetch, the
    CORS-preflight fetch), so one cached answer serves every later request.
    """
    origin = headers.get("Origin")
    if origin is None or not origin_allowed(allowed, origin):
        return 403, []
    return 204, [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Allow-Methods", ALLOW_METHODS),
        ("Access-Control-Allow-Headers", ALLOW_HEADERS),
        ("Access-Control-Max-Age", str(max_age_s)),
        ("Vary", "Origin"),
    ]


def response_headers(allowed: Collection[str], headers: Mapping[str, str]) -> Headers:
    """The CORS headers of an answer to an actual (non-preflight) request: none without an allowed ``Origin``."""
    origin = headers.get("Origin")
    if origin is None or not origin_allowed(allowed, origin):
        return []
    return [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Expose-Headers", EXPOSE_HEADERS),
        ("Vary", "Origin"),
    ]
