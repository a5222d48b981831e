"""The opt-in access log (``--access-log text|json``): one line per HTTP request and per WebSocket connection.

A line names the method, path, status, duration, the principal the auth hook
accepted (or ``-``) and the connection id shortened to 8 characters; a
WebSocket connection is logged when it ends (status 101, its close code) or
when its upgrade is refused, and a request the HTTP channel refuses before its
head is read (400, 408, 431) with ``-`` for the method and path. The lines go to the ``acp_fast.access`` logger,
which has a stderr handler of its own at INFO (the access log is asked for, so
it shows whatever ``--log-level`` says), and does not propagate.

Hooks into the host are wrappers around one request's ``respond`` and
``start_stream``: the HTTP channel itself is not touched.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

Who = tuple[str | None, str | None]  # (principal, connection id)

#: The logger the lines go to.
LOGGER = "acp_fast.access"
#: Characters of a connection id (or principal) written.
SHORT = 8


def _short(value: str | None) -> str:
    if not value:
        return "-"
    kind, sep, rest = value.partition(":")  # "hook:NAME", "authorization:DIGEST"
    return f"{kind}:{rest[:SHORT]}" if sep else value[:SHORT]


class AccessLog:
    """Formats and writes the access lines; ``fmt`` is ``text`` or ``json``."""

    def __init__(self, fmt: str, stream: Any = None) -> None:
        if fmt not in ("text", "json"):
            raise ValueError(f"--access-log: expected text or json, got {fmt!r}")
        self.json = fmt == "json"
        self.log = logging.getLogger(LOGGER)
        if not self.log.handlers:
            handler = logging.StreamHandler(stream or sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            self.log.addHandler(handler)
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self._ws: dict[Any, tuple[float, str | None, str]] = {}  # open WebSocket connections: start, principal, client

    def line(
        self,
        method: str,
        path: str,
        status: int,
        seconds: float,
        principal: str | None,
        connection: str | None,
        remote: str = "-",
        extra: dict[str, int | str] | None = None,
    ) -> None:
        extra = extra or {}
        if self.json:
            record: dict[str, Any] = {
                "ts": round(time.time(), 3),
                "remote": remote,
                "method": method,
                "path": path,
                "status": status,
                "duration_s": round(seconds, 6),
                "principal": _short(principal),
                "connection": _short(connection),
            }
            record.update(extra)
            self.log.info(json.dumps(record))
            return
        tail = "".join(f" {k}={v}" for k, v in extra.items())
        self.log.info(
            '%s "%s %s" %d %.6fs principal=%s conn=%s%s',
            remote, method, path, status, seconds, _short(principal), _short(connection), tail,
        )  # fmt: skip

    # -- HTTP ---------------------------------------------------------------------------------------
    def http(self, channel: Any, method: bytes, target: bytes, who: Callable[[], Who]) -> None:
        """Log this request when it is answered (``respond``) or becomes an event stream (``start_stream``).

        ``who`` gives (principal, connection id) once the answer is known: the
        host knows them only after it routed the request.
        """
        start = time.perf_counter()
        respond, start_stream = channel.respond, channel.start_stream
        remote = channel.client or "-"  # the client's address, as a trusted proxy names it (hosting/forwarded.py)
        path = target.split(b"?", 1)[0].decode("latin-1")

        def done(status: int, headers: Any = ()) -> None:
            del channel.respond, channel.start_stream  # back to the class's methods for the next request
            principal, connection = who()
            if connection is None:  # an initialize POST: the id is in the answer's headers
                connection = next((v for k, v in headers if k == "Acp-Connection-Id"), None)
            seconds = time.perf_counter() - start
            self.line(method.decode("latin-1"), path, status, seconds, principal, connection, remote)

        def logged_respond(status: int, body: bytes = b"", headers: Any = (), **kwargs: Any) -> None:
            done(int(status), headers)
            respond(status, body, headers, **kwargs)

        def logged_stream(*args: Any, **kwargs: Any) -> None:
            done(200)
            start_stream(*args, **kwargs)

        channel.respond = logged_respond
        channel.start_stream = logged_stream

    def http_refused(self, channel: Any, status: int) -> None:
        """A refusal the HTTP channel answered itself: logged here unless its request's head was (``http``).

        A head that could not be read (400, 431, or a 408 before it was
        complete) names no method or path: the line says ``-`` for both.
        """
        if "respond" in vars(channel):  # ``http`` wrapped it: the refusal's respond writes the line
            return
        self.line("-", "-", status, 0.0, None, None, channel.client or "-")

    # -- WebSocket ----------------------------------------------------------------------------------
    def ws_started(self, peer: Any, principal: str | None, remote: str = "") -> None:
        self._ws[peer] = (time.perf_counter(), principal, remote or "-")

    def ws_ended(self, peer: Any, path: str) -> None:
        started = self._ws.pop(peer, None)
        if started is None:
            return
        out = getattr(peer, "out", None)
        code = getattr(out, "close_code", None)
        extra: dict[str, int | str] = {"close": int(code)} if code is not None else {}
        seconds = time.perf_counter() - started[0]
        self.line("GET", path, 101, seconds, started[1], peer.connection_id, started[2], extra)

    def ws_refused(self, path: str, status: int, remote: str = "") -> None:
        self.line("GET", path, status, 0.0, None, None, remote or "-")


__all__ = ["LOGGER", "AccessLog"]
