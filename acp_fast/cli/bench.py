"""``acp-fast bench``: the end-to-end benchmark (acp_fast/tools/bench) parses its own arguments."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    sub.add_parser(
        "bench",
        add_help=False,
        help="benchmark acp_fast, the official SDK, a floor and any ACP agent (bench --help)",
        tool=run,
    )


def run(argv: list[str]) -> int:
    """The benchmark's exit status."""
    from ..tools.bench.driver import main

    return main(argv)


__all__ = ["register", "run"]
