"""R24 differential: the compiled decoder and its pure-Python spec agree on any line.

Lines are built mostly from JSON-RPC-shaped objects whose members are drawn
from the values that decide the classification (a "2.0" that is not quite,
ids at and past the int64 edges, null, bools, floats, params of every JSON
type), plus arbitrary bytes. For each, both decoders must return a message of
the same class with the same fields, or raise the same error class with the
same message and recovered id.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.wire import jsonrpc
from acp_fast.wire.errors import AcpError

try:
    from acp_fast.wire import _decode as _decode_c
except ImportError:  # pragma: no cover - the CI build always has it
    _decode_c = None  # type: ignore[assignment]

pytestmark = pytest.mark.c_extension

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(["2.0", "2", "2.00", "", "session/set_mode", "_echo", "x"]),
    st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6,
)
ids = st.one_of(st.sampled_from([1, "a", 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, None, True, 1.0]), values)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), values),
        "id": ids,
        "method": st.one_of(st.sampled_from(["session/set_mode", "m"]), values),
        "params": values,
        "result": values,
        "error": values,
        "other": values,
    },
)
messages = st.one_of(
    envelopes.map(lambda m: {"jsonrpc": "2.0", "method": "m", **m}),  # the fast path's decisions
    envelopes,
    values,
)


def _dumps(value: Any) -> bytes:
    """JSON text for ``value``; a value orjson refuses (an integer past 64 bits) as Python text."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return repr(value).encode()  # not JSON: both decoders must give the same ParseError


lines = st.one_of(
    messages.map(_dumps),
    st.binary(max_size=40),
)


def _outcome(decode: Any, line: bytes) -> tuple[Any, ...]:
    """Everything observable about one decode."""
    try:
        msg = decode(line)
    except AcpError as exc:
        return ("error", type(exc), str(exc), exc.code, getattr(exc, "id", "no id"))
    fields = ("id", "method", "params", "result", "error")
    return ("message", type(msg), *(getattr(msg, f, "absent") for f in fields))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(line=lines)
def test_r24_c_and_python_decoders_agree_on_any_line(line: bytes) -> None:
    if _decode_c is None:
        pytest.fail("the Cython decoder is not built (pip install -e .)")
    assert jsonrpc.decode is _decode_c.decode
    assert _outcome(_decode_c.decode, line) == _outcome(jsonrpc.decode_py, line)
    assert _outcome(_decode_c.decode, memoryview(bytearray(line))) == _outcome(jsonrpc.decode_py, line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}',
        b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}',
        b'{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}',
        b'{"jsonrpc":"2.0","id":-9223372036854775809,"method":"m"}',
        b'{"jsonrpc":"2.0","id":null,"method":"m"}',
        b'{"jsonrpc":"2.0","id":true,"method":"m"}',
        b'{"jsonrpc":"2.0","id":1.0,"method":"m"}',
        b'{"jsonrpc":"2.0","method":"m","params":null}',
        b'{"jsonrpc":"2.0","method":"m","params":3}',
        b'{"jsonrpc":"2.0","method":7}',
        b'{"jsonrpc":2.0,"method":"m"}',
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b'[{"jsonrpc":"2.0","method":"m"}]',
        b'{"jsonrpc":"2.0","method":"m"',
        b"\xff",
    ],
)
def test_r24_c_and_python_decoders_agree_on_the_edges(line: bytes) -> None:
    if _decode_c is None:
        pytest.fail("the Cython decoder is not built (pip install -e .)")
    assert _outcome(_decode_c.decode, line) == _outcome(jsonrpc.decode_py, line)
