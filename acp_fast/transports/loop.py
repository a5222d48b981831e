"""Choosing the event loop for a process entry, without touching process-wide policy."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable


def event_loop_factory(use_uvloop: bool = True) -> tuple[Callable[[], asyncio.AbstractEventLoop], str]:
    """A loop factory for ``asyncio.Runner`` and its name: uvloop where it exists.

    A factory rather than ``set_event_loop_policy`` (deprecated from 3.14, and
    process-wide): only the loop this entry runs is a uvloop one.
    """
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            print("acp_fast: uvloop not available, using the default asyncio loop", file=sys.stderr)
        else:
            return uvloop.new_event_loop, "uvloop"
    return asyncio.new_event_loop, "asyncio"
