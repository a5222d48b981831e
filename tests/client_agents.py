"""Small agents for the ``acp-fast client`` tests: each prompt word asks the client for one thing.

- ``read PATH`` / ``write PATH TEXT``: an fs request; the answer (or the error code) is reported as text;
- ``terminal``: asks for a terminal the client does not advertise (past the gate) and reports the error;
- ``stop REASON``: ends the turn with that stop reason;
- ``fail``: answers the prompt with a JSON-RPC error;
- ``die``: the process exits in the middle of the turn.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from acp_fast import Agent
from acp_fast.wire.errors import AcpError, InvalidParams


class ProbeAgent(Agent):
    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        words = str(prompt[0].get("text", "")).split()
        say = self.client.agent_message_chunk
        try:
            if words[:1] == ["read"]:
                result = await self.client.request("fs/read_text_file", {"sessionId": session_id, "path": words[1]})
                await say(session_id, f"read ok: {result['content']!r}")
            elif words[:1] == ["write"]:
                params = {"sessionId": session_id, "path": words[1], "content": " ".join(words[2:])}
                await self.client.request("fs/write_text_file", params)
                await say(session_id, "write ok")
            elif words == ["terminal"]:
                # Past the capability gate (the client does not advertise terminals): the client's own refusal.
                await self.client._conn.send_request("terminal/create", {"sessionId": session_id, "command": "true"})
                await say(session_id, "terminal ok")
        except AcpError as exc:
            await say(session_id, f"refused {exc.code}: {exc}")
        if words[:1] == ["stop"]:
            return {"stopReason": words[1]}
        if words == ["fail"]:
            raise InvalidParams("this agent fails on purpose")
        if words == ["die"]:
            sys.stdout.flush()
            os._exit(9)
        return {"stopReason": "end_turn"}
