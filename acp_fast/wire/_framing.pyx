"""Compiled newline framer; same API, lines and events as acp_fast.wire._framing_py (the spec).

The hot path is memchr over the new bytes only (the carry never holds a
b"\\n"), plus one memoryview per line. The chunk's memoryview is made once
per feed call, lazily, and each line is a view of it (see _line_view), so a
line costs one small object and no copy.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.memoryview cimport PyMemoryView_FromObject, PyMemoryView_GET_BUFFER
from libc.string cimport memchr, memcpy

from .frames import Oversized, Truncated
from .limits import MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES


cdef object _byte_view(object data):
    """A 1-D byte memoryview of ``data``, so slice offsets are byte offsets."""
    view = PyMemoryView_FromObject(data)
    cdef Py_buffer *b = PyMemoryView_GET_BUFFER(view)
    if b.ndim != 1 or b.itemsize != 1:
        view = view.cast("B")
    return view


cdef inline object _line_view(object view, Py_ssize_t start, Py_ssize_t end):
    """Return what ``view[start:end]`` returns, without building a slice.

    Slicing builds two ints and a slice object and parses them back; that was
    most of the cost of a line. Instead take a fresh view of the same managed
    buffer (PyMemoryView_FromObject on a memoryview adds a view, it never
    returns the same object) and re-point its private Py_buffer before anyone
    else sees it. ``view`` is 1-D, C-contiguous, itemsize 1, and 0 <= start <
    end <= len(view), so every sub-range is still 1-D and contiguous: the
    flags copied from ``view`` stay true, and the exporter stays referenced.
    """
    line = PyMemoryView_FromObject(view)
    cdef Py_buffer *b = PyMemoryView_GET_BUFFER(line)
    b.buf = <char *>b.buf + start
    b.len = end - start
    b.shape[0] = end - start
    return line


cdef inline bint _blank(const char *p, Py_ssize_t n):
    """Whether p[:n] is only JSON whitespace that fits in a line (space, tab, CR)."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] != SPACE and p[i] != TAB and p[i] != CARRIAGE_RETURN:
            return False
    return True


cdef class LineFramer:
    """Split a byte stream into lines, bounded by ``max_line_bytes``."""

    def __init__(self, Py_ssize_t max_line_bytes=MAX_LINE_BYTES,
                 Py_ssize_t head_bytes=OVERLIMIT_HEAD_BYTES):
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
        if head_bytes < 0:
            raise ValueError(f"head_bytes must be >= 0, got {head_bytes}")
        self._max_line = max_line_bytes
        self._head_bytes = head_bytes
        self._reset()
        self._resize(0)

    def __dealloc__(self):
        PyMem_Free(self._buf)

    @property
    def max_line_bytes(self):
        """The longest accepted line, raw bytes before ``\\n``."""
        return self._max_line

    @property
    def buffered(self):
        """Bytes held for the partial line (only the head while discarding)."""
        return self._len

    def feed(self, data):
        """Return the lines and Oversized events completed by ``data``, in stream order."""
        cdef Py_buffer buf
        cdef list out = []
        PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
        try:
            self._feed(<const char *>buf.buf, buf.len, data, out)
        finally:
            PyBuffer_Release(&buf)
        return out

    def close(self):
        """End the stream: report a pending partial line, then start afresh."""
        if self._len == 0 and not self._discarding:
            return None
        size = self._size if self._discarding else self._len
        event = Truncated(size, PyBytes_FromStringAndSize(self._buf, self._len),
                          self._discarding)
        self._reset()
        self._resize(0)
        return event

    cdef int _feed(self, const char *p, Py_ssize_t n, object data, list out) except -1:
        cdef const char *hit
        cdef Py_ssize_t pos = 0, nl, end, size
        cdef object view = None
        if n == 0:
            return 0
        if self._len or self._discarding:
            hit = <const char *>memchr(p, NEWLINE, n)
            if hit == NULL:
                return self._extend(p, n)
            nl = hit - p
            frame = self._finish_carried(p, nl)
            if frame is not None:
                out.append(frame)
            pos = nl + 1
        while pos < n:
            hit = <const char *>memchr(p + pos, NEWLINE, n - pos)
            if hit == NULL:
                break
            nl = hit - p
            size = nl - pos
            if size > self._max_line:
                out.append(Oversized(size, PyBytes_FromStringAndSize(
                    p + pos, min(size, self._head_bytes))))
            else:
                end = nl - 1 if size and p[nl - 1] == CARRIAGE_RETURN else nl
                if end > pos and not _blank(p + pos, end - pos):
                    if view is None:
                        view = _byte_view(data)
                    out.append(_line_view(view, pos, end))
            pos = nl + 1
        if pos < n:
            self._extend(p + pos, n - pos)
        return 0

    cdef object _finish_carried(self, const char *p, Py_ssize_t n):
        """Frame carry + p[:n] (the bytes before this chunk's first b"\\n")."""
        cdef Py_ssize_t size = self._len + n
        cdef object line
        if self._discarding or size > self._max_line:
            self._extend(p, n)  # lands in discard mode
            event = Oversized(self._size, PyBytes_FromStringAndSize(self._buf, self._len))
            self._reset()
            return event
        if (p[n - 1] if n else self._buf[self._len - 1]) == CARRIAGE_RETURN:
            size -= 1
        line = None
        if size:
            line = PyBytes_FromStringAndSize(NULL, size)
            if size <= self._len:
                memcpy(PyBytes_AS_STRING(line), self._buf, size)
            else:
                memcpy(PyBytes_AS_STRING(line), self._buf, self._len)
                memcpy(PyBytes_AS_STRING(line) + self._len, p, size - self._len)
            if _blank(PyBytes_AS_STRING(line), size):
                line = None
        self._reset()
        return line

    cdef int _extend(self, const char *p, Py_ssize_t n) except -1:
        """Carry p[:n] of a partial line, switching to discard mode past the limit."""
        cdef Py_ssize_t room
        if not self._discarding and self._len + n > self._max_line:
            self._discarding = True
            self._size = self._len
            if self._len > self._head_bytes:
                self._len = self._head_bytes
            # Give back the large carry: discarding costs O(head_bytes).
            if self._cap > self._head_bytes:
                self._resize(self._head_bytes)
        if self._discarding:
            self._size += n
            room = self._head_bytes - self._len
            if room > n:
                room = n
            if room > 0:
                self._append(p, room)
        else:
            self._append(p, n)
        return 0

    cdef int _append(self, const char *p, Py_ssize_t n) except -1:
        cdef Py_ssize_t need = self._len + n
        cdef Py_ssize_t cap
        if need > self._cap:
            # Doubling keeps appends amortised O(1); the carry never exceeds the limit.
            cap = max(self._cap * 2, need, <Py_ssize_t>MIN_CAPACITY)
            self._resize(min(cap, max(self._max_line, self._head_bytes)))
        memcpy(self._buf + self._len, p, n)
        self._len = need
        return 0

    cdef int _resize(self, Py_ssize_t cap) except -1:
        """Reallocate the carry to ``cap`` bytes (0 frees it); keeps the first _len bytes."""
        cdef char *buf
        if cap == self._cap:
            return 0
        if cap == 0:
            PyMem_Free(self._buf)
            self._buf = NULL
        else:
            buf = <char *>PyMem_Realloc(self._buf, <size_t>cap)
            if buf == NULL:
                raise MemoryError()
            self._buf = buf
        self._cap = cap
        return 0

    cdef int _reset(self) except -1:
        """Forget the partial line; free a carry that one huge line grew."""
        self._len = 0
        self._discarding = False
        self._size = 0
        if self._cap > KEEP_CAPACITY:
            self._resize(0)
        return 0
