# The C-level contract of the compiled framer: its state and helpers.
# Behaviour is specified by the pure-Python twin, acp_fast/_framing_py.py.

cdef enum:
    NEWLINE = 10
    CARRIAGE_RETURN = 13
    SPACE = 32
    TAB = 9
    # Smallest carry allocation, so short partial lines do not realloc per byte.
    MIN_CAPACITY = 4096
    # A carry grown past this is freed once its line is framed, so one huge
    # line does not pin up to max_line_bytes for the rest of the connection.
    KEEP_CAPACITY = 1 << 20


cdef class LineFramer:
    cdef Py_ssize_t _max_line   # longest accepted raw line (before b"\n")
    cdef Py_ssize_t _head_bytes # bytes of an over-limit line kept for Oversized/Truncated
    cdef char *_buf             # the partial line; never holds b"\n"; only the head while discarding
    cdef Py_ssize_t _len        # bytes used in _buf
    cdef Py_ssize_t _cap        # bytes allocated for _buf
    cdef bint _discarding       # the partial line passed _max_line
    cdef Py_ssize_t _size       # while discarding: raw bytes of the line seen so far

    cdef int _feed(self, const char *p, Py_ssize_t n, object data, list out) except -1
    cdef object _finish_carried(self, const char *p, Py_ssize_t n)
    cdef int _extend(self, const char *p, Py_ssize_t n) except -1
    cdef int _append(self, const char *p, Py_ssize_t n) except -1
    cdef int _resize(self, Py_ssize_t cap) except -1
    cdef int _reset(self) except -1
