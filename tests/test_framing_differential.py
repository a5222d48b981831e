"""R25 differential: the Cython framer and its pure-Python spec agree on any stream and chunking.

Streams are biased towards b"\\n", b"\\r" and short lines, and limits are small,
so CRLF splits, discard mode and close() inside a line are hit often. Every
feed's frames (their type too: memoryview versus assembled bytes), ``buffered``
after every feed, and the close() result must be identical; each framer must
also give the same frames whole as chunked.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.wire import _framing_py
from acp_fast.wire.frames import Oversized

try:
    from acp_fast.wire import _framing as _framing_c
except ImportError:  # pragma: no cover - the CI build always has it
    _framing_c = None  # type: ignore[assignment]

pytestmark = pytest.mark.c_extension

Trace = list[object]

pieces = st.one_of(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b" ", b"\t", b"a", b"xyz", b"\x00", b"\xff\xfe"]),
    st.binary(max_size=12),
)
streams = st.lists(pieces, max_size=40).map(b"".join)


def _trace(cls: type, data: bytes, cuts: Sequence[int], max_line: int, head: int) -> Trace:
    """Everything observable about one run: per-feed frames with their type, buffered, close."""
    framer = cls(max_line, head)
    edges = [0, *sorted(cuts), len(data)]
    trace: Trace = []
    for a, b in itertools.pairwise(edges):
        frames = framer.feed(data[a:b])
        trace.append(
            [f if isinstance(f, Oversized) else (type(f).__name__, bytes(f)) for f in frames]
        )
        trace.append(framer.buffered)
    trace.append(framer.close())
    trace.append(framer.buffered)
    return trace


def _flat_frames(trace: Trace) -> list[object]:
    """The frames alone, ignoring chunk boundaries and zero-copy versus assembled."""
    flat: list[object] = []
    for item in trace[:-2:2]:
        assert isinstance(item, list)
        flat += [f if isinstance(f, Oversized) else f[1] for f in item]
    return flat


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    data=streams,
    cut_fractions=st.lists(st.floats(0, 1), max_size=12),
    max_line=st.integers(1, 12),
    head=st.integers(0, 8),
)
def test_r25_c_and_python_framers_agree_on_any_stream_and_chunking(
    data: bytes, cut_fractions: list[float], max_line: int, head: int
) -> None:
    if _framing_c is None:
        pytest.fail("the Cython framer is not built (pip install -e .)")
    cuts = [int(f * len(data)) for f in cut_fractions]
    c = _trace(_framing_c.LineFramer, data, cuts, max_line, head)
    py = _trace(_framing_py.LineFramer, data, cuts, max_line, head)
    assert c == py
    whole = _trace(_framing_py.LineFramer, data, [], max_line, head)
    assert _flat_frames(py) == _flat_frames(whole)
    assert py[-2] == whole[-2]  # close() does not depend on chunking either


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.binary(max_size=64), chunk=st.integers(1, 8), max_line=st.integers(1, 80))
def test_r25_c_and_python_framers_agree_on_raw_bytes_in_fixed_chunks(
    data: bytes, chunk: int, max_line: int
) -> None:
    if _framing_c is None:
        pytest.fail("the Cython framer is not built (pip install -e .)")
    cuts = list(range(chunk, len(data), chunk))
    c = _trace(_framing_c.LineFramer, data, cuts, max_line, 4)
    assert c == _trace(_framing_py.LineFramer, data, cuts, max_line, 4)
