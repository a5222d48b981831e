"""Every Python block in the README and docs is a file under examples/, and each runs as the text says.

A block names its file in its first line (``# examples/NAME.py``) and must equal
that file byte for byte, so the docs cannot drift from what these tests run:
over stdio (``python FILE``), under ``acp-fast serve``, under ``acp-fast serve
--listen`` and, for the hosting example, as its own WebSocket server.
"""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.helpers import AgentProcess

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    return [(doc.name, m.group(1)) for doc in DOCS for m in BLOCK.finditer(doc.read_text())]


def test_every_python_block_in_the_docs_is_an_example_file_verbatim() -> None:
    blocks = _blocks()
    assert len(blocks) >= 6, blocks
    named: set[str] = set()
    for doc, text in blocks:
        first = text.splitlines()[0]
        match = re.fullmatch(r"# examples/(\w+\.py)", first)
        assert match, f"a python block in {doc} does not name its file: {first!r}"
        path = EXAMPLES / match.group(1)
        assert path.is_file(), f"{doc} shows {path.name}, which examples/ lacks"
        assert text == path.read_text(), f"{doc}'s block differs from {path}"
        named.add(path.name)
    unshown = {p.name for p in EXAMPLES.glob("*.py")} - named
    assert not unshown, f"examples no doc shows: {unshown}"


def _echo_turn(agent: AgentProcess, text: str = "hello") -> None:
    agent.initialize()
    sid = agent.new_session()
    rid = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    updates, answer = agent.until_response(rid)
    assert answer["result"] == {"stopReason": "end_turn"}, answer
    texts = [u["params"]["update"]["content"]["text"] for u in updates if u.get("method") == "session/update"]
    assert texts == [text]


@pytest.mark.parametrize("script", ["echo.py", "echo_async.py", "limits.py", "sdk_agent.py"])
def test_example_runs_over_stdio_as_a_script(script: str) -> None:
    with AgentProcess(str(EXAMPLES / script), python_args=True, cwd=str(EXAMPLES)) as agent:
        _echo_turn(agent)
        agent.close_stdin()
        assert agent.wait() == 0, agent.stderr


def test_echo_example_under_acp_fast_serve_serves_stdio_at_once() -> None:
    """The guarded entry: importing echo.py serves nothing by itself."""
    with AgentProcess("serve", "echo:Echo", cwd=str(EXAMPLES)) as agent:
        _echo_turn(agent)
        agent.close_stdin()
        assert agent.wait() == 0, agent.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ws_echo_turn(url: str, headers: dict[str, str] | None = None) -> None:
    from websockets.sync.client import connect

    with connect(url, additional_headers=headers, open_timeout=30) as ws:
        def call(rid: int, method: str, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
            ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).decode())
            seen = []
            while True:
                msg = orjson.loads(ws.recv(timeout=30))
                if msg.get("id") == rid and "method" not in msg:
                    return seen, msg
                seen.append(msg)

        assert "result" in call(1, "initialize", {"protocolVersion": 1})[1]
        sid = call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})[1]["result"]["sessionId"]
        updates, answer = call(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [u["params"]["update"]["content"]["text"] for u in updates if u.get("method") == "session/update"] == [
            "hi"
        ]


def test_echo_example_under_acp_fast_serve_listen_opens_its_port_at_once() -> None:
    pytest.importorskip("picows")
    port = _free_port()
    with AgentProcess("serve", "echo:Echo", "--listen", f"127.0.0.1:{port}", cwd=str(EXAMPLES)) as agent:
        agent.wait_stderr("serving ACP over WebSocket")
        _ws_echo_turn(f"ws://127.0.0.1:{port}/acp")
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.wait() == 0, agent.stderr


def test_hosted_example_serves_with_its_token_and_drains_on_sigterm() -> None:
    pytest.importorskip("picows")
    port = _free_port()
    env = {"PORT": str(port), "ACP_TOKEN": "s3cret"}
    with AgentProcess(str(EXAMPLES / "hosted.py"), python_args=True, cwd=str(EXAMPLES), env=env) as agent:
        line = agent.inbox.get(timeout=AgentProcess.HANG_S)
        assert line.strip() == f"serving ws://127.0.0.1:{port}/acp".encode(), line
        from websockets.exceptions import InvalidStatus

        with pytest.raises(InvalidStatus):
            _ws_echo_turn(f"ws://127.0.0.1:{port}/acp")
        _ws_echo_turn(f"ws://127.0.0.1:{port}/acp", {"Authorization": "Bearer s3cret"})
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.wait() == 0, agent.stderr


def test_planner_example_applies_the_system_prompt_rule_and_gates_plan_operations() -> None:
    system_prompt = {"mode": "append", "content": [{"type": "text", "text": "be brief"}]}
    for caps, kind in (({"plan": {}}, "plan_update"), ({}, "plan")):
        with AgentProcess(str(EXAMPLES / "planner.py"), python_args=True, cwd=str(EXAMPLES)) as agent:
            init = agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
            assert init["result"]["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {}
            refused = agent.call(
                "session/new", {"cwd": "/tmp", "mcpServers": [], "systemPrompt": {**system_prompt, "mode": "override"}}
            )
            assert refused["error"]["code"] == -32602
            _, opened = agent.until_response(
                agent.request("session/new", {"cwd": "/tmp", "mcpServers": [], "systemPrompt": system_prompt})
            )
            sid = opened["result"]["sessionId"]
            rid = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            updates, answer = agent.until_response(rid)
            assert answer["result"] == {"stopReason": "end_turn"}
            assert [u["params"]["update"]["sessionUpdate"] for u in updates if u.get("method")] == [kind]
            agent.close_stdin()
            assert agent.wait() == 0
