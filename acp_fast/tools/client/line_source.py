"""Lines typed to ``acp-fast client``, read off the event loop."""

from __future__ import annotations

import asyncio
import os
import threading


class LineSource:
    """Lines from stdin, read by a daemon thread so the loop never blocks (and any stdin works)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._started = False
        self.eof = False

    def _read(self) -> None:
        # os.read, not sys.stdin: a thread blocked inside the buffered reader holds its lock, and
        # the interpreter's exit would then abort on it.
        pending = b""
        while True:
            try:
                chunk = os.read(0, 65536)
            except OSError:
                chunk = b""
            try:
                if not chunk:
                    if pending:
                        self._put(pending)
                    self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._put(line)
            except RuntimeError:  # the console ended (its loop is closed) while we read
                return

    def _put(self, raw: bytes) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, raw.decode("utf-8", "replace").rstrip("\r"))

    async def get(self) -> str | None:
        """The next line, or None at end of input."""
        if self.eof:
            return None
        if not self._started:
            self._started = True
            threading.Thread(target=self._read, name="acp-fast-client-stdin", daemon=True).start()
        line = await self._queue.get()
        if line is None:
            self.eof = True
        return line


__all__ = ["LineSource"]
