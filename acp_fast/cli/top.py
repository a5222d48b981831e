"""``acp-fast top``: the live view of a host's /metrics (acp_fast/tools/top.py) parses its own arguments."""

from __future__ import annotations

from ..extras import require

HELP = "a live terminal view of a host's /metrics: top URL (top --help)"


def run(argv: list[str]) -> int:
    """The view's exit status; without the metrics extra (its exposition parser), one line and status 2."""
    require("metrics", "acp-fast top")
    from ..tools.top import main

    return main(argv)


__all__ = ["HELP", "run"]
