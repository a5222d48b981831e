"""The web console (``--web-console``): one static page, served beside ``/acp`` by the same host.

The page (``console/index.html.in``, ``console.js``, ``console.css`` and an
icon, shipped as package data) is plain HTML and JavaScript with no build step and nothing
from another origin. It talks ACP to this host like any other client, over
WebSocket or Streamable HTTP, under the same Origin rule, auth hook and
limits; the host only serves its files.

Every answer carries ``Content-Security-Policy`` (scripts, styles and
connections from this origin only, no framing), ``X-Content-Type-Options:
nosniff`` and an ``ETag`` made of the package version and the file's digest;
the page names its assets with that tag as a query, so a browser never runs
the script of one release with the page of another.

Browsers send ``Origin`` on a WebSocket and on a ``POST``, so the console's
own origin must be allowed: on a TCP port the host adds the loopback origins
of that port (``http://127.0.0.1:PORT``, ``http://localhost:PORT``,
``http://[::1]:PORT``), which only a page served by this process can carry.
A console reached under any other name (or through a proxy) needs that origin
in ``--allow-origin``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from .._version import __version__

#: What a console request is answered with: status, body, headers, content type.
ConsoleAnswer = tuple[int, bytes, list[tuple[str, str]], str]

_PAGE = "index.html.in"
#: URL path -> (file under console/, content type).
_FILES: dict[bytes, tuple[str, str]] = {
    b"/": (_PAGE, "text/html; charset=utf-8"),
    b"/index.html": (_PAGE, "text/html; charset=utf-8"),
    b"/console.js": ("console.js", "text/javascript; charset=utf-8"),
    b"/console.css": ("console.css", "text/css; charset=utf-8"),
    b"/favicon.svg": ("icon.svg", "image/svg+xml"),
}
#: A Host header we are willing to repeat in the policy: a DNS name or a bracketed IPv6 literal, and a port.
_HOST = re.compile(r"(?:[a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9][a-z0-9-]{0,62})*|\[[0-9a-f:.]{2,45}\])(?::[0-9]{1,5})?")
_FIXED_POLICY = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    content_type: str
    etag: str


def _etag(body: bytes) -> str:
    return f'"{__version__}-{hashlib.sha256(body).hexdigest()[:16]}"'


def content_security_policy(host_header: str | None) -> str:
    """The page's policy: its own origin only; the WebSocket origins named too, when the Host header is sane.

    CSP Level 3 lets ``'self'`` match ``ws:``/``wss:`` on the page's own host
    and port (Chromium does); older engines need them spelled out, so a Host
    header that is a plain host[:port] is repeated, and anything else (which
    could smuggle a directive) is left out.
    """
    connect = "connect-src 'self'"
    host = (host_header or "").strip().lower()
    if _HOST.fullmatch(host):
        connect += f" ws://{host} wss://{host}"
    return f"{_FIXED_POLICY}; {connect}"


def loopback_origins(port: int) -> frozenset[str]:
    """The origins of a console page served on this port of the loopback interface."""
    return frozenset(f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))


class WebConsole:
    """The console's files, read once from the package; answers ``GET`` for them."""

    def __init__(self) -> None:
        folder = resources.files(__package__ or "acp_fast.hosting").joinpath("console")
        raw = {name: folder.joinpath(name).read_bytes() for name, _ in set(_FILES.values())}
        tags = {name: _etag(body) for name, body in raw.items() if name != _PAGE}
        asset_version = hashlib.sha256("".join(sorted(tags.values())).encode()).hexdigest()[:16]
        page = raw[_PAGE].replace(b"@VERSION@", __version__.encode())
        raw[_PAGE] = page.replace(b"@ASSET_VERSION@", f"{__version__}-{asset_version}".encode())
        self.asset_version = f"{__version__}-{asset_version}"
        self._assets = {
            path: _Asset(raw[name], content_type, _etag(raw[name])) for path, (name, content_type) in _FILES.items()
        }

    def serves(self, path: bytes) -> bool:
        return path in self._assets

    def answer(self, method: bytes, target: bytes, headers: Mapping[str, str]) -> ConsoleAnswer:
        """The answer to a request for one of the console's paths."""
        path, _, query = target.partition(b"?")
        asset = self._assets[path]
        common = [
            ("Content-Security-Policy", content_security_policy(headers.get("Host"))),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ]
        if method != b"GET":  # HEAD too: an answer to HEAD has no body, and the browser never sends one
            body = b"" if method == b"HEAD" else b"Method Not Allowed\n"
            return 405, body, [*common, ("Allow", "GET")], "text/plain"
        versioned = path not in (b"/", b"/index.html") and query == b"v=" + self.asset_version.encode()
        cache = "public, max-age=31536000, immutable" if versioned else "no-cache"
        common += [("ETag", asset.etag), ("Cache-Control", cache)]
        if asset.etag in (tag.strip() for tag in headers.get("If-None-Match", "").split(",")):
            return 304, b"", common, "text/plain"
        return 200, asset.body, common, asset.content_type
