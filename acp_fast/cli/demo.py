"""``acp-fast demo``: the embedded demo agent, over stdio or with ``--listen``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..agent.base import Agent
from .launch import launch


def register(sub: argparse._SubParsersAction[Any], common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", parents=[common], help="run the embedded demo agent")
    demo.add_argument("--pace-ms", type=float, default=20.0, help="delay between streamed words")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    launch(args, lambda: _one(args.pace_ms), lambda: _per_connection(args.pace_ms))


def _one(pace_ms: float) -> Agent:
    from ..demo import DemoAgent

    return DemoAgent(pace_ms=pace_ms)


def _per_connection(pace_ms: float) -> Callable[[], Agent]:
    from ..demo import DemoAgent

    # Session ids unique in the process: the host parks sessions by id.
    return lambda: DemoAgent(pace_ms=pace_ms, unique_ids=True)


__all__ = ["register", "run"]
