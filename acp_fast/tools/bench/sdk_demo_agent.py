"""The acp_fast demo agent's benchmark logic, written directly on the official Python SDK.

    python -P acp_fast/tools/bench/sdk_demo_agent.py [--uvloop]     # needs the bench extra (the official SDK)

Same wire behaviour as ``acp-fast demo`` for what ``acp-fast bench`` uses:
``initialize``, ``session/new`` (modes ``ask``/``code`` and a model config
option, then an ``available_commands_update``), ``session/set_mode``,
``session/set_config_option``, ``session/cancel`` and ``session/prompt`` with
``stream N DELAY_MS`` (N ``agent_message_chunk`` updates, a sleep of
DELAY_MS after each, so it yields every chunk even at 0, then ``end_turn``;
``cancelled`` when cancelled). Any other prompt gets one short chunk.

It is written the way the SDK's own examples are: pydantic models for
results and updates, ``acp.run_agent`` on stdio and the default asyncio loop
(``--uvloop`` installs uvloop first, for a like-for-like loop). A cancel
both sets a flag the loop checks and cancels the prompt's task, so a sleep
in progress is interrupted, as acp_fast does.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, Literal

import acp
from acp import schema
from acp.exceptions import RequestError

MODES = [
    schema.SessionMode(id="ask", name="Ask", description="Answer without touching files"),
    schema.SessionMode(id="code", name="Code", description="May read and write files"),
]
MODELS = [
    schema.SessionConfigSelectOption(value="demo-small", name="Demo small"),
    schema.SessionConfigSelectOption(value="demo-large", name="Demo large"),
]
COMMANDS = [
    schema.AvailableCommand(
        name="stream",
        description="stream N chunks DELAY_MS apart",
        input=schema.AvailableCommandInput(schema.UnstructuredCommandInput(hint="N DELAY_MS")),
    ),
    schema.AvailableCommand(name="tool", description="run a pretend tool after asking permission"),
]


def _model_option(value: str) -> schema.SessionConfigOptionSelect:
    return schema.SessionConfigOptionSelect(
        id="model", name="Model", category="model", type="select", current_value=value, options=MODELS
    )


def _prompt_text(prompt: list[Any]) -> str:
    for block in prompt:
        if isinstance(block, schema.TextContentBlock):
            return block.text.strip()
    return ""


class SdkDemoAgent:
    """acp.Agent implementation (structural: the SDK's Agent is a Protocol)."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions: dict[str, str] = {}
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._cancelled: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                prompt_capabilities=schema.PromptCapabilities(embedded_context=True)
            ),
            agent_info=schema.Implementation(name="sdk-demo", title="SDK demo agent", version="0.1.0"),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> schema.NewSessionResponse:
        session_id = f"demo-{len(self._sessions) + 1}"
        self._sessions[session_id] = cwd
        task = asyncio.get_running_loop().create_task(self._announce(session_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return schema.NewSessionResponse(
            session_id=session_id,
            modes=schema.SessionModeState(current_mode_id="ask", available_modes=MODES),
            config_options=[_model_option("demo-small")],
        )

    async def _announce(self, session_id: str) -> None:
        update = schema.AvailableCommandsUpdate(session_update="available_commands_update", available_commands=COMMANDS)
        with contextlib.suppress(ConnectionError):  # the client may be gone already
            await self._conn.session_update(session_id, update)

    def _known(self, session_id: str) -> None:
        if session_id not in self._sessions:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> schema.SetSessionModeResponse:
        self._known(session_id)
        if mode_id not in {m.id for m in MODES}:
            raise RequestError.invalid_params({"modeId": mode_id})
        return schema.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        self._known(session_id)
        if config_id != "model" or value not in {m.value for m in MODELS}:
            raise RequestError.invalid_params({"configId": config_id})
        return schema.SetSessionConfigOptionResponse(config_options=[_model_option(str(value))])

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        task = self._running.get(session_id)
        if task is not None:
            self._cancelled.add(session_id)
            task.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        self._known(session_id)
        if session_id in self._running:
            raise RequestError(-32000, f"a prompt is already running in session {session_id!r}")
        task = asyncio.current_task()
        assert task is not None
        self._running[session_id] = task
        self._cancelled.discard(session_id)
        try:
            words = _prompt_text(prompt).split()
            if words[:1] == ["stream"] and len(words) == 3 and words[1].isdigit():
                await self._stream(session_id, int(words[1]), float(words[2]) / 1000.0)
            else:
                await self._conn.session_update(session_id, acp.update_agent_message_text("ok"))
        except asyncio.CancelledError:
            if session_id not in self._cancelled:
                raise  # shutdown, not a session/cancel
            task.uncancel()
        finally:
            del self._running[session_id]
        stop: Literal["cancelled", "end_turn"] = "cancelled" if session_id in self._cancelled else "end_turn"
        return schema.PromptResponse(stop_reason=stop)

    async def _stream(self, session_id: str, n: int, delay_s: float) -> None:
        for i in range(n):
            if session_id in self._cancelled:
                return
            chunk = schema.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=schema.TextContentBlock(type="text", text=f"chunk {i} "),
                message_id="m1",
            )
            await self._conn.session_update(session_id, chunk)
            await asyncio.sleep(delay_s)


def main() -> None:
    # Only the methods the bench uses: the SDK's Agent protocol lists more, and
    # the SDK answers the ones an agent lacks with "method not found".
    agent: Any = SdkDemoAgent()
    if "--uvloop" in sys.argv[1:]:
        import uvloop

        uvloop.run(acp.run_agent(agent))
    else:
        asyncio.run(acp.run_agent(agent))


if __name__ == "__main__":
    main()
