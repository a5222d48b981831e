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
