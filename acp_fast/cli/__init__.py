"""Command line: ``acp-fast demo``, ``acp-fast serve module:Class``, and the tools ``client``, ``top``, ``bench``.

One module per sub-command, each registering its sub-parser in ``parser``:
``demo`` and ``serve`` take the flags of ``options`` and run through
``launch`` (stdio) or ``listen`` (``--listen``); ``client``, ``top`` and
``bench`` hand their arguments to the tool under ``acp_fast.tools``, imported
only when that sub-command runs. Logs go to stderr only (stdout carries
nothing but ACP messages).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..extras import MissingExtra
from .parser import build_parser


def main(argv: Sequence[str] | None = None) -> None:
    """``acp-fast ARGS``; a missing extra is one line and exit status 2."""
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        args.run(args)
    except MissingExtra as exc:
        sys.stderr.write(f"acp-fast: {exc}\n")
        raise SystemExit(2) from None


__all__ = ["main"]
