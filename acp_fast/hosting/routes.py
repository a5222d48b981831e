"""The host's answers besides ``/acp``: ``/healthz``, ``/readyz``, ``/metrics`` and the web console.

``/healthz`` is 200 while the process runs; ``/readyz`` 200 while it accepts
connections and 503 once it drains. Both are answered on any request, an
upgrade included. ``/metrics`` (with ``metrics``) applies the auth hook as
``/acp`` does: a scrape config sends the bearer token (docs/OBSERVABILITY.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .admission import Admission
from .http import HttpChannel
from .request import Request, headers_map
from .web_console import WebConsole

if TYPE_CHECKING:
    from ..observability.metrics import Metrics
    from ..wire.limits import Limits

_OK = (200, b"ok\n")
_READY = (200, b"ready\n")
_DRAINING = (503, b"draining\n")


class Routes:
    """Answers the paths that are not ``/acp``."""

    def __init__(
        self, admission: Admission, limits: Limits, web_console: WebConsole | None, metrics_here: bool
    ) -> None:
        self.admission = admission
        self.limits = limits
        self.web_console = web_console
        self.metrics_here = metrics_here  # GET /metrics on the hosting port
        self.metrics: Metrics | None = None

    def health(self, path: bytes) -> tuple[int, bytes] | None:
        """The answer to a health probe (status, body), or None when ``path`` is not one."""
        if path == b"/healthz":
            return _OK
        if path == b"/readyz":
            return _DRAINING if self.admission.draining else _READY
        return None

    def answer(self, channel: HttpChannel, request: Request) -> None:
        """An HTTP request to any path but ``/acp``."""
        path = request.path
        probe = self.health(path)
        if probe is not None:
            channel.respond(probe[0], probe[1], close=True)
        elif path == b"/metrics" and self.metrics is not None and self.metrics_here:
            admission = self.admission
            if admission.hook is not None and admission.principal(headers_map(request), channel.client) is None:
                admission.count_refused(401)
                channel.respond(401, b"unauthorized\n", [("WWW-Authenticate", "Bearer")])
                return
            self.metrics.answer_http(channel, self.limits)
        elif self.web_console is not None and self.web_console.serves(path):
            status, page, headers, kind = self.web_console.answer(request.method, request.target, headers_map(request))
            channel.respond(status, page, headers, content_type=kind)
        else:
            channel.respond(404, b"404 Not Found", close=True)
