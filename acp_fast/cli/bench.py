"""``acp-fast bench``: the end-to-end benchmark (acp_fast/tools/bench) parses its own arguments."""

from __future__ import annotations

HELP = "benchmark acp_fast, the official SDK, a floor and any ACP agent (bench --help)"


def run(argv: list[str]) -> int:
    """The benchmark's exit status."""
    from ..tools.bench.driver import main

    return main(argv)


__all__ = ["HELP", "run"]
