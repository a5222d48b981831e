"""R25 fuzz smoke: the atheris harness's one-input check over its seeds and 2000 random inputs.

Runs without atheris, so every test run exercises the harness and proves the
seed corpus still matches tests/vectors/framing.jsonl.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_framer.py"


def _load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_framer", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


@pytest.mark.c_extension
def test_r25_harness_compares_both_framers() -> None:
    assert len(harness.FRAMERS) == 2, "the Cython framer is not built (pip install -e .)"


def test_r25_seed_corpus_is_generated_from_the_vectors() -> None:
    on_disk = {p.name: p.read_bytes() for p in harness.CORPUS.iterdir()}
    fix = "run: PYTHONPATH=. python fuzz/fuzz_framer.py --make-corpus"
    assert on_disk == harness.make_corpus(), fix


def test_r25_harness_accepts_every_seed() -> None:
    for name, data in sorted(harness.make_corpus().items()):
        try:
            harness.test_one_input(data)
        except AssertionError as exc:  # pragma: no cover - names the failing seed
            raise AssertionError(f"seed {name}: {exc}") from exc


def _random_input(rng: random.Random) -> bytes:
    """A header then a stream biased to newlines, CRs and short runs of other bytes."""
    header = bytes([rng.randrange(1, 24), rng.randrange(0, 10), rng.randrange(8)])
    header += bytes(rng.randrange(256 if rng.random() < 0.2 else 8) for _ in range(7))
    alphabet = [b"\n", b"\r", b"\r\n", b" ", b"\t", b"a", b"\x00", b"\xff"]
    parts = [
        rng.choice(alphabet) if rng.random() < 0.7 else rng.randbytes(rng.randrange(1, 30))
        for _ in range(rng.randrange(60))
    ]
    return header + b"".join(parts)


def test_r25_harness_accepts_random_inputs() -> None:
    rng = random.Random(25)
    for _ in range(2000):
        data = _random_input(rng)
        harness.test_one_input(data)
