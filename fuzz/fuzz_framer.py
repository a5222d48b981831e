"""Atheris harness for the framers: any bytes, any chunking, both implementations, one oracle.

An input is decoded as a small header and a stream (see :func:`decode`). The
stream is fed to the Cython framer (when built) and to the pure-Python one in
the header's chunk sizes, and both must produce exactly what :func:`oracle`
derives from ``bytes.split(b"\\n")`` on the whole stream: same lines, same
Oversized and Truncated events, ``buffered`` within bounds. Anything else,
including any exception, is a finding.

    PYTHONPATH=. python fuzz/fuzz_framer.py fuzz/corpus    # fuzz (needs atheris)
    PYTHONPATH=. python fuzz/fuzz_framer.py --make-corpus  # rewrite seeds from the vectors

``test_one_input`` needs nothing but acp_fast, so tests/test_fuzz_smoke.py runs
it over the corpus and random inputs without atheris.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from acp_fast.wire import _framing_py
from acp_fast.wire.frames import Oversized, Truncated
from acp_fast.wire.limits import MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES

try:
    from acp_fast.wire import _framing as _framing_c
except ImportError:  # fuzz the Python framer alone
    _framing_c = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors" / "framing.jsonl"
CORPUS = Path(__file__).resolve().parent / "corpus"

FRAMERS: list[type] = [_framing_py.LineFramer]
if _framing_c is not None:
    FRAMERS.insert(0, _framing_c.LineFramer)

Expected = tuple[list[bytes | Oversized], Truncated | None]


def decode(buf: bytes) -> tuple[int, int, list[int], bytes]:
    """Split an input into (max_line_bytes, head_bytes, chunk sizes, stream).

    Byte 0 is max_line_bytes and byte 1 head_bytes, except that byte 0 == 0
    selects the real defaults (64 MiB, 4 KiB) whatever byte 1 says. Byte 2
    (mod 8) counts the chunk-size bytes that follow, each giving a size of
    1..256 used in a cycle; no sizes means one feed. The rest is the stream.
    Missing header bytes read as 0.
    """
    head = buf[:3].ljust(3, b"\0")
    k = head[2] % 8
    sizes = [b + 1 for b in buf[3 : 3 + k]]
    if head[0] == 0:
        return MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES, sizes, buf[3 + k :]
    return head[0], head[1], sizes, buf[3 + k :]


def encode(max_line: int, head: int, sizes: list[int], stream: bytes) -> bytes:
    """Inverse of :func:`decode`, for the seed corpus."""
    assert len(sizes) < 8 and all(1 <= s <= 256 for s in sizes)
    if (max_line, head) == (MAX_LINE_BYTES, OVERLIMIT_HEAD_BYTES):
        max_line, head = 0, 0
    assert (0 < max_line < 256 and 0 <= head < 256) or max_line == 0
    header = bytes([max_line, head, len(sizes)])
    return header + bytes(s - 1 for s in sizes) + stream


def oracle(stream: bytes, max_line: int, head: int) -> Expected:
    """What the framers must produce, written the obvious way on the whole stream."""
    *lines, rest = stream.split(b"\n")
    frames: list[bytes | Oversized] = []
    for raw in lines:
        if len(raw) > max_line:
            frames.append(Oversized(len(raw), raw[:head]))
        elif (line := raw.removesuffix(b"\r")).strip(b" \t\r"):  # blank lines carry nothing
            frames.append(line)
    over = len(rest) > max_line
    close = Truncated(len(rest), rest[:head] if over else rest, over) if rest else None
    return frames, close


def chunks(stream: bytes, sizes: list[int]) -> list[bytes]:
    """``stream`` cut in ``sizes`` (cycled), then an empty feed, which must change nothing."""
    if not sizes:
        return [stream, b""]
    out, pos = [], 0
    while pos < len(stream):
        size = sizes[len(out) % len(sizes)]
        out.append(stream[pos : pos + size])
        pos += size
    return [*out, b""]


def run(cls: type, stream: bytes, max_line: int, head: int, sizes: list[int]) -> Expected:
    """Feed ``stream`` in ``sizes`` chunks, checking ``buffered`` after every feed."""
    framer = cls(max_line, head)
    frames: list[bytes | Oversized] = []
    for chunk in chunks(stream, sizes):
        frames += [f if isinstance(f, Oversized) else bytes(f) for f in framer.feed(chunk)]
        assert framer.buffered <= max(max_line, head), (framer.buffered, max_line, head)
    close = framer.close()
    assert framer.buffered == 0 and framer.close() is None
    return frames, close


def test_one_input(buf: bytes) -> None:
    """One fuzz case: every framer, chunked as the header says, equals the oracle."""
    max_line, head, sizes, stream = decode(buf)
    want = oracle(stream, max_line, head)
    for cls in FRAMERS:
        got = run(cls, stream, max_line, head, sizes)
        if got != want:
            raise AssertionError(f"{cls.__module__}: {got!r} != {want!r}")


def make_corpus() -> dict[str, bytes]:
    """Seeds from tests/vectors/framing.jsonl: each vector whole, byte-wise and in odd chunks."""
    seeds: dict[str, bytes] = {}
    for raw in VECTORS.read_text(encoding="utf-8").splitlines():
        v = json.loads(raw)
        stream = v["input"].encode("latin-1")
        for label, sizes in (("whole", []), ("bytewise", [1]), ("chunked", [3, 5])):
            seeds[f"{v['name']}-{label}"] = encode(
                v["max_line_bytes"], v["head_bytes"], sizes, stream
            )
    return seeds


def write_corpus() -> None:
    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    for name, data in make_corpus().items():
        (CORPUS / name).write_bytes(data)


def main() -> None:
    import atheris  # only the fuzzer needs it

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        write_corpus()
    else:
        main()
