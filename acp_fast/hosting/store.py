"""Where parked sessions wait when another process must be able to re-attach them.

``--session-store`` picks the backend:

* ``memory`` (the default for one process): the parked session stays a live
  object in this process (hosting/detached.py); nothing is serialized.
* ``sqlite:PATH``: one SQLite file (stdlib ``sqlite3``, WAL) that every worker
  of one host opens; ``--workers N`` uses one in a temporary directory unless
  told otherwise, so whichever worker the kernel picks can re-attach.
* ``redis://HOST:PORT/DB`` (the ``store`` extra): shared by replicas on many
  machines; each entry is one key expiring with the parking timeout.

A shared backend stores bytes (hosting/detached.py encodes them) under the
session id with the owning principal beside them. ``take`` is atomic: of two
connections re-attaching one session at once, in one process or two, exactly
one gets it. An entry parked by another principal is reported as such
(:class:`WrongOwner`), never handed out.
"""

from __future__ import annotations

import abc
import asyncio
import importlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from ..extras import require

if TYPE_CHECKING:  # imported on first use: a host on the memory store never loads sqlite3
    import sqlite3

log = logging.getLogger(__name__)

#: The spec strings ``--session-store`` accepts, for messages.
SPEC_FORMS = "memory, sqlite:PATH or redis://HOST:PORT/DB"


class WrongOwner(Exception):
    """The session is parked, under another principal."""


class SessionStore(abc.ABC):
    """A shared home for parked sessions: put with a time to live, take at most once."""

    #: How the store is named in logs and counts (the spec without credentials).
    name: str = ""

    @abc.abstractmethod
    async def put(self, session_id: str, principal: str | None, entry: bytes, ttl_s: float) -> None:
        """Keep ``entry`` for ``ttl_s`` seconds, replacing one parked under the same id."""

    @abc.abstractmethod
    async def take(self, session_id: str, principal: str | None) -> tuple[bytes, float] | None:
        """Remove and return (entry, seconds it had left); None if none is parked (or it expired).

        Raises :class:`WrongOwner` (and leaves the entry) when another principal parked it.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; later calls fail (and are logged by the caller)."""


def parse_spec(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` for a ``--session-store`` value; ValueError names the accepted forms."""
    if spec == "memory":
        return "memory", ""
    if spec.startswith("sqlite:"):
        path = spec[len("sqlite:") :]
        if not path:
            raise ValueError(f"sqlite: needs a file path (accepted: {SPEC_FORMS})")
        return "sqlite", path
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return "redis", spec
    raise ValueError(f"unknown session store {spec!r} (accepted: {SPEC_FORMS})")


def check_spec(spec: str) -> None:
    """Refuse a bad spec, or a Redis one without the ``store`` extra, before any process starts."""
    kind, _ = parse_spec(spec)
    if kind == "redis":
        require("store", "--session-store redis://")


def open_store(spec: str | None, timeout_s: float) -> SessionStore | None:
    """The backend for ``spec``; None means the in-process (memory) store. Connects lazily."""
    if spec is None:
        return None
    kind, arg = parse_spec(spec)
    if kind == "sqlite":
        return SqliteStore(arg, timeout_s)
    if kind == "redis":
        return RedisStore(arg, timeout_s)
    return None


_NO_PRINCIPAL = ""  # principals are never empty ("hook:NAME" or "authorization:DIGEST")


#: Parks between two WAL checkpoints of one process. The checkpoint is the one
#: step that waits for the disk (fsync), so it runs in a thread, never on the
#: loop; 128 parks of 10 KiB keep the WAL near 4 MiB, SQLite's own default.
SQLITE_CHECKPOINT_EVERY = 128


class SqliteStore(SessionStore):
    """One SQLite file in WAL mode; each statement is one short transaction, run on the loop.

    The statements are a keyed insert and a keyed ``DELETE ... RETURNING``
    (benchmarks/session_store.py times them), cheaper than a hop to a
    thread. ``synchronous=NORMAL``: a commit only
    appends to the WAL (no fsync); a parked session is a convenience, not a
    ledger, so a power cut may lose the last few parks while the file stays
    consistent. The fsync of the checkpoint runs in a thread every
    ``SQLITE_CHECKPOINT_EVERY`` parks. The connection opens on first use, in
    the process that uses it (workers fork before that).
    """

    def __init__(self, path: str, timeout_s: float) -> None:
        self.path = path
        self.name = f"sqlite:{path}"
        self.timeout_s = timeout_s
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._closed = False
        self._puts = 0
        self._checkpoint: asyncio.Future[None] | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the session store is closed")
        db = self._db
        if db is None or self._pid != os.getpid():
            db = self._db = connect_sqlite(self.path, self.timeout_s)
            self._pid = os.getpid()
        return db

    async def put(self, session_id: str, principal: str | None, entry: bytes, ttl_s: float) -> None:
        now = time.time()
        db = self._conn()
        db.execute("DELETE FROM parked WHERE deadline <= ?", (now,))  # bounded: expired rows only
        db.execute(
            "INSERT OR REPLACE INTO parked (id, principal, deadline, entry) VALUES (?, ?, ?, ?)",
            (session_id, principal or _NO_PRINCIPAL, now + ttl_s, entry),
        )
        self._puts += 1
        if self._puts >= SQLITE_CHECKPOINT_EVERY and self._checkpoint is None:
            self._puts = 0
            self._checkpoint = asyncio.get_running_loop().run_in_executor(None, self._checkpoint_now)
            self._checkpoint.add_done_callback(self._checkpoint_done)

    def _checkpoint_now(self) -> None:
        db = connect_sqlite(self.path, self.timeout_s)  # a connection of the thread's own
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            db.close()

    def _checkpoint_done(self, future: asyncio.Future[None]) -> None:
        self._checkpoint = None
        if not future.cancelled() and future.exception() is not None:
            log.warning("session store %s: WAL checkpoint failed: %r", self.name, future.exception())

    async def take(self, session_id: str, principal: str | None) -> tuple[bytes, float] | None:
        now = time.time()
        db = self._conn()
        row = db.execute(
            "DELETE FROM parked WHERE id = ? AND principal = ? AND deadline > ? RETURNING entry, deadline",
            (session_id, principal or _NO_PRINCIPAL, now),
        ).fetchone()
        if row is not None:
            return bytes(row[0]), float(row[1]) - now
        if db.execute("SELECT 1 FROM parked WHERE id = ? AND deadline > ?", (session_id, now)).fetchone():
            raise WrongOwner(session_id)
        return None

    async def close(self) -> None:
        self._closed = True
        if self._checkpoint is not None:
            await asyncio.wait({self._checkpoint}, timeout=self.timeout_s)
        if self._db is not None and self._pid == os.getpid():
            self._db.close()
        self._db = None


def connect_sqlite(path: str, timeout_s: float) -> sqlite3.Connection:
    """Open (creating if needed) the parking file: WAL, autocommit, its one table."""
    import sqlite3

    db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA wal_autocheckpoint=0")  # SqliteStore checkpoints in a thread
    db.execute(
        "CREATE TABLE IF NOT EXISTS parked ("
        "id TEXT PRIMARY KEY, principal TEXT NOT NULL, deadline REAL NOT NULL, entry BLOB NOT NULL)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS parked_deadline ON parked (deadline)")
    return db


# Both scripts run atomically in Redis: a put is never half-written, a take has one winner.
_PUT = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'p', ARGV[1], 'e', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
_TAKE = """
local p = redis.call('HGET', KEYS[1], 'p')
if not p then return false end
if p ~= ARGV[1] then return {0} end
local e = redis.call('HGET', KEYS[1], 'e')
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return {1, e, ttl}
"""

#: Every key this runtime writes starts so, to share a database with other users.
REDIS_PREFIX = "acp_fast:parked:"


class RedisStore(SessionStore):
    """One hash per parked session (principal, entry), expiring with the parking timeout."""

    def __init__(self, url: str, timeout_s: float) -> None:
        require("store", "--session-store redis://")
        aioredis: Any = importlib.import_module("redis.asyncio")
        self.name = url.split("@")[-1] if "@" in url else url  # no password in logs
        self.timeout_s = timeout_s
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._put: Any = self._client.register_script(_PUT)
        self._take: Any = self._client.register_script(_TAKE)

    async def put(self, session_id: str, principal: str | None, entry: bytes, ttl_s: float) -> None:
        ttl_ms = max(1, int(ttl_s * 1000))
        await self._put(keys=[REDIS_PREFIX + session_id], args=[principal or _NO_PRINCIPAL, entry, ttl_ms])

    async def take(self, session_id: str, principal: str | None) -> tuple[bytes, float] | None:
        got = await self._take(keys=[REDIS_PREFIX + session_id], args=[principal or _NO_PRINCIPAL])
        if got is None:
            return None
        if got[0] == 0:
            raise WrongOwner(session_id)
        return bytes(got[1]), max(0.0, int(got[2]) / 1000)

    async def close(self) -> None:
        await self._client.aclose()


__all__ = [
    "SPEC_FORMS",
    "RedisStore",
    "SessionStore",
    "SqliteStore",
    "WrongOwner",
    "check_spec",
    "connect_sqlite",
    "open_store",
    "parse_spec",
]
