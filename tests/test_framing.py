"""R25 framing: every vector in tests/vectors/framing.jsonl, on both framers, under every chunking.

Each vector is fed whole (as bytes, bytearray and memoryview), byte by byte,
split in two at every point, and in hypothesis-chosen chunks; the lines,
Oversized events and close() result must match the vector every time.
"""

from __future__ import annotations

import array
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_fast.wire import framing
from acp_fast.wire.frames import Oversized, Truncated
from acp_fast.wire.limits import MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES

VECTORS_PATH = Path(__file__).parent / "vectors" / "framing.jsonl"
Normal = bytes | Oversized


def _b(text: str) -> bytes:
    """Vectors spell bytes as latin-1 strings: one code point per byte, JSON-safe."""
    return text.encode("latin-1")


def _load_vectors() -> list[dict[str, Any]]:
    vectors = []
    for raw in VECTORS_PATH.read_text(encoding="utf-8").splitlines():
        v = json.loads(raw)
        frames: list[Normal] = []
        for f in v["frames"]:
            if "line" in f:
                frames.append(_b(f["line"]))
            else:
                frames.append(Oversized(f["oversized"]["size"], _b(f["oversized"]["head"])))
        c = v["close"]
        vectors.append(
            {
                "name": v["name"],
                "data": _b(v["input"]),
                "max_line_bytes": v["max_line_bytes"],
                "head_bytes": v["head_bytes"],
                "frames": frames,
                "close": None if c is None else Truncated(c["size"], _b(c["head"]), c["oversized"]),
            }
        )
    return vectors


VECTORS = _load_vectors()
VECTOR_IDS = [v["name"] for v in VECTORS]


def _normal(frames: Iterable[object]) -> list[Normal]:
    out: list[Normal] = []
    for f in frames:
        assert isinstance(f, bytes | memoryview | Oversized), f
        out.append(f if isinstance(f, Oversized) else bytes(f))
    return out


def _run(framer_cls: type, v: dict[str, Any], chunks: Sequence[bytes]) -> None:
    framer = framer_cls(v["max_line_bytes"], v["head_bytes"])
    frames: list[Normal] = []
    bound = max(v["max_line_bytes"], v["head_bytes"])
    for chunk in chunks:
        frames += _normal(framer.feed(chunk))
        assert framer.buffered <= bound
    assert frames == v["frames"]
    assert framer.close() == v["close"]
    assert framer.buffered == 0
    assert framer.close() is None


def _cut(data: bytes, points: Iterable[int]) -> list[bytes]:
    edges = [0, *sorted(points), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def test_vectors_file_covers_the_required_cases() -> None:
    names = set(VECTOR_IDS)
    assert len(names) == len(VECTORS), "vector names must be unique"
    for required in (
        "crlf_lines",
        "empty_lines_skipped",
        "lone_crlf_skipped",
        "final_line_without_newline_truncated",
        "one_under_limit",
        "exactly_at_limit",
        "one_over_limit",
        "oversized_then_normal",
        "oversized_spanning_many_chunks",
        "discard_mode_then_close",
        "invalid_utf8_is_bytes",
        "nul_bytes_are_bytes",
    ):
        assert required in names


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
@pytest.mark.parametrize("v", VECTORS, ids=VECTOR_IDS)
def test_r25_vector_fed_whole(framer_cls: type, v: dict[str, Any], kind: type) -> None:
    _run(framer_cls, v, [kind(v["data"])])


@pytest.mark.parametrize("v", VECTORS, ids=VECTOR_IDS)
def test_r25_vector_fed_byte_by_byte(framer_cls: type, v: dict[str, Any]) -> None:
    data = v["data"]
    _run(framer_cls, v, [data[i : i + 1] for i in range(len(data))])


@pytest.mark.parametrize("v", VECTORS, ids=VECTOR_IDS)
def test_r25_vector_split_at_every_point(framer_cls: type, v: dict[str, Any]) -> None:
    data = v["data"]
    for i in range(len(data) + 1):
        _run(framer_cls, v, _cut(data, [i]))


@pytest.mark.parametrize("v", VECTORS, ids=VECTOR_IDS)
def test_r25_vector_after_close_framer_is_reusable(framer_cls: type, v: dict[str, Any]) -> None:
    framer = framer_cls(v["max_line_bytes"], v["head_bytes"])
    for _ in range(2):
        assert _normal(framer.feed(v["data"])) == v["frames"]
        assert framer.close() == v["close"]


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_r25_vector_in_hypothesis_chunks(framer_cls: type, data: st.DataObject) -> None:
    v = data.draw(st.sampled_from(VECTORS), label="vector")
    n = len(v["data"])
    points = data.draw(st.lists(st.integers(0, n), max_size=n + 2), label="cuts")
    _run(framer_cls, v, _cut(v["data"], points))


def test_r25_line_inside_one_chunk_is_a_zero_copy_memoryview(framer_cls: type) -> None:
    data = b'{"id":1}\r\nxy\n'
    first, second = framer_cls().feed(data)
    for line, want in ((first, b'{"id":1}'), (second, b"xy")):
        assert type(line) is memoryview
        assert line.obj is data
        assert (line.format, line.ndim, line.itemsize, line.readonly) == ("B", 1, 1, True)
        assert line.c_contiguous
        n = len(want)
        assert (len(line), line.nbytes, line.shape, line.strides) == (n, n, (n,), (1,))
        assert line == want
        assert line.tobytes() == want
        assert hash(line) == hash(want)
    assert orjson.loads(first) == {"id": 1}


def test_r25_line_spanning_chunks_is_assembled_bytes(framer_cls: type) -> None:
    framer = framer_cls()
    assert framer.feed(b'{"id"') == []
    assert framer.buffered == 5
    (line,) = framer.feed(b":2}\r\n")
    assert type(line) is bytes
    assert orjson.loads(line) == {"id": 2}
    assert framer.buffered == 0


def test_r25_lines_of_a_bytearray_are_writable_views_into_it(framer_cls: type) -> None:
    data = bytearray(b"ab\ncd\n")
    first, _ = framer_cls().feed(data)
    assert isinstance(first, memoryview)
    assert first.obj is data
    assert not first.readonly
    assert bytes(first) == b"ab"


def test_r25_lines_of_an_offset_memoryview_are_views_of_its_exporter(framer_cls: type) -> None:
    base = b"zz\nab\ncd\n"
    first, second = framer_cls().feed(memoryview(base)[3:])
    assert (bytes(first), bytes(second)) == (b"ab", b"cd")
    assert isinstance(second, memoryview)
    assert second.obj is base


def test_r25_multibyte_buffer_is_framed_as_its_bytes(framer_cls: type) -> None:
    data = array.array("H", [0x0A61, 0x0A62, 0x6364])  # b"\n" lands mid-item either endianness
    raw = data.tobytes()
    *lines, rest = raw.split(b"\n")
    framer = framer_cls()
    out = framer.feed(data)
    assert _normal(out) == [x for x in lines if x]
    assert all(isinstance(x, memoryview) and x.itemsize == 1 for x in out)
    assert framer.close() == Truncated(len(rest), rest, False)


@pytest.mark.parametrize("bad", ["text\n", 10, None, [b"a\n"]])
def test_r25_feed_of_a_non_buffer_raises_type_error(framer_cls: type, bad: object) -> None:
    with pytest.raises(TypeError):
        framer_cls().feed(bad)


def test_r25_feed_of_a_non_contiguous_buffer_raises_buffer_error(framer_cls: type) -> None:
    with pytest.raises(BufferError):
        framer_cls().feed(memoryview(b"a\nb\nc\n")[::2])


@pytest.mark.parametrize(("max_line", "head"), [(0, 0), (-1, 4), (1, -1)])
def test_r25_invalid_limits_raise_value_error(framer_cls: type, max_line: int, head: int) -> None:
    with pytest.raises(ValueError):
        framer_cls(max_line, head)


def test_r25_defaults_come_from_limits(framer_cls: type) -> None:
    framer = framer_cls()
    assert framer.max_line_bytes == MAX_LINE_BYTES
    assert framer.buffered == 0
    assert framer_cls(1, 0).max_line_bytes == 1


def test_r25_buffered_counts_only_the_head_while_discarding(framer_cls: type) -> None:
    framer = framer_cls(8, 3)
    assert framer.feed(b"abcdefgh") == []
    assert framer.buffered == 8
    assert framer.feed(b"i") == []
    assert framer.buffered == 3
    assert framer.feed(b"j" * 100) == []
    assert framer.buffered == 3
    assert _normal(framer.feed(b"\nok")) == [Oversized(109, b"abc")]
    assert framer.buffered == 2


def _feed_long_line(framer: Any, length: int, chunk: bytes) -> int:
    """Feed ``length`` bytes of one line in ``chunk``-sized pieces; return max ``buffered`` seen."""
    assert length % len(chunk) == 0
    peak = 0
    for _ in range(length // len(chunk)):
        assert framer.feed(chunk) == []
        peak = max(peak, framer.buffered)
    return peak


def test_r25_real_limit_accepts_a_64_mib_line_in_64_kib_chunks(framer_cls: type) -> None:
    chunk = b"a" * (64 * 1024)
    framer = framer_cls()
    assert _feed_long_line(framer, MAX_LINE_BYTES, chunk) == MAX_LINE_BYTES
    (line,) = framer.feed(b"\n")
    assert len(line) == MAX_LINE_BYTES
    assert line[:3] == b"aaa"
    assert framer.buffered == 0
    assert framer.close() is None


def test_r25_real_limit_discards_a_64_mib_plus_one_line_in_bounded_memory(
    framer_cls: type,
) -> None:
    chunk = b"a" * (64 * 1024)
    framer = framer_cls()
    _feed_long_line(framer, MAX_LINE_BYTES, chunk)
    assert framer.feed(b"b") == []  # one past the limit: only the head is kept from here on
    assert framer.buffered == OVERLIMIT_HEAD_BYTES
    extra = 16 * len(chunk)
    assert _feed_long_line(framer, extra, chunk) <= OVERLIMIT_HEAD_BYTES
    frames = framer.feed(b"\r\n{}\n")
    assert _normal(frames) == [
        Oversized(MAX_LINE_BYTES + 1 + extra + 1, b"a" * OVERLIMIT_HEAD_BYTES),
        b"{}",
    ]
    assert framer.close() is None


def _implementation(no_extensions: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ACP_FAST_NO_EXTENSIONS"}
    if no_extensions:
        env["ACP_FAST_NO_EXTENSIONS"] = "1"
    code = "import acp_fast.wire.framing as f; print(f.IMPLEMENTATION, f.LineFramer.__module__)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_r25_no_extensions_env_selects_the_python_framer() -> None:
    assert _implementation(no_extensions=True) == "python acp_fast.wire._framing_py"


@pytest.mark.c_extension
def test_r25_compiled_framer_is_selected_by_default() -> None:
    assert _implementation(no_extensions=False) == "c acp_fast.wire._framing"
    assert framing.IMPLEMENTATION in ("c", "python")
