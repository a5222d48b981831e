"""The floor for ``acp-fast bench``: the least a Python process can do per message.

    python -P acp_fast/tools/bench/echo_floor.py

uvloop + orjson and nothing else; run as a script, it imports nothing of
acp_fast. Every request line is answered with a response line at once
(``session/new`` with a fresh ``sessionId`` and two modes, so the bench's
cheap request is the same ``session/set_mode`` as for the demo agents;
anything else with ``{}``), so the driver measures the bare pipe round trip through
one Python process. The only state it keeps is what the benchmark workload
needs to be answered at all: ``session/prompt`` with ``stream N DELAY_MS``
writes N ``session/update`` lines, sleeping DELAY_MS after each (so it yields
every chunk, as the demo agents do), and ``session/cancel`` cancels that task,
which answers ``stopReason: "cancelled"``.

Writes are coalesced per loop turn and wait while the pipe is full, as any
sane agent's are, so the floor is the cost of the protocol and the pipe, not
of a naive writer. It validates nothing: it is a yardstick, not an agent.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import orjson
import uvloop

_NL = orjson.OPT_APPEND_NEWLINE
_EMPTY = orjson.Fragment(b"{}")
_MODES = orjson.Fragment(
    b'{"currentModeId":"ask","availableModes":[{"id":"ask","name":"Ask"},{"id":"code","name":"Code"}]}'
)


class Floor(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, out: asyncio.WriteTransport, done: asyncio.Future[None]):
        self.loop = loop
        self.out = out
        self.done = done
        self.tail = b""
        self.chunks: list[bytes] = []
        self.flush_scheduled = False
        self.writable: asyncio.Future[None] | None = None
        self.sessions = 0
        self.prompts: dict[str, asyncio.Task[None]] = {}

    # -- output: one write per loop turn, producers wait while the pipe is full --
    def write(self, data: bytes) -> None:
        self.chunks.append(data)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        if self.chunks:
            data = b"".join(self.chunks)
            self.chunks.clear()
            self.out.write(data)

    def pause_writing(self) -> None:
        self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    # -- input ---------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        lines = (self.tail + data).split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            if line:
                self.handle(orjson.loads(line))

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if "id" not in msg:
            if method == "session/cancel":
                task = self.prompts.get(msg["params"]["sessionId"])
                if task is not None:
                    task.cancel()
            return
        rid = msg["id"]
        if method == "session/new":
            self.sessions += 1
            result: Any = {"sessionId": f"demo-{self.sessions}", "modes": _MODES}
        elif method == "session/prompt":
            params = msg["params"]
            sid = params["sessionId"]
            words = params["prompt"][0]["text"].split()
            n, delay = (int(words[1]), float(words[2]) / 1000.0) if words[:1] == ["stream"] else (0, 0.0)
            self.prompts[sid] = self.loop.create_task(self.stream(rid, sid, n, delay))
            return
        else:
            result = _EMPTY
        self.write(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, option=_NL))

    async def stream(self, rid: Any, sid: str, n: int, delay: float) -> None:
        stop = "end_turn"
        try:
            for i in range(n):
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"chunk {i} "},
                    "messageId": "m1",
                }
                self.write(
                    orjson.dumps(
                        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}},
                        option=_NL,
                    )
                )
                if self.writable is not None:
                    await self.writable
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            stop = "cancelled"
        finally:
            del self.prompts[sid]
        self.write(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": stop}}, option=_NL))

    def connection_lost(self, exc: Exception | None) -> None:
        for task in self.prompts.values():
            task.cancel()
        self.loop.call_soon(self.flush)
        self.loop.call_later(0.05, self.done.set_result, None)


class _Out(asyncio.Protocol):
    def __init__(self) -> None:
        self.floor: Floor | None = None

    def pause_writing(self) -> None:
        if self.floor is not None:
            self.floor.pause_writing()

    def resume_writing(self) -> None:
        if self.floor is not None:
            self.floor.resume_writing()


async def main(floor_cls: type[Floor] = Floor) -> None:
    """Serve stdin/stdout until EOF; ``floor_cls`` lets a variant of the floor reuse this set-up."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    out_proto = _Out()
    out, _ = await loop.connect_write_pipe(lambda: out_proto, os.fdopen(os.dup(1), "wb", buffering=0))
    floor = floor_cls(loop, out, done)
    out_proto.floor = floor
    await loop.connect_read_pipe(lambda: floor, os.fdopen(os.dup(0), "rb", buffering=0))
    await done
    out.close()


if __name__ == "__main__":
    uvloop.run(main())
    sys.exit(0)
