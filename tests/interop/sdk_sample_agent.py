"""An agent written purely against the official Python SDK (``acp``), served by acp_fast.

Nothing here knows about acp_fast except the one import marked below, which
is the whole migration. Run it as ``python tests/interop/sdk_sample_agent.py``
or ``python -m acp_fast serve tests.interop.sdk_sample_agent:SampleAgent``.

Prompt commands (the first text block):

- ``stream N DELAY_MS``: N agent message chunks DELAY_MS apart; stops with
  ``cancelled`` once ``cancel`` was called (the SDK way of cancelling);
- ``wait``: one chunk, then waits for ``release`` (or a cancel);
- ``tool``: a tool call that asks permission first;
- ``read PATH`` / ``write PATH TEXT``: fs through the client;
- ``fail``: raises ``RequestError.invalid_params``; ``crash``: raises RuntimeError;
  ``invalid``: builds an invalid model (pydantic ValidationError);
- anything else: echoed back as one chunk.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    SetSessionModeResponse,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    PermissionOption,
    PromptCapabilities,
    SessionMode,
    SessionModeState,
    TextContentBlock,
    ToolCallUpdate,
)

from acp_fast.compat import run_agent  # was: from acp import run_agent

MODES = [SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code")]


class SampleAgent(Agent):
    """Records what it was called with, so tests can check the SDK-shaped arguments."""

    def __init__(self) -> None:
        self.conn: Client | None = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.client_capabilities: ClientCapabilities | None = None
        self.sessions: dict[str, str] = {}
        self.cancelled: dict[str, asyncio.Event] = {}
        self.release = asyncio.Event()

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def _client(self) -> Client:
        assert self.conn is not None, "on_connect was not called"
        return self.conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.calls.append(("initialize", {"protocol_version": protocol_version, **kwargs}))
        self.client_capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(prompt_capabilities=PromptCapabilities(embedded_context=True)),
            agent_info=Implementation(name="sdk-sample", title="SDK sample agent", version="0.1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        self.calls.append(("new_session", {"cwd": cwd, "mcp_servers": mcp_servers, **kwargs}))
        session_id = f"sample-{len(self.sessions) + 1}"
        self.sessions[session_id] = "ask"
        self.cancelled[session_id] = asyncio.Event()
        return NewSessionResponse(
            session_id=session_id, modes=SessionModeState(current_mode_id="ask", available_modes=MODES)
        )

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse | None:
        self.calls.append(("set_session_mode", {"session_id": session_id, "mode_id": mode_id, **kwargs}))
        if mode_id not in {m.id for m in MODES}:
            raise RequestError.invalid_params({"modeId": mode_id})
        self.sessions[session_id] = mode_id
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("cancel", {"session_id": session_id, **kwargs}))
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("ext_method", {"method": method, "params": params}))
        return {"echo": method, "params": params}

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self.calls.append(("prompt", {"session_id": session_id, "prompt": prompt, **kwargs}))
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "").strip()
        words = text.split()
        conn = self._client()
        if words[:1] == ["stream"] and len(words) == 3:
            for i in range(int(words[1])):
                if cancelled.is_set():
                    return PromptResponse(stop_reason="cancelled")
                await conn.session_update(session_id, update_agent_message(text_block(f"chunk {i} ")))
                await asyncio.sleep(float(words[2]) / 1000.0)
        elif words == ["wait"]:
            await conn.session_update(session_id, update_agent_message(text_block("waiting")), source="sample")
            await self.release.wait()
        elif words == ["tool"]:
            return await self._tool(conn, session_id)
        elif words[:1] == ["read"] and len(words) == 2:
            read = await conn.read_text_file(session_id=session_id, path=words[1])
            await conn.session_update(session_id, update_agent_message(text_block(f"read {len(read.content)}")))
        elif words[:1] == ["write"] and len(words) >= 3:
            await conn.write_text_file(session_id=session_id, path=words[1], content=" ".join(words[2:]))
            await conn.session_update(session_id, update_agent_message(text_block(f"wrote {words[1]}")))
        elif words == ["fail"]:
            raise RequestError.invalid_params({"why": "asked to fail"})
        elif words == ["crash"]:
            raise RuntimeError("the sample agent crashed on purpose")
        elif words == ["invalid"]:  # a model the agent itself builds wrongly: pydantic raises
            return PromptResponse.model_validate({"stopReason": "not-a-stop-reason"})
        else:
            await conn.session_update(session_id, update_agent_message(text_block(text)))
        return PromptResponse(stop_reason="end_turn")

    async def _tool(self, conn: Client, session_id: str) -> PromptResponse:
        call_id = "call-1"
        await conn.session_update(session_id, start_tool_call(call_id, "List files", kind="read", status="pending"))
        answer = await conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=call_id, title="List files"),
            options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        self.calls.append(("permission_answer", {"outcome": answer.outcome}))
        outcome = answer.outcome
        if outcome.outcome == "cancelled":
            return PromptResponse(stop_reason="cancelled")
        allowed = getattr(outcome, "option_id", None) == "allow"
        await conn.session_update(session_id, update_tool_call(call_id, status="completed" if allowed else "failed"))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(SampleAgent()))
