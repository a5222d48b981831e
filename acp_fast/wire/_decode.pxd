# The C-level contract of the compiled decoder: its message classes and what it was bound to.
# Behaviour is specified by the pure-Python twin in acp_fast/wire/jsonrpc.py
# (Request, Notification, decode_py).

cdef class Request:
    cdef public object id
    cdef public object method
    cdef public object params


cdef class Notification:
    cdef public object method
    cdef public object params


cdef object _loads          # orjson.loads
cdef object _decode_error   # orjson.JSONDecodeError
cdef object _parse_error    # errors.ParseError
cdef object _slow           # jsonrpc._classify_slow: every case but the fast path
