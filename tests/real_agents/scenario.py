"""One scripted ACP session with a real agent, on the SDK's own runtime or on acp_fast.compat.

Three agent processes share one temp HOME (so the second and third find what the first saved):

1. ``initialize``, ``session/new``, a prompt (``hello``), a prompt whose tool call needs the
   client's permission (granted; the file must then exist), a long prompt cancelled once its
   first chunk arrived, a story prompt cancelled while the model's words flow (after
   ``STORY_CANCEL_AFTER`` of them) and the prompt after it (nothing of the story may come in
   it), and ``session/list`` when the agent advertises it;
2. ``initialize`` and ``session/load`` of that session (the agent replays its history) when the
   agent advertises ``loadSession``;
3. ``initialize``, ``session/resume`` when advertised, and one more prompt.

The runtime is picked the way a user would without touching the agent's code: for ``compat``,
the agent's ``from acp import run_agent`` is served by ``acp_fast.compat.run_agent`` through the
import shim ``tests/sdk_suite/site/sitecustomize.py`` (MIGRATION.md, "Real agents"); for ``sdk``
the agent runs exactly as installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.real_agents import fake_model
from tests.real_agents.agents import SHIM_SITE, RealAgent
from tests.real_agents.client import AgentError, AgentProcess, Message

STEP_TIMEOUT = float(os.environ.get("ACP_FAST_REAL_AGENT_STEP_TIMEOUT", "60"))
#: The story prompt is cancelled once the chunk with this many words of it has arrived.
STORY_CANCEL_AFTER = 20
CLIENT_INFO = {"name": "acp-fast-real-agent-test", "version": "1"}
INIT = {"protocolVersion": 1, "clientInfo": CLIENT_INFO,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}


def _chunk_text(msg: Message) -> str | None:
    if msg.get("method") != "session/update":
        return None
    update = msg["params"]["update"]
    if update.get("sessionUpdate") != "agent_message_chunk":
        return None
    content = update.get("content") or {}
    return content.get("text") if isinstance(content, dict) else None


def agent_env(agent: RealAgent, runtime: str, home: Path, port: int, marks: Path) -> dict[str, str]:
    env = {
        "HOME": str(home), "PATH": f"{agent.venv / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"), "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        # Anything that honours the proxy variables and is not loopback fails at once.
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "all_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env.update(agent.configure(home, port))
    if runtime == "compat":
        env.update({"PYTHONPATH": str(SHIM_SITE), "ACP_FAST_SDK_SUITE": "compat",
                    "ACP_FAST_SDK_SUITE_MARKS": str(marks), "PYTEST_CURRENT_TEST": f"{agent.name} (call)"})
    return env


async def run_session(
    agent: RealAgent, runtime: str, work: Path, result: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The transcript of the scripted session: per process, everything written and read, in order.
    ``result``, when given, is filled as the session goes (what there is when a step fails)."""
    home, project = work / "home", work / "project"
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    model_log = work / "model.jsonl"
    marks = work / "compat-marks"
    model = fake_model.FakeModel({"log": str(model_log), "tool_name": agent.tool_name,
                                  "tool_args": agent.tool_args(project), "model": agent.model,
                                  "hold_s": STEP_TIMEOUT})
    server = await asyncio.start_server(model.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = agent_env(agent, runtime, home, port, marks)
    result = {} if result is None else result
    result.update({"agent": agent.name, "runtime": runtime, "processes": [], "steps": {},
                   "home": str(home), "project": str(project), "work": str(work)})

    def proc(n: int) -> AgentProcess:
        return AgentProcess(agent.command(), env, str(project), str(work / f"stderr-{n}.txt"), STEP_TIMEOUT)

    steps = result["steps"]
    try:
        async with proc(1) as a:
            result["processes"].append(a.log)
            init = await a.request("initialize", INIT)
            caps = init.get("agentCapabilities") or {}
            new = await a.request("session/new", {"cwd": str(project), "mcpServers": []})
            sid = new["sessionId"]
            await _sent_after_open(agent, a, "session/new", sid)
            steps["hello"] = await a.request("session/prompt", _prompt(sid, "Say hello."))
            steps["write"] = await a.request("session/prompt", _prompt(sid, "WRITE the notes file."))
            steps["permission_requests"] = a.permission_requests
            written = agent.written(project)
            steps["written"] = written.read_text() if written.exists() else None
            long = a.start("session/prompt", _prompt(sid, "LONG count slowly."))
            await a.wait_for(lambda m: _chunk_text(m) == fake_model.LONG_FIRST)
            a.notify("session/cancel", {"sessionId": sid})
            answer = await asyncio.wait_for(long, STEP_TIMEOUT)
            steps["long"] = answer.get("result", answer.get("error"))
            story = a.start("session/prompt", _prompt(sid, "STORY tell it word by word."))
            last_word = fake_model.story_word(STORY_CANCEL_AFTER)
            await a.wait_for(lambda m: last_word in (_chunk_text(m) or ""))
            a.notify("session/cancel", {"sessionId": sid})
            answer = await asyncio.wait_for(story, STEP_TIMEOUT)
            steps["story"] = answer.get("result", answer.get("error"))
            steps["after_story_from"] = len(a.log)
            steps["after_story"] = await a.request("session/prompt", _prompt(sid, "Say hello after it."))
            session_caps = caps.get("sessionCapabilities") or {}
            if "list" in session_caps:
                steps["list"] = await a.request("session/list", {"cwd": str(project)})
        if caps.get("loadSession"):
            async with proc(2) as b:
                result["processes"].append(b.log)
                await b.request("initialize", INIT)
                steps["load"] = await _maybe(b.request("session/load", {"sessionId": sid, "cwd": str(project),
                                                                         "mcpServers": []}))
                await _sent_after_open(agent, b, "session/load", sid)
        if "resume" in (caps.get("sessionCapabilities") or {}):
            async with proc(3) as c:
                result["processes"].append(c.log)
                await c.request("initialize", INIT)
                steps["resume"] = await _maybe(c.request("session/resume", {"sessionId": sid, "cwd": str(project),
                                                                             "mcpServers": []}))
                steps["again"] = await _maybe(c.request("session/prompt", _prompt(sid, "Say hello again.")))
    finally:
        server.close()
        await server.wait_closed()
    calls = model_log.read_text().splitlines() if model_log.exists() else []
    result["model_calls"] = [json.loads(line) for line in calls]
    result["compat_used"] = marks.exists() and marks.read_text().strip() != ""
    return result


async def _sent_after_open(agent: RealAgent, proc: AgentProcess, method: str, sid: str) -> None:
    """Wait for the updates the agent sends from a detached task after ``method`` opened ``sid``."""
    for opened, kind in agent.sent_after_open:
        if opened == method:
            await proc.wait_for(lambda m, kind=kind: m.get("method") == "session/update"
                                and m["params"].get("sessionId") == sid
                                and m["params"]["update"].get("sessionUpdate") == kind)


async def _maybe(coro: Any) -> Any:
    try:
        return await coro
    except AgentError as e:
        return {"error": e.error}


def _prompt(sid: str, text: str) -> Message:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


if __name__ == "__main__":  # python -m tests.real_agents.scenario kimi-cli compat
    from tests.real_agents.agents import AGENTS

    chosen = next(a for a in AGENTS if a.name == sys.argv[1])
    out: dict[str, Any] = {}
    try:
        asyncio.run(run_session(chosen, sys.argv[2], Path(tempfile.mkdtemp(prefix=f"ra-{sys.argv[2]}-")), out))
    finally:
        json.dump(out, sys.stdout, indent=1)
