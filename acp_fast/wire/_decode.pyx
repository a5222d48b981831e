"""Compiled ``jsonrpc.decode`` and the two message classes it builds.

``jsonrpc.decode_py`` and the Python ``Request``/``Notification`` there
specify the behaviour; this does the same checks with C dictionary lookups,
and builds the messages as extension types, whose allocation is a fraction of
a Python ``__init__`` call (benchmarks/bench_codec.py shows the saving). When it
is built, jsonrpc.py uses these classes everywhere, so one process never
mixes the two kinds. Only a well-formed request or notification is decided
here; every other value goes to the twin's own ``_classify_slow``, so errors
and responses are the same. jsonrpc.py imports this module, so what it needs
from there is passed in by ``bind``.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_Size
from cpython.ref cimport PyObject

cdef long long INT64_MIN = -9223372036854775807 - 1
cdef long long INT64_MAX = 9223372036854775807

_loads = None
_decode_error = None
_parse_error = None
_slow = None


cdef class Request:
    """An incoming or outgoing call that wants exactly one response."""

    def __init__(self, id, method, params):
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self):
        return f"Request(id={self.id!r}, method={self.method!r})"


cdef class Notification:
    """A message without id: never answered, not even with an error (R06)."""

    def __init__(self, method, params):
        self.method = method
        self.params = params

    def __repr__(self):
        return f"Notification(method={self.method!r})"


def bind(loads, decode_error, parse_error, slow):
    """Give the decoder the wire layer's parser, parse error and slow-path classifier."""
    global _loads, _decode_error, _parse_error, _slow
    _loads = loads
    _decode_error = decode_error
    _parse_error = parse_error
    _slow = slow


cdef inline bint _valid_id(object rid):
    if type(rid) is str:
        return True
    if type(rid) is not int:
        return False
    try:
        return INT64_MIN <= <long long>rid <= INT64_MAX
    except OverflowError:
        return False


def decode(line):
    """Parse and classify one framed line (see ``jsonrpc.decode_py``)."""
    cdef PyObject *found
    cdef object method, params
    cdef Request req
    cdef Notification note
    try:
        obj = _loads(line)
    except _decode_error as exc:
        raise _parse_error(f"Parse error: {exc}") from None
    if type(obj) is dict:
        found = PyDict_GetItem(obj, "jsonrpc")
        if found is not NULL and type(<object>found) is str and <object>found == "2.0":
            found = PyDict_GetItem(obj, "method")
            if found is not NULL and type(<object>found) is str:
                method = <object>found
                found = PyDict_GetItem(obj, "params")
                params = None if found is NULL else <object>found
                if params is None or type(params) is dict or type(params) is list:
                    found = PyDict_GetItem(obj, "id")
                    if found is NULL:
                        note = Notification.__new__(Notification)
                        note.method = method
                        note.params = params
                        return note
                    if _valid_id(<object>found):
                        req = Request.__new__(Request)
                        req.id = <object>found
                        req.method = method
                        req.params = params
                        return req
    return _slow(obj)


def walk_fields(dict params, tuple steps, undeclared):
    """Check a params object against field steps; the kwargs dict, or the index of the bad field.

    The compiled twin of ``agent.methods._walk_fields`` (which specifies it):
    each step is ``(wire, py, exact type or None, check, required)``; a
    missing or null field is None in the kwargs (left out when ``required``
    is None), or the failure when it is required; a present one must be of
    the exact type, or pass ``check`` when there is none. A ``_meta`` object
    becomes ``field_meta``; keys beyond the declared ones go to ``undeclared``.
    """
    cdef dict kwargs = {}
    cdef PyObject *found
    cdef tuple step
    cdef Py_ssize_t i, seen = 0
    cdef object value, kind, required
    for i in range(len(steps)):
        step = <tuple>steps[i]
        found = PyDict_GetItem(params, step[0])
        if found is NULL or <object>found is None:
            required = step[4]
            if required is True:
                return i
            if required is False:
                kwargs[step[1]] = None
            continue
        value = <object>found
        kind = step[2]
        if type(value) is kind or (kind is None and step[3](value)):
            kwargs[step[1]] = value
            seen += 1
        else:
            return i
    found = PyDict_GetItem(params, "_meta")
    if found is not NULL and <object>found is not None:
        seen += 1
        if type(<object>found) is dict:
            kwargs["field_meta"] = <object>found
    if seen < PyDict_Size(params):
        undeclared(params, steps, kwargs)
    return kwargs
