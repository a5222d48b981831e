"""The WebSocket floor for ``acp-fast bench --hosting``: the least a Python agent can do per message.

    python -P acp_fast/tools/bench/ws_floor.py PORT

The WebSocket twin of echo_floor.py: picows + uvloop + orjson and nothing
else (run as a script it imports nothing of acp_fast). Each text frame is one
JSON-RPC message and each answer leaves as one text frame. It answers what the
hosting bench sends: ``initialize``, ``session/new`` (a fresh ``sessionId``),
``session/prompt`` with ``stream N DELAY_MS`` (N ``session/update``
notifications shaped as the demo agent's chunks, each built as a dict and
encoded with orjson, sleeping DELAY_MS after each so it yields every chunk as
the demo agent does), and ``session/cancel``, which cancels that prompt and
answers it ``stopReason: "cancelled"``. Anything else is answered ``{}``.

Producers wait while the socket is above picows' high-water mark, as any sane
agent's would. It validates nothing and keeps no limits: it is a yardstick for
what acp_fast adds per message (dispatch, its Writer, the contract), not an agent.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import uvloop
from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_create_server

_TEXT = WSMsgType.TEXT
_EMPTY = orjson.Fragment(b"{}")
_INIT = orjson.Fragment(b'{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}')


class FloorAgent(WSListener):
    def __init__(self) -> None:
        self.ws: WSTransport | None = None
        self.sessions = 0
        self.prompts: dict[str, asyncio.Task[None]] = {}
        self.writable: asyncio.Future[None] | None = None

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.ws = transport

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type is _TEXT:
            self.handle(orjson.loads(frame.get_payload_as_memoryview()))
        elif frame.msg_type is WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        for task in list(self.prompts.values()):
            task.cancel()

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def send(self, message: dict[str, Any]) -> None:
        assert self.ws is not None
        self.ws.send(_TEXT, orjson.dumps(message))

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if "id" not in msg:
            if method == "session/cancel":
                task = self.prompts.get(msg["params"]["sessionId"])
                if task is not None:
                    task.cancel()
            return
        rid = msg["id"]
        if method == "initialize":
            result: Any = _INIT
        elif method == "session/new":
            self.sessions += 1
            result = {"sessionId": f"floor-{self.sessions}"}
        elif method == "session/prompt":
            params = msg["params"]
            sid = params["sessionId"]
            words = params["prompt"][0]["text"].split()
            n, delay = (int(words[1]), float(words[2]) / 1000.0) if words[:1] == ["stream"] else (0, 0.0)
            self.prompts[sid] = asyncio.get_running_loop().create_task(self.stream(rid, sid, n, delay))
            return
        else:
            result = _EMPTY
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    async def stream(self, rid: Any, sid: str, n: int, delay: float) -> None:
        stop = "end_turn"
        try:
            for i in range(n):
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"chunk {i} "},
                    "messageId": "m1",
                }
                params = {"sessionId": sid, "update": update}
                self.send({"jsonrpc": "2.0", "method": "session/update", "params": params})
                if self.writable is not None:
                    await self.writable
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            stop = "cancelled"
        finally:
            del self.prompts[sid]
        if self.ws is not None and not self.ws.is_disconnected:
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": stop}})


async def main(port: int) -> None:
    server = await ws_create_server(
        lambda _request: FloorAgent(),
        "127.0.0.1",
        port,
        backlog=4096,
        read_buffer_init_size=2048,
        use_aiofastnet=False,
    )
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1])))
