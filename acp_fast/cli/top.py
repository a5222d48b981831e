"""``acp-fast top``: the live view of a host's /metrics (acp_fast/tools/top.py) parses its own arguments."""

from __future__ import annotations

import argparse
from typing import Any

from ..extras import require


def register(sub: argparse._SubParsersAction[Any]) -> None:
    sub.add_parser(
        "top", add_help=False, help="a live terminal view of a host's /metrics: top URL (top --help)", tool=run
    )


def run(argv: list[str]) -> int:
    """The view's exit status; without the metrics extra (its exposition parser), one line and status 2."""
    require("metrics", "acp-fast top")
    from ..tools.top import main

    return main(argv)


__all__ = ["register", "run"]
