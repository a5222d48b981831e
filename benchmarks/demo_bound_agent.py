"""The least a Python agent can spend on the demo's ``session/new``: the floor plus the demo's own work.

    python benchmarks/pipelined_ratios.py --agent "python benchmarks/demo_bound_agent.py" --label bound

The echo floor (``acp_fast/tools/bench/echo_floor.py``) answers ``session/new``
with a constant and keeps nothing. Every ACP agent does more per session,
and the goal "``session/new`` at half the floor's rate" is read on the demo
agent, so this agent measures where that goal sits: the floor's loop and
writer, with no dispatch framework, doing per ``session/new`` only what the
demo requires of any server:

- the params checked as the demo's method table checks them (``cwd`` an
  absolute path, ``mcpServers`` an array);
- the demo agent's own ``new_session`` and ``on_session_start`` called,
  unchanged (``acp_fast.demo.DemoAgent``), with a client whose
  ``available_commands_update`` writes the same line acp_fast writes;
- a session record kept (``acp_fast.agent.sessions.Session``);
- the start callbacks run after the answers of the read chunk are queued,
  each in a context of its own, as acp_fast runs them.

It skips what acp_fast adds for the rest of its contract (ordered handlers,
per-request bookkeeping for exactly-once answers, limits, backpressure,
suspending callbacks), so its rate is an upper bound for any agent doing
the demo's work in Python on this loop, not a competitor.
"""

from __future__ import annotations

import contextvars
import sys
from typing import Any

import orjson
import uvloop

from acp_fast.agent.sessions import Session
from acp_fast.demo import DemoAgent
from acp_fast.tools.bench import echo_floor

_NL = orjson.OPT_APPEND_NEWLINE


class _Client:
    """The one client call the demo's start callback makes, writing what acp_fast writes."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound

    async def available_commands_update(self, session_id: str, commands: Any) -> None:
        update = {"sessionUpdate": "available_commands_update", "availableCommands": commands}
        self.bound.write(
            orjson.dumps(
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}},
                option=_NL,
            )
        )


class Bound(echo_floor.Floor):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.agent = DemoAgent()
        self.agent.client = _Client(self)  # type: ignore[assignment]
        self.records: dict[str, Session] = {}
        self.to_start: list[str] = []

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        starts, self.to_start = self.to_start, []
        hook = self.agent.on_session_start
        for session_id in starts:  # after this chunk's answers, each in its own context
            coro = hook(session_id)
            try:
                contextvars.copy_context().run(coro.send, None)
            except StopIteration:
                pass
            else:
                raise RuntimeError("the demo's start callback suspended")

    def handle(self, msg: dict[str, Any]) -> None:
        if msg.get("method") != "session/new":
            super().handle(msg)
            return
        params = msg.get("params")
        cwd = params.get("cwd") if type(params) is dict else None
        mcp = params.get("mcpServers") if type(params) is dict else None
        if type(cwd) is not str or not cwd.startswith("/") or type(mcp) is not list:
            error = {"code": -32602, "message": "Invalid params for session/new"}
            self.write(orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}, option=_NL))
            return
        coro = self.agent.new_session(cwd=cwd, mcp_servers=mcp, additional_directories=None)
        try:
            coro.send(None)
            raise RuntimeError("the demo's new_session suspended")
        except StopIteration as stop:
            result = stop.value
        session_id = result["sessionId"]
        self.records[session_id] = Session(session_id, cwd, mcp)
        self.write(orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, option=_NL))
        self.to_start.append(session_id)


if __name__ == "__main__":
    import gc

    from acp_fast.agent.serve import YOUNG_GC_THRESHOLD

    gc.freeze()  # the collector as acp-fast demo sets it
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    uvloop.run(echo_floor.main(Bound))
    sys.exit(0)
