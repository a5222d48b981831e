"""An offline, scripted OpenAI-compatible model server on 127.0.0.1 for the real-agent tests.

It speaks just enough HTTP/1.1 for the agents' HTTP clients: ``POST .../chat/completions``
(streamed as server-sent events when the request asks for ``stream``, else one JSON body) and
``GET .../models``. What it answers is decided by the conversation it is sent, never by time:

- the last message is a tool result: the text ``TOOL_DONE`` (the turn ends);
- the last text of the last user message contains ``WRITE``: one tool call, ``tool_name`` with ``tool_args`` from the
  script (a file write the agent asks the client's permission for);
- the last text of the last user message contains ``LONG``: the first chunk ``LONG_FIRST``, then nothing until the
  agent hangs up (it is cancelled mid-stream) or ``hold_s`` passes, then ``LONG_REST``;
- it contains ``STORY``: the words ``w1 ``, ``w2 ``, ... one chunk each, without end, until the agent hangs up
  (it is cancelled while the words flow) or ``STORY_MAX`` words or ``hold_s`` have gone;
- anything else: ``HELLO_REPLY`` in three chunks.

Every request is appended to a JSON-lines log (path, the last message's role and the
reply kind), so a test can check that the agent talked to this server and to nothing else.

Run: ``python fake_model.py SCRIPT.json``; it prints ``PORT <n>`` on stdout once listening.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

HELLO_REPLY = ["Hello ", "from the ", "fake model."]
TOOL_DONE = "The file is written."
LONG_FIRST = "Counting: 1"
LONG_REST = [", 2", ", 3."]
#: The story's words at most, and the pause between two (a model's pace, not a test's clock).
STORY_MAX = 20_000
STORY_PAUSE_S = 0.002


def story_word(n: int) -> str:
    return f"w{n} "


def _text_of(content: Any) -> str:
    """The last text part of a message (an agent may merge a cancelled turn's user text with
    the next one into one message of several parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text")]
        return texts[-1] if texts else ""
    return ""


def reply_kind(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages:
        return "hello"
    last = messages[-1]
    if last.get("role") == "tool":
        return "tool_done"
    users = [m for m in messages if m.get("role") == "user"]
    text = _text_of(users[-1].get("content")) if users else ""
    if "STORY" in text:
        return "story"
    if "WRITE" in text:
        return "tool_call"
    if "LONG" in text:
        return "long"
    return "hello"


class FakeModel:
    def __init__(self, script: dict[str, Any]) -> None:
        self.script = script
        self.log_path: str = script["log"]
        self.hold_s = float(script.get("hold_s", 30))
        self.calls = 0

    def _log(self, entry: dict[str, Any]) -> None:
        with open(self.log_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        route = path.split("?", 1)[0]
        if method == "GET" and route.endswith("/models"):
            self._log({"method": method, "path": route})
            model = self.script.get("model", "fake-model")
            await self._json(writer, 200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            return True
        if method != "POST" or not route.endswith("/chat/completions"):
            self._log({"method": method, "path": route, "unexpected": True})
            await self._json(writer, 404, {"error": {"message": f"no route {route}"}})
            return True
        body = json.loads(raw or b"{}")
        kind = reply_kind(body)
        self.calls += 1
        last = (body.get("messages") or [{}])[-1]
        self._log({"method": method, "path": route, "kind": kind, "last_role": last.get("role"),
                   "stream": bool(body.get("stream")), "tools": len(body.get("tools") or []),
                   "last_text": _text_of(last.get("content"))[:200]})
        if body.get("stream"):
            await self._stream(writer, body, kind)
            return False
        await self._json(writer, 200, self._whole(body, kind))
        return True

    async def _json(self, writer: asyncio.StreamWriter, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        writer.write(head.encode() + data)
        await writer.drain()

    def _chunk(self, body: dict[str, Any], delta: dict[str, Any], finish: str | None = None,
               usage: dict[str, int] | None = None) -> bytes:
        obj: dict[str, Any] = {
            "id": f"chatcmpl-{self.calls}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    async def _stream(self, writer: asyncio.StreamWriter, body: dict[str, Any], kind: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                     b"connection: close\r\n\r\n")
        usage = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}

        async def send(delta: dict[str, Any], finish: str | None = None, last: bool = False) -> None:
            writer.write(self._chunk(body, delta, finish, usage if last else None))
            await writer.drain()

        await send({"role": "assistant", "content": ""})
        if kind == "tool_call":
            call = {"index": 0, "id": "call_fake_1", "type": "function",
                    "function": {"name": self.script["tool_name"], "arguments": ""}}
            await send({"tool_calls": [call]})
            await send({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(self.script["tool_args"])}}]})
            await send({}, "tool_calls", last=True)
        elif kind == "story":
            if await self._story(writer, send):
                return
            await send({}, "stop", last=True)
        elif kind == "long":
            await send({"content": LONG_FIRST})
            # Held until the agent hangs up (its prompt was cancelled) or hold_s passes.
            try:
                await asyncio.wait_for(self._hung_up(writer), self.hold_s)
                self._log({"event": "long stream: the agent hung up"})
                return
            except TimeoutError:
                self._log({"event": "long stream: hold_s passed"})
            for piece in LONG_REST:
                await send({"content": piece})
            await send({}, "stop", last=True)
        else:
            pieces = [TOOL_DONE] if kind == "tool_done" else HELLO_REPLY
            for piece in pieces:
                await send({"content": piece})
            await send({}, "stop", last=True)
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()

    async def _story(self, writer: asyncio.StreamWriter, send: Any) -> bool:
        """Words until the agent hangs up (True) or the story runs out."""
        start = time.monotonic()
        for n in range(1, STORY_MAX + 1):
            try:
                await send({"content": story_word(n)})
            except ConnectionError:
                break
            if writer.transport.is_closing():
                break
            if time.monotonic() - start > self.hold_s:
                self._log({"event": "story stream: hold_s passed", "words": n})
                return False
            await asyncio.sleep(STORY_PAUSE_S)
        else:
            self._log({"event": "story stream: ran out", "words": STORY_MAX})
            return False
        self._log({"event": "story stream: the agent hung up"})
        return True

    @staticmethod
    async def _hung_up(writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        while not transport.is_closing():
            # A closed peer shows up as a failed write; the probe is an SSE comment, which
            # clients ignore.
            writer.write(b": keep-alive\n\n")
            try:
                await writer.drain()
            except ConnectionError:
                return
            await asyncio.sleep(0.05)

    def _whole(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if kind == "tool_call":
            message["tool_calls"] = [{"id": "call_fake_1", "type": "function", "function": {
                "name": self.script["tool_name"], "arguments": json.dumps(self.script["tool_args"])}}]
            finish = "tool_calls"
        elif kind == "tool_done":
            message["content"] = TOOL_DONE
        elif kind == "long":
            message["content"] = LONG_FIRST + "".join(LONG_REST)
        elif kind == "story":
            message["content"] = "".join(story_word(n) for n in range(1, 4))
        else:
            message["content"] = "".join(HELLO_REPLY)
        return {"id": f"chatcmpl-{self.calls}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}


async def main(script: dict[str, Any]) -> None:
    model = FakeModel(script)
    server = await asyncio.start_server(model.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    async with server:
        # Serves until stdin closes: the test that started it owns its lifetime.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
