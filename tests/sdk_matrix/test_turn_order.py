"""How a turn ends, seen by a client over a pipe: the installed release's own runtime and compat
serve the same agent process (tests/sdk_matrix/turn_agents.py) and the client reads the same lines.

- A cancelled turn is stopped as the release's runtime stops it: ``session/cancel`` calls the
  agent's ``cancel`` and nothing else, so an agent that cancels its own prompt task gets one
  ``CancelledError``, its cleanup closes its model stream, and nothing of the cancelled turn comes
  in the next one. ``max_turn_s`` (compat's own) cancels the same way.
- Tasks the agent starts in a handler's last step get the loop turns the release's runtime gives
  them before it writes the answer: what they send lands on the same side of the answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_fast.compat import wrap_sdk_agent
from acp_fast.wire.limits import Limits
from tests.helpers import AgentProcess, Harness, close_and_check, prompt_params
from tests.sdk_matrix.turn_agents import STORY_SEEN, StoryAgent

RUNTIMES = ("sdk", "compat")
#: What a client reads on the release's own runtime: the story's first words, the cleanup's last
#: update and the agent's own answer; then a next turn with nothing of the story in it.
STORY_TURN = ["w1 ", "w2 ", "w3 ", "stream closed"]
STORY_ANSWER = {"stopReason": "cancelled", "_meta": {"stream": "closed"}}


def _process(runtime: str, kind: str) -> AgentProcess:
    return AgentProcess("-m", "tests.sdk_matrix.turn_agents", runtime, kind, python_args=True)


def _text(msg: Any) -> str | None:
    if not isinstance(msg, dict) or msg.get("method") != "session/update":
        return None
    content = msg["params"]["update"].get("content") or {}
    return content.get("text") if isinstance(content, dict) else None


def _texts(msgs: list[Any]) -> list[str]:
    return [t for t in map(_text, msgs) if t is not None]


def _cancelled_then_next(runtime: str, cancels: int) -> dict[str, Any]:
    with _process(runtime, "story") as agent:
        agent.initialize()
        sid = agent.new_session()
        story = agent.request("session/prompt", prompt_params(sid, "story"))
        seen: list[Any] = []
        while len(_texts(seen)) < STORY_SEEN:
            seen.append(agent.next())
        for _ in range(cancels):  # a user who presses stop twice sends two
            agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        rest, answer = agent.until_response(story)
        after, next_answer = agent.until_response(agent.request("session/prompt", prompt_params(sid, "again")))
        agent.close_stdin()
        status = agent.wait()
    return {
        "story": _texts(seen + rest),
        "answer": answer.get("result", answer.get("error")),
        "next": _texts(after),
        "next_answer": next_answer.get("result"),
        "status": status,
    }


@pytest.mark.parametrize("cancels", [1, 2])
def test_matrix_self_cancelling_agent_closes_its_stream_and_the_next_turn_is_clean_over_a_pipe(cancels: int) -> None:
    """On compat the runtime used to cancel the prompt's task too: the agent's own cancel then
    landed a second ``CancelledError`` in its cleanup, the stream stayed open, the answer was
    compat's bare ``cancelled`` and the next turn began with the story's queued words. A second
    ``session/cancel`` calls the agent's ``cancel`` again, and still leaves the task to it."""
    on_sdk, on_compat = (_cancelled_then_next(r, cancels) for r in RUNTIMES)
    assert on_sdk == {
        "story": STORY_TURN,
        "answer": STORY_ANSWER,
        "next": ["hello"],
        "next_answer": {"stopReason": "end_turn"},
        "status": 0,
    }
    assert on_compat == on_sdk


def test_matrix_max_turn_s_stops_a_self_cancelling_agent_as_its_cancel_would(run: Any) -> None:
    """A turn past ``max_turn_s`` is cancelled as ``session/cancel`` cancels it: the agent's
    ``cancel`` alone, so its cleanup runs whole and the next turn is clean."""

    async def body() -> None:
        h = Harness(wrap_sdk_agent(StoryAgent()), limits=Limits(max_turn_s=0.01))
        await h.initialize()
        sid = await h.new_session()
        answer = await h.call("session/prompt", prompt_params(sid, "story"))
        assert answer["result"] == STORY_ANSWER
        assert _texts(h.messages) == STORY_TURN
        before = len(h.messages)
        assert (await h.call("session/prompt", prompt_params(sid, "again")))["result"] == {"stopReason": "end_turn"}
        assert _texts(h.messages[before:]) == ["hello"]
        await close_and_check(h)

    run(body())


def _order(runtime: str, grid: list[tuple[int, int]], sessions: list[int]) -> dict[str, str]:
    """Per case, ``UA`` when the spawned task's update came before the answer, ``AU`` after it."""
    seen: dict[str, str] = {}
    with _process(runtime, "spawner") as agent:
        agent.initialize()
        sid = agent.new_session()
        for spawn_turns, own_turns in grid:
            rid = agent.request("session/prompt", prompt_params(sid, f"{spawn_turns} {own_turns}"))
            seen[f"prompt {spawn_turns} {own_turns}"] = _two(agent, rid)
        for spawn_turns in sessions:
            rid = agent.request("session/new", {"cwd": "/tmp", "mcpServers": [], "_meta": {"spawnTurns": spawn_turns}})
            seen[f"session/new {spawn_turns}"] = _two(agent, rid)
        agent.close_stdin()
        assert agent.wait() == 0
    return seen


def _two(agent: AgentProcess, rid: str) -> str:
    order = ""
    while len(order) < 2:
        msg = agent.next()
        if _text(msg) == "spawned":
            order += "U"
        elif isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
            order += "A"
    return order


def test_matrix_tasks_started_in_a_handlers_last_step_land_beside_its_answer_as_on_the_releases_runtime() -> None:
    """1.x answers from a second task that waits for the handler's: tasks the handler started get
    two more loop turns before the answer; before 1.0, none. Compat gave none on every release."""
    grid = [(spawn, own) for own in range(3) for spawn in range(5)]
    on_sdk, on_compat = (_order(r, grid, [0, 1, 2, 3]) for r in RUNTIMES)
    assert "UA" in on_sdk.values() and "AU" in on_sdk.values()  # the grid crosses the boundary
    assert on_compat == on_sdk
