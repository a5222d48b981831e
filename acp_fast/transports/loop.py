"""Choosing the event loop, once per process, for every transport."""

from __future__ import annotations

import asyncio
import sys


def install_event_loop_policy() -> str:
    """Use uvloop where it exists; say so on stderr where it does not."""
    try:
        import uvloop
    except ImportError:
        print("acp_fast: uvloop not available, using the default asyncio loop", file=sys.stderr)
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"
