"""The container build: its base image is an argument, and the build context leaves local state out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dockerfile_takes_its_base_image_as_an_argument() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    arg = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert arg is not None and arg.start() < text.index("FROM"), "ARG PYTHON_IMAGE must precede the first FROM"
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(f == "${PYTHON_IMAGE}" for f in froms), froms


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    entries = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    for needed in (".git", ".venv", "build", "tests/interop/node_modules", "**/*.so", "**/__pycache__"):
        assert needed in entries, needed
    copied = re.findall(r"^COPY (?!--from)(.+?) \S+$", (ROOT / "deploy" / "Dockerfile").read_text(), re.M)
    for sources in copied:
        for src in sources.split():
            assert src.rstrip("*") not in entries, f"{src} is copied but ignored"
