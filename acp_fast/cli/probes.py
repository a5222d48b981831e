"""The start-up rule's outside half: what must answer before serving, tried once in the parent.

A port in use, a host that does not resolve, a session store that cannot be
opened: each is found here, before the host starts (and before ``--workers``
forks), and reported in one line, instead of as a traceback, a worker
restarted for ever, or a first session lost when it parks. A probe binds and
closes at once; the host binds again a moment later (a port taken in between
is still refused: by the host, or by the worker supervisor).
"""

from __future__ import annotations

import errno
import os
import socket
import urllib.parse
from typing import Any

from .checks import StartupMistake, one_line


def check_binds(option: str, text: str) -> None:
    """``HOST:PORT`` (as ``ListenAddress`` reads it) resolves and can be bound now."""
    name, _, port_text = text.rpartition(":")
    host = name.strip("[]") or None
    port = int(port_text)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupMistake(f"{option} {text}: the host {host} does not resolve ({exc.strerror}); "
                             "give an address or a name this machine resolves") from None
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the host binds
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                in_use = exc.errno == errno.EADDRINUSE
                hint = "stop what holds it or choose another port" if in_use else "choose another address"
                raise StartupMistake(f"{option} {text}: cannot bind {sockaddr[0]} port {port}: "
                                     f"{exc.strerror}; {hint}") from None


def check_unix_bind(option: str, path: str) -> None:
    """A unix socket can be made at ``path`` now (one already there is the host's to replace or refuse)."""
    if os.path.lexists(path):
        return
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.bind(path)
        except OSError as exc:
            raise StartupMistake(f"{option} unix:{path}: cannot make a socket there: {exc.strerror}; "
                                 "choose a directory this user may write") from None
    os.unlink(path)


def check_store(spec: str, timeout_s: float) -> None:
    """The ``--session-store`` answers: the SQLite file opens, the Redis server replies to PING."""
    from ..hosting.store import connect_sqlite, parse_spec

    kind, arg = parse_spec(spec)
    if kind == "sqlite":
        import sqlite3

        try:
            connect_sqlite(arg, timeout_s).close()
        except (sqlite3.Error, OSError) as exc:
            raise StartupMistake(f"--session-store {spec}: cannot open {arg}: {one_line(exc)}; "
                                 "give a file in a directory that exists and is writable") from None
    elif kind == "redis":
        _ping_redis(spec, timeout_s)


def _ping_redis(url: str, timeout_s: float) -> None:
    import importlib

    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError as exc:
        raise StartupMistake(f"--session-store {_redacted(url)}: {one_line(exc)}; expected redis://HOST:PORT/DB") \
            from None
    redis: Any = importlib.import_module("redis")
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        raise StartupMistake(f"--session-store {_redacted(url)}: no answer from the Redis server "
                             f"({one_line(exc)}); start it or fix the address") from None


def _redacted(url: str) -> str:
    """``url`` without a password, for a message."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))


__all__ = ["check_binds", "check_store", "check_unix_bind"]
