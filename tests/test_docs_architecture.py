"""docs/ARCHITECTURE.md names code that exists: every `path.py:Name.attr` it cites resolves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
REF = re.compile(r"`([\w/]+)\.py:([\w.]+)`")


def _refs() -> list[tuple[str, str]]:
    return sorted(set(REF.findall(DOC.read_text())))


def test_the_architecture_doc_cites_code() -> None:
    assert len(_refs()) > 40


@pytest.mark.parametrize(("path", "dotted"), _refs(), ids=lambda v: str(v))
def test_every_cited_name_exists(path: str, dotted: str) -> None:
    if path.startswith("compat/"):
        pytest.importorskip("acp")
    module = importlib.import_module("acp_fast." + path.replace("/", "."))
    obj: object = module
    for part in dotted.split("."):
        assert hasattr(obj, part), f"docs/ARCHITECTURE.md cites {path}.py:{dotted}; {part!r} is not there"
        obj = getattr(obj, part)
