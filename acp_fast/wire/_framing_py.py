"""Pure-Python newline framer: the readable spec that ``_framing.pyx`` must match byte for byte.

Theory of operation
-------------------
The framer holds at most one partial line (the *carry*). The carry never
contains ``\\n``: everything up to the last ``\\n`` of a chunk is framed at
once. So only new data is ever scanned, and the total work is O(bytes fed)
however the stream is chunked (R25).

Rules, identical in both implementations:

- A line is the raw bytes before a ``\\n``. The limit is checked on that raw
  length, so a trailing ``\\r`` counts: with ``max_line_bytes=4``, ``abcd\\n``
  is accepted and ``abcd\\r\\n`` is Oversized. Counting it lets the framer
  decide the moment a partial line passes the limit, without waiting to see
  whether a ``\\r`` is the last byte.
- An accepted line loses one trailing ``\\r``; if nothing but JSON
  whitespace (space, tab, ``\\r``) is left it is skipped, as an empty line
  is (so ``\\n``, ``\\r\\n``, ``\\t\\n`` and ``\\r\\r\\n`` alone produce
  nothing): a blank line carries no message, so it gets no parse error.
- A line lying wholly inside one chunk is a memoryview into that chunk (zero
  copy); a line spanning chunks is assembled into bytes.
- Once the partial line passes ``max_line_bytes`` the framer discards: it keeps
  the first ``head_bytes`` bytes, counts the rest, and at the next ``\\n``
  reports ``Oversized(size, head)`` in the line's place. Memory while
  discarding is O(head_bytes).
- ``close()`` returns ``Truncated(size, head, oversized)`` when any partial
  line is pending, even a lone ``\\r`` (``Truncated(1, b"\\r", False)``): the raw
  bytes are reported, nothing is stripped. Then the framer is fresh again.
- The input must be a C-contiguous buffer (else BufferError); other objects
  raise TypeError. Bytes are never decoded.
"""

from __future__ import annotations

import operator
from typing import TypeAlias

from .frames import Oversized, Truncated
from .limits import MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES

_NL = b"\n"
_CR = 13
_BLANK = b" \t\r"  # JSON whitespace that can sit inside a line (\n ends it)

Frame: TypeAlias = bytes | memoryview | Oversized


class LineFramer:
    """Split a byte stream into lines, bounded by ``max_line_bytes``."""

    __slots__ = ("_carry", "_discarding", "_head_bytes", "_max_line_bytes", "_size")

    def __init__(
        self, max_line_bytes: int = MAX_LINE_BYTES, head_bytes: int = OVERLIMIT_HEAD_BYTES
    ) -> None:
        max_line_bytes = operator.index(max_line_bytes)
        head_bytes = operator.index(head_bytes)
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
        if head_bytes < 0:
            raise ValueError(f"head_bytes must be >= 0, got {head_bytes}")
        self._max_line_bytes = max_line_bytes
        self._head_bytes = head_bytes
        # The partial line (never holds b"\n"), or only its head while discarding.
        self._carry = bytearray()
        self._discarding = False
        self._size = 0  # while discarding: raw bytes of the line seen so far

    @property
    def max_line_bytes(self) -> int:
        """The longest accepted line, raw bytes before ``\\n``."""
        return self._max_line_bytes

    @property
    def buffered(self) -> int:
        """Bytes held for the partial line (only the head while discarding)."""
        return len(self._carry)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Return the lines and Oversized events completed by ``data``, in stream order."""
        view = memoryview(data)
        if not view.c_contiguous:
            raise BufferError("LineFramer.feed needs a C-contiguous buffer")
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        # bytes/bytearray can be searched in place; anything else is copied once for find().
        hay = data if isinstance(data, bytes | bytearray) else view.tobytes()
        n = len(view)
        out: list[Frame] = []
        pos = 0
        if self._carry or self._discarding:
            nl = hay.find(_NL)
            if nl < 0:
                self._extend(view)
                return out
            frame = self._finish_carried(view[:nl])
            if frame is not None:
                out.append(frame)
            pos = nl + 1
        while (nl := hay.find(_NL, pos)) >= 0:
            frame = self._in_chunk(view, hay, pos, nl)
            if frame is not None:
                out.append(frame)
            pos = nl + 1
        if pos < n:
            self._extend(view[pos:])
        return out

    def close(self) -> Truncated | None:
        """End the stream: report a pending partial line, then start afresh."""
        if not self._carry and not self._discarding:
            return None
        size = self._size if self._discarding else len(self._carry)
        event = Truncated(size, bytes(self._carry), self._discarding)
        self._reset()
        return event

    def _in_chunk(
        self, view: memoryview, hay: bytes | bytearray, start: int, nl: int
    ) -> Frame | None:
        """Frame ``view[start:nl]``, a line that lies wholly inside this chunk."""
        size = nl - start
        if size > self._max_line_bytes:
            return Oversized(size, view[start : start + min(size, self._head_bytes)].tobytes())
        end = nl - 1 if size and hay[nl - 1] == _CR else nl
        if end == start or (hay[start] in _BLANK and not hay[start:end].strip(_BLANK)):
            return None
        return view[start:end]

    def _finish_carried(self, tail: memoryview) -> Frame | None:
        """Frame carry + ``tail`` (the bytes before this chunk's first ``\\n``)."""
        if self._discarding or len(self._carry) + len(tail) > self._max_line_bytes:
            self._extend(tail)  # lands in discard mode
            event = Oversized(self._size, bytes(self._carry))
            self._reset()
            return event
        line = bytes(self._carry + tail)
        self._reset()
        if line.endswith(b"\r"):
            line = line[:-1]
        return line if line.strip(_BLANK) else None

    def _extend(self, part: memoryview) -> None:
        """Carry ``part`` of a partial line, switching to discard mode past the limit."""
        if not self._discarding and len(self._carry) + len(part) > self._max_line_bytes:
            self._discarding = True
            self._size = len(self._carry)
            # A fresh bytearray releases the large carry: discarding costs O(head_bytes).
            self._carry = self._carry[: self._head_bytes]
        if self._discarding:
            self._size += len(part)
            room = self._head_bytes - len(self._carry)
            if room > 0:
                self._carry += part[:room]
        else:
            self._carry += part

    def _reset(self) -> None:
        self._carry = bytearray()
        self._discarding = False
        self._size = 0
