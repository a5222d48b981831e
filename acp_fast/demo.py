"""The embedded demo agent: deterministic, streaming, cancellable, usable by any ACP client.

Prompt commands (the text of the first text block):

- ``stream N DELAY_MS``: N ``agent_message_chunk`` updates DELAY_MS apart,
  then ``end_turn`` (the benchmarks' workload);
- ``read PATH``: reads PATH through ``fs/read_text_file`` when the client
  allows it and reports its size;
- ``write PATH TEXT``: writes TEXT through ``fs/write_text_file``;
- ``tool``: a pretend tool call that asks permission first;
- ``mcp SERVER_ID``: connects to an MCP server the client declared with
  ``{"type": "acp"}`` and reports the names from its ``tools/list``;
- ``plan``: a two-step plan through plan operations (``plan_update``,
  ``plan_removed``) and a notice, each when the client opted in; the
  ``plan`` update of old clients otherwise;
- ``system``: says which system prompt the session was opened with;
- anything else: a long deterministic answer, streamed word by word at the
  configured pace.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import orjson

from .agent.base import Agent, current_turn
from .agent.client_handle import CapabilityNotSupported
from .agent.mcp_bridge import McpProvider
from .agent.sessions import new_session_id
from .wire.errors import InvalidParams, MethodNotFound
from .wire.jsonrpc import raw

MODES = [
    {"id": "ask", "name": "Ask", "description": "Answer without touching files"},
    {"id": "code", "name": "Code", "description": "May read and write files"},
]
MODELS = [{"value": "demo-small", "name": "Demo small"}, {"value": "demo-large", "name": "Demo large"}]
_MODE_IDS = frozenset(m["id"] for m in MODES)
_MODEL_VALUES = frozenset(m["value"] for m in MODELS)
COMMANDS: list[dict[str, Any]] = [
    {"name": "stream", "description": "stream N chunks DELAY_MS apart", "input": {"hint": "N DELAY_MS"}},
    {"name": "tool", "description": "run a pretend tool after asking permission"},
    {"name": "plan", "description": "make, complete and dismiss a two-step plan"},
    {"name": "system", "description": "say which system prompt this session has"},
]
PLAN_STEPS = ["Read the question", "Answer it"]
_COMMANDS_RAW = raw(orjson.dumps(COMMANDS))  # sent to every new session: encoded once
ANSWER = (
    "acp_fast streams this answer one word at a time so that you can watch a long "
    "prompt and cancel it halfway: the cancel is handled on the control lane and "
    "never waits behind the prompt. "
) * 4


def _prompt_text(prompt: list[dict[str, Any]]) -> str:
    for block in prompt:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"]).strip()
    return ""


class DemoMcpProvider(McpProvider):
    """Hosts one MCP server, ``demo-tools``, with an ``echo`` tool (MCP over ACP, R17)."""

    SERVER_ID = "demo-tools"
    TOOLS: ClassVar[list[dict[str, Any]]] = [
        {"name": "echo", "description": "echo the text back", "inputSchema": {"type": "object"}}
    ]

    async def connect(self, server_id: str) -> str:
        if server_id != self.SERVER_ID:
            raise InvalidParams(f"unknown MCP server {server_id!r}", {"serverId": server_id})
        return server_id

    async def message(self, handle: Any, method: str, params: dict[str, Any] | None, *, is_request: bool) -> Any:
        params = params or {}
        if method == "initialize":
            return {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": self.SERVER_ID, "version": "0.1.0"},
            }
        if method == "tools/list":
            return {"tools": self.TOOLS}
        if method == "tools/call":
            text = str((params.get("arguments") or {}).get("text", ""))
            return {"content": [{"type": "text", "text": text}], "isError": False}
        if method == "ping" or not is_request:
            return {}
        raise MethodNotFound(f"Method not found: {method}", {"method": method})


def _plan_entry(content: str, status: str) -> dict[str, Any]:
    return {"content": content, "priority": "medium", "status": status}


def _system_prompt_summary(system_prompt: dict[str, Any]) -> str:
    text = " ".join(b["text"] for b in system_prompt.get("content", ()) if isinstance(b.get("text"), str))
    return f"{system_prompt.get('mode')}, {text!r}"


def _model_option(value: str) -> dict[str, Any]:
    return {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": value,
        "options": MODELS,
    }


#: What a new, loaded or resumed session starts with; built once. The lists go out
#: already encoded (``raw``): they never change, and encoding them again was a large share of
#: writing a session/new answer. ``currentModeId`` stays a plain value: the server reads it.
_SESSION_STATE: dict[str, Any] = {
    "modes": {"currentModeId": "ask", "availableModes": raw(orjson.dumps(MODES))},
    "configOptions": raw(orjson.dumps([_model_option("demo-small")])),
}


class DemoAgent(Agent):
    """A deterministic agent for demos, interop tests and benchmarks."""

    mcp_over_acp = True
    system_prompt_modes = frozenset({"append", "override"})

    def __init__(self, pace_ms: float = 20.0, *, unique_ids: bool = False) -> None:
        """``unique_ids``: session ids unique in the process (hosting parks sessions by id), not demo-1, demo-2..."""
        self.mcp_provider = DemoMcpProvider()
        self.pace_s = pace_ms / 1000.0
        self.unique_ids = unique_ids
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.cwd: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self.system_prompts: dict[str, dict[str, Any]] = {}

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return {
            "agentInfo": {"name": "acp-fast-demo", "title": "acp_fast demo agent", "version": "0.1.0"},
            "agentCapabilities": {"promptCapabilities": {"embeddedContext": True}},
        }

    def _session_state(self) -> dict[str, Any]:
        return dict(_SESSION_STATE)  # shared inner values: the server only reads them

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        session_id = new_session_id("demo-") if self.unique_ids else f"demo-{len(self.cwd) + 1}"
        self.cwd[session_id] = cwd  # the history list is made by the first prompt
        if kwargs:
            self._keep_system_prompt(session_id, kwargs)
        return {"sessionId": session_id, **_SESSION_STATE}

    def _keep_system_prompt(self, session_id: str, kwargs: dict[str, Any]) -> None:
        """The server passes ``system_prompt`` only when the client sent one, checked against our modes."""
        system_prompt = kwargs.get("system_prompt")
        if system_prompt is not None:
            self.system_prompts[session_id] = system_prompt

    async def load_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if session_id not in self.cwd:
            raise InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})
        self._keep_system_prompt(session_id, kwargs)
        for update in self.history.get(session_id, ()):  # replay before answering
            await self.client.session_update(session_id, update)
        return self._session_state()

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if session_id not in self.cwd:
            raise InvalidParams(f"unknown session {session_id!r}", {"sessionId": session_id})
        self._keep_system_prompt(session_id, kwargs)
        return self._session_state()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> dict[str, Any]:
        if cursor is not None:
            raise InvalidParams(f"unknown cursor {cursor!r}")
        return {
            "sessions": [
                {"sessionId": sid, "cwd": c, "title": self.titles.get(sid, sid)}
                for sid, c in self.cwd.items()
                if cwd is None or c == cwd
            ]
        }

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def delete_session(self, session_id: str, **kwargs: Any) -> None:
        self.cwd.pop(session_id, None)
        self.history.pop(session_id, None)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        if mode_id not in _MODE_IDS:
            raise InvalidParams(f"unknown mode {mode_id!r}", {"modeId": mode_id})

    async def set_config_option(
        self, session_id: str, config_id: str, value: str | bool, **kwargs: Any
    ) -> dict[str, Any]:
        if config_id != "model" or value not in _MODEL_VALUES:
            raise InvalidParams(f"unknown option {config_id!r}={value!r}", {"configId": config_id})
        return {"configOptions": [_model_option(str(value))]}

    def detach_session(self, session_id: str) -> Any:
        """Hosting: the session's history travels to the instance that re-attaches it."""
        return (
            self.cwd.pop(session_id, None),
            self.history.pop(session_id, None),
            self.titles.pop(session_id, None),
            self.system_prompts.pop(session_id, None),
        )

    def attach_session(self, session_id: str, state: Any) -> None:
        cwd, history, title, system_prompt = state
        if system_prompt is not None:
            self.system_prompts[session_id] = system_prompt
        if cwd is not None:
            self.cwd[session_id] = cwd
        if history is not None:
            self.history[session_id] = history
        if title is not None:
            self.titles[session_id] = title

    async def on_session_start(self, session_id: str) -> None:
        await self.client.available_commands_update(session_id, _COMMANDS_RAW)
        system_prompt = self.system_prompts.get(session_id)
        if system_prompt is not None and self.client.supports_update("notice"):
            await self.client.notice(
                session_id, "System prompt applied", description=f"{_system_prompt_summary(system_prompt)}"
            )

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        text = _prompt_text(prompt)
        self.history.setdefault(session_id, []).append(
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}
        )
        words = text.split()
        if words[:1] == ["stream"] and len(words) == 3 and words[1].isdigit():
            await self._stream(session_id, int(words[1]), float(words[2]) / 1000.0)
        elif words[:1] == ["read"] and len(words) == 2:
            await self._read(session_id, words[1])
        elif words[:1] == ["write"] and len(words) >= 3:
            await self.client.write_text_file(session_id, words[1], " ".join(words[2:]))
            await self.client.agent_message_chunk(session_id, f"wrote {words[1]}")
        elif words == ["tool"]:
            return await self._tool(session_id)
        elif words[:1] == ["mcp"] and len(words) == 2:
            await self._mcp(session_id, words[1])
        elif words == ["plan"]:
            await self._plan(session_id)
        elif words == ["system"]:
            system_prompt = self.system_prompts.get(session_id)
            summary = "no system prompt" if system_prompt is None else "system prompt: "
            if system_prompt is not None:
                summary += _system_prompt_summary(system_prompt)
            await self.client.agent_message_chunk(session_id, summary)
        else:
            await self._answer(session_id)
        return {"stopReason": "end_turn"}

    async def _stream(self, session_id: str, n: int, delay_s: float) -> None:
        token = current_turn().token
        for i in range(n):
            if token.cancelled:
                return
            await self.client.agent_message_chunk(session_id, f"chunk {i} ", message_id="m1")
            # Yield every chunk even at full speed, so a cancel is handled promptly.
            await asyncio.sleep(delay_s)

    async def _answer(self, session_id: str) -> None:
        for word in ANSWER.split(" "):
            await self.client.agent_message_chunk(session_id, word + " ")
            await asyncio.sleep(self.pace_s)
        self.history[session_id].append(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ANSWER}}
        )

    async def _plan(self, session_id: str) -> None:
        """Plan operations for a client that opted in (``plan``), the whole-plan update otherwise."""
        client = self.client
        if not client.supports_update("plan_update"):
            await client.plan(session_id, [_plan_entry(step, "completed") for step in PLAN_STEPS])
        else:
            await client.plan_update(session_id, "demo-plan", entries=[_plan_entry(s, "pending") for s in PLAN_STEPS])
            await client.plan_update(session_id, "demo-notes", markdown="## Notes\n- nothing to add")
            await client.plan_update(
                session_id, "demo-plan", entries=[_plan_entry(s, "completed") for s in PLAN_STEPS]
            )
            await client.plan_removed(session_id, "demo-notes")
        if client.supports_update("notice"):
            await client.notice(session_id, "Plan finished", description=f"{len(PLAN_STEPS)} steps completed")
        await client.agent_message_chunk(session_id, f"planned {len(PLAN_STEPS)} steps")

    async def _mcp(self, session_id: str, server_id: str) -> None:
        conn = await self.client.connect_mcp(server_id)
        try:
            await conn.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "acp-fast-demo", "version": "0.1.0"}})
            await conn.notify("notifications/initialized")
            listed = await conn.request("tools/list", {})
        finally:
            await conn.close()
        names = ", ".join(t.get("name", "?") for t in listed.get("tools", []))
        await self.client.agent_message_chunk(session_id, f"{server_id} offers: {names}")

    async def _read(self, session_id: str, path: str) -> None:
        try:
            result = await self.client.read_text_file(session_id, path)
        except CapabilityNotSupported:
            await self.client.agent_message_chunk(session_id, "the client does not let me read files")
            return
        content = result.get("content", "")
        await self.client.agent_message_chunk(session_id, f"{path} has {len(content)} characters")

    async def _tool(self, session_id: str) -> dict[str, Any]:
        call_id = f"call-{time.monotonic_ns()}"
        await self.client.tool_call(session_id, call_id, "Pretend to list files", kind="read", status="pending")
        outcome = await self.client.request_permission(
            session_id,
            {"toolCallId": call_id, "title": "Pretend to list files"},
            [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        )
        chosen = outcome.get("outcome", {})
        if chosen.get("outcome") == "cancelled":
            return {"stopReason": "cancelled"}
        if chosen.get("optionId") != "allow":
            await self.client.tool_call_update(session_id, call_id, status="failed")
            await self.client.agent_message_chunk(session_id, "permission refused")
            return {"stopReason": "end_turn"}
        await self.client.tool_call_update(session_id, call_id, status="in_progress")
        await self.client.tool_call_update(
            session_id,
            call_id,
            status="completed",
            content=[{"type": "content", "content": {"type": "text", "text": "a.txt\nb.txt"}}],
        )
        await self.client.agent_message_chunk(session_id, "the tool listed 2 files")
        return {"stopReason": "end_turn"}
