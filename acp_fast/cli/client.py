"""``acp-fast client``: the terminal client (acp_fast/tools/client) parses its own arguments."""

from __future__ import annotations

HELP = "talk to an agent: client -- CMD ARGS, or client URL (client --help)"


def run(argv: list[str]) -> int:
    """The console's exit status (its table is ``acp-fast client --help``)."""
    from ..tools.client.console import main

    return main(argv)


__all__ = ["HELP", "run"]
