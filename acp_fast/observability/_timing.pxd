# The C-level contract of the compiled request timings. Behaviour is
# specified by the pure-Python twin, acp_fast/observability/_timing_py.py.

cdef enum:
    MAX_BOUNDS = 32  # bucket bounds a histogram holds at most (the families in metrics.py use 12 to 20)


cdef class Histogram:
    cdef readonly tuple bounds
    cdef readonly double total
    cdef double _bounds[MAX_BOUNDS]
    cdef unsigned long long _counts[MAX_BOUNDS + 1]
    cdef Py_ssize_t _n

    cdef void _observe(self, double value) noexcept


cdef class Timings:
    cdef readonly double last
    cdef dict _by         # method name or label -> Histogram
    cdef tuple _bounds
    cdef object _label    # method name -> bounded label (metrics.method_label)
    cdef frozenset _watch # names whose answers the caller looks at (``since`` returns True)

    cdef Histogram _histogram(self, str key)
