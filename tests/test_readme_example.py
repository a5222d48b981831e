"""The README's "Writing an agent" example runs as printed, over real pipes."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import AgentProcess

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_agent_example_streams_the_prompt_and_ends_its_turn(tmp_path: Path) -> None:
    match = re.search(r"## Writing an agent\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None, "the README lost its agent example"
    script = tmp_path / "echo_agent.py"
    script.write_text(match.group(1))
    with AgentProcess(str(script), python_args=True) as agent:
        agent.initialize()
        sid = agent.new_session()
        rid = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]})
        updates, answer = agent.until_response(rid)
        assert answer["result"] == {"stopReason": "end_turn"}
        texts = [u["params"]["update"]["content"]["text"] for u in updates if u.get("method") == "session/update"]
        assert texts == ["hello"]
        agent.close_stdin()
        assert agent.wait() == 0


def test_readme_planner_example_applies_the_system_prompt_rule_and_gates_plan_operations(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text().split("## Writing an agent", 1)[1], re.S)
    planner = next((b for b in blocks if "class Planner" in b), None)
    assert planner is not None, "the README lost its Planner example"
    script = tmp_path / "planner.py"
    script.write_text(planner)
    system_prompt = {"mode": "append", "content": [{"type": "text", "text": "be brief"}]}
    for caps, kind in (({"plan": {}}, "plan_update"), ({}, "plan")):
        with AgentProcess(str(script), python_args=True) as agent:
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
