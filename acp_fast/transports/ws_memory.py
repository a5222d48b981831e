"""What an idle WebSocket connection keeps: picows' read buffer and the upgrade's header maps.

Its own room because this is a footprint concern, not a protocol one: picows'
read buffer grows for a large message and never shrinks, so its unused pages
are given back ``ws_buffer_release_s`` after a large read
(``ReadBufferRelease``, ``release_pages``); and the header maps of the
upgrade are dropped once the connection is up (``forget_upgrade``). Neither
touches a message; the peer adapter (``ws.py``) only says when.
"""

from __future__ import annotations

import asyncio
import ctypes
import mmap
import sys
from collections.abc import Callable
from typing import cast

from multidict import CIMultiDict, CIMultiDictProxy
from picows import WSTransport

#: A frame (with what followed it in the same read) this large means picows grew its read buffer
#: past the initial ``ws_read_buffer_bytes``; the buffer never shrinks, so its pages are returned
#: ``ws_buffer_release_s`` later (``release_pages``). 64 KiB is uvloop's read size: below it a
#: read fits the buffer picows starts with after its first doublings.
BIG_READ = 64 * 1024
_MADV_DONTNEED = 4  # Linux: the pages are dropped; the next touch maps zeroed ones
#: What an upgrade's header maps are replaced with once the connection is up (see forget_upgrade).
_NO_HEADERS = CIMultiDictProxy(CIMultiDict[str]())


def _find_madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` on Linux (where MADV_DONTNEED frees at once), else None: nothing is released."""
    if sys.platform != "linux":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], fn)


_madvise = _find_madvise()


def release_pages(view: memoryview) -> int:
    """Give the whole memory pages inside ``view`` back to the OS; the bytes released.

    ``view`` must be memory whose contents nobody needs (picows' ``get_buffer``
    is exactly that: the part of its read buffer the next read will fill).
    The allocation stays as it is (address, size); only its resident pages
    go, and a later read maps fresh zeroed pages as it writes them.
    """
    if _madvise is None or not len(view) or view.readonly:
        return 0
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    page = mmap.PAGESIZE
    start = -(-address // page) * page
    end = (address + len(view)) // page * page
    if end <= start or _madvise(start, end - start, _MADV_DONTNEED) != 0:
        return 0
    return end - start


class ReadBufferRelease:
    """One connection's read-buffer release: after a large read, its unused pages go back a little later.

    A peer makes one at its first large read, so an idle connection that never
    had one carries none.
    """

    __slots__ = ("_delay_s", "_timer", "_ws", "released_bytes")

    def __init__(self, ws: WSTransport, delay_s: float) -> None:
        self._ws = ws
        self._delay_s = delay_s
        self._timer: asyncio.TimerHandle | None = None
        self.released_bytes = 0  # read-buffer pages given back to the OS (release_pages)

    def after_big_read(self) -> None:
        """picows' read buffer grew for this read: give its unused pages back a little later."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay_s, self._release)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _release(self) -> None:
        """Return the pages of picows' read buffer that hold no unread bytes (it grows, never shrinks).

        Called between reads, so ``get_buffer`` is exactly the part the next
        read fills: with nothing buffered, all of it. The allocation keeps
        its size; a later large message touches the pages again.
        """
        self._timer = None
        ws = self._ws
        if ws.is_disconnected:
            return
        protocol = ws.underlying_transport.get_protocol()
        get_buffer = getattr(protocol, "get_buffer", None)
        if get_buffer is not None:
            self.released_bytes += release_pages(get_buffer(-1))


def forget_upgrade(transport: WSTransport) -> None:
    """Drop the header maps of the upgrade request and response picows keeps for the connection's life.

    They are read once, while the upgrade is routed and authorized; kept,
    they were about a tenth of an idle connection's memory. The request and
    response objects stay (``transport.request.path`` and the like still
    answer), with empty, read-only headers.
    """
    for message in (transport.request, transport.response):
        if message is not None and getattr(message, "headers", None) is not None:
            message.headers = _NO_HEADERS  # type: ignore[assignment]  # read-only on purpose
