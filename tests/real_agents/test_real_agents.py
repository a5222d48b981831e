"""Real agents from the package index, each pinned to its own SDK release, on the SDK's own runtime
and on acp_fast.compat: the same scripted session (tests/real_agents/scenario.py) against the same
offline fake model, and the two transcripts diffed. Any difference not in
``transcript.ALLOWED`` (each a row of docs/MIGRATION.md) fails.

The agents' venvs come from ``.ci/real-agents``; without them these tests skip, saying so (set
``ACP_FAST_REAL_AGENTS_REQUIRED=1``, as ``.ci/real-agents`` does, to fail instead).
Each run's transcripts and the agents' stderr are kept under ``ACP_FAST_REAL_AGENTS_OUT`` when set.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.real_agents import fake_model
from tests.real_agents.agents import AGENTS, RealAgent
from tests.real_agents.scenario import run_session
from tests.real_agents.transcript import diff

REQUIRED = os.environ.get("ACP_FAST_REAL_AGENTS_REQUIRED") == "1"


STORY_WORDS = re.compile(r"\bw\d+\b")


def _texts(result: dict[str, Any], process: int, start: int = 0) -> list[str]:
    out = []
    for direction, msg in result["processes"][process][start:]:
        if direction == "in" and msg.get("method") == "session/update":
            update = msg["params"]["update"]
            if update.get("sessionUpdate") == "agent_message_chunk":
                out.append(update["content"].get("text", ""))
    return out


def _check_run(agent: RealAgent, result: dict[str, Any]) -> None:
    """What the scripted session must show on either runtime, before any comparison."""
    steps = result["steps"]
    assert result["compat_used"] is (result["runtime"] == "compat"), "the runtime under test did not serve the agent"
    assert steps["hello"]["stopReason"] == "end_turn"
    assert "".join(fake_model.HELLO_REPLY) in "".join(_texts(result, 0))
    assert steps["permission_requests"] == 1, "the tool call did not reach the client as a permission request"
    assert steps["write"]["stopReason"] == "end_turn"
    assert steps["written"] == agent.tool_args(Path(result["project"]))[agent.content_key]
    assert steps["long"]["stopReason"] == "cancelled"
    assert steps["story"]["stopReason"] == "cancelled"
    assert steps["after_story"]["stopReason"] == "end_turn"
    after = _texts(result, 0, steps["after_story_from"])
    assert not [t for t in after if STORY_WORDS.search(t)], f"the cancelled story went on in the next turn: {after}"
    calls = result["model_calls"]
    kinds = ["hello", "tool_call", "tool_done", "long", "story", "hello"] + (["hello"] if "again" in steps else [])
    assert [c["kind"] for c in calls if "kind" in c] == kinds
    assert not [c for c in calls if c.get("unexpected")], calls
    assert {"event": "long stream: the agent hung up"} in calls, "the cancelled turn did not stop the model stream"
    assert {"event": "story stream: the agent hung up"} in calls, "the cancelled story did not stop the model stream"


def usage_before_answers(result: dict[str, Any]) -> list[bool]:
    """Per prompt answered ``end_turn``: whether a ``usage_update`` came after the turn's last
    message chunk and before its answer (the agent sends it from a task it starts as the turn
    ends; the transcript diff compares ``usage_update`` by its last value only)."""
    seen: list[bool] = []
    for log in result["processes"]:
        prompts: set[Any] = set()
        usage_last = False
        for direction, msg in log:
            if direction == "out" and msg.get("method") == "session/prompt":
                prompts.add(msg["id"])
                usage_last = False
            elif direction == "in" and msg.get("method") == "session/update":
                kind = msg["params"]["update"].get("sessionUpdate")
                if kind == "usage_update":
                    usage_last = True
                elif kind == "agent_message_chunk":
                    usage_last = False
            elif direction == "in" and "method" not in msg and msg.get("id") in prompts:
                prompts.discard(msg["id"])
                if (msg.get("result") or {}).get("stopReason") == "end_turn":
                    seen.append(usage_last)
    return seen


def _keep(agent: RealAgent, runtime: str, result: dict[str, Any]) -> None:
    out = os.environ.get("ACP_FAST_REAL_AGENTS_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{agent.name}-{runtime}.json").write_text(json.dumps(result, indent=1))


@pytest.mark.parametrize("agent", AGENTS, ids=[a.name for a in AGENTS])
def test_real_agent_same_transcript_on_sdk_and_compat(agent: RealAgent, tmp_path: Path) -> None:
    if not agent.installed:
        msg = f"{agent.name}=={agent.version} is not installed under {agent.venv} (run .ci/real-agents)"
        if REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)
    results = {}
    for runtime in ("sdk", "compat"):
        result = asyncio.run(run_session(agent, runtime, tmp_path / runtime))
        _keep(agent, runtime, result)
        _check_run(agent, result)
        results[runtime] = result
    differences = diff(results["sdk"], results["compat"], agent.detached_updates)
    assert differences == [], "\n".join(differences)
    assert usage_before_answers(results["compat"]) == usage_before_answers(results["sdk"])
