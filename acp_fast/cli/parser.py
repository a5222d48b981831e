"""The ``acp-fast`` argument parser: ``--version`` and one sub-parser per sub-command.

``demo`` and ``serve`` register their own sub-parsers and the function that
runs them (``args.run``). A tool's module (``client``, ``top``, ``bench``)
gives its one-line help and its entry point: its sub-parser takes no argument
of its own, and everything after the sub-command goes whole, in order, ``--``
included, to the tool, which parses it and writes its own help.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .._version import __version__
from ..agent import validate
from ..wire.framing import IMPLEMENTATION as FRAMER_IMPLEMENTATION
from . import bench, client, demo, options, serve, top

#: A tool's entry point: its arguments in, its exit status out.
Tool = Callable[[list[str]], int]


class CommandParser(argparse.ArgumentParser):
    """A sub-command's parser; given ``tool``, it hands its arguments to that tool unparsed."""

    def __init__(self, *args: Any, tool: Tool | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool = tool

    def parse_known_args(  # type: ignore[override]  # the one call argparse makes on a sub-parser
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.tool is None:
            return super().parse_known_args(args, namespace)
        namespace = argparse.Namespace() if namespace is None else namespace
        tool, argv = self.tool, list(sys.argv[1:] if args is None else args)
        namespace.run = lambda _args: _exit(tool(argv))
        return namespace, []


def _exit(status: int) -> NoReturn:
    raise SystemExit(status)


class _Version(argparse.Action):
    """``--version``: built when asked, since naming the --validate schema reads files."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(
            f"acp-fast {__version__} (framer: {FRAMER_IMPLEMENTATION})\n--validate schema: {validate.describe()}\n"
        )
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; ``args.run(args)`` runs what it names."""
    parser = argparse.ArgumentParser(
        prog="acp-fast",
        description="Serve an Agent Client Protocol agent over stdio (JSON-RPC, one message per line).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version, and the --validate schema")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    common = options.common_parser()
    demo.register(sub, common)
    serve.register(sub, common)
    for name, tool in (("client", client), ("top", top), ("bench", bench)):
        sub.add_parser(name, add_help=False, help=tool.HELP, tool=tool.run)
    return parser


__all__ = ["CommandParser", "Tool", "build_parser"]
