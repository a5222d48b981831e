"""Ready-made auth hooks for ``AcpHost(authorize=...)``, and the header rule both profiles apply first.

A hook sees the request's headers and answers accept or refuse (401) before
any ACP traffic (on the Streamable HTTP profile: on each request's head, before
its body is read). A request carrying two ``Authorization`` headers is refused
400 before the hook runs, on both profiles, so no two readers can disagree on
which one counts.

``Acp-Connection-Id`` is not a credential the hook sees, but on the Streamable
HTTP profile it is a capability: it is honoured only for the principal that
opened the connection, and without an auth hook (every client the same
anonymous principal) whoever holds it may use the connection. It is 128
random bits and never logged in full (docs/HOSTING.md, Security).
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .config import Authorize

Verdict = bool | str


def bearer_token(token: str) -> Authorize:
    """Accept requests carrying ``Authorization: Bearer <token>``, compared in constant time."""
    if not token:
        raise ValueError("an empty bearer token would accept everyone")
    expected = f"Bearer {token}".encode()

    def authorize(headers: Mapping[str, str]) -> bool:
        return hmac.compare_digest(headers.get("Authorization", "").encode(), expected)

    return authorize


def duplicate_header(pairs: Iterable[tuple[str, str]], name: str) -> bool:
    """Does header ``name`` (case-insensitive) occur more than once in ``pairs``?

    Two ``Authorization`` headers are refused with 400 before any hook sees
    them: one reader takes the first, another the last, and a proxy may have
    checked a different one than the server would use.
    """
    wanted = name.lower()
    seen = False
    for key, _ in pairs:
        if key.lower() == wanted:
            if seen:
                return True
            seen = True
    return False


def with_client(authorize: Authorize) -> Callable[[Mapping[str, str], str], Verdict]:
    """The hook as the host calls it: headers and the client's address (hosting/forwarded.py).

    A hook declaring a second positional parameter is given the address (''
    on a unix socket); one taking only the headers keeps being called so.
    """
    try:
        params = inspect.signature(authorize).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called the original way
        params = None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if params is not None and sum(1 for p in params if p.kind in kinds) >= 2:
        return cast(Callable[[Mapping[str, str], str], Verdict], authorize)
    headers_only = cast(Callable[[Mapping[str, str]], Verdict], authorize)
    return lambda headers, client: headers_only(headers)
