"""The demo agent without its session-start announcement: what a ``session/new`` costs in acp_fast itself.

    python -m acp_fast serve acp_fast.tools.bench.quiet_demo:QuietDemoAgent

``acp-fast bench`` runs it in the pipelined ``session/new`` rounds next to
``acp-fast demo`` (same start-up path, same answer, same bookkeeping), so
the table shows the framework's cost of a session apart from the demo's
``available_commands_update`` per session; the floor answers with a constant
and announces nothing, so only this row compares like with like.
"""

from __future__ import annotations

from ...agent.base import Agent
from ...demo import DemoAgent


class QuietDemoAgent(DemoAgent):
    """DemoAgent with the base class's start hook, which the server never schedules (R22)."""

    on_session_start = Agent.on_session_start


__all__ = ["QuietDemoAgent"]
