"""The diff the real-agent tests rely on: it hides what must differ between two runs and the
allowed differences, and nothing else (no agent venvs needed)."""

from __future__ import annotations

from typing import Any

from tests.real_agents.transcript import diff


def _run(sid: str, request_id: int, chunks: list[str], path: str = "/tmp/w1") -> dict[str, Any]:
    def update(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return ("in", {"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}}})

    log: list[tuple[str, dict[str, Any]]] = [
        ("out", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": f"{path}/project"}}),
        ("in", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        update("usage_update", used=1, _meta={"tokensPerSecond": 3.5}),
        ("in", {"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": {}}),
        ("out", {"jsonrpc": "2.0", "id": request_id, "result": {"outcome": {"outcome": "selected"}}}),
        *[update("agent_message_chunk", content={"type": "text", "text": c}) for c in chunks],
        update("usage_update", used=2, _meta={"tokensPerSecond": 9.0}),
    ]
    return {"processes": [log], "project": f"{path}/project", "home": f"{path}/home", "work": path}


SID_A = "0d6f3a5e-1111-4a4a-8b8b-000000000001"
SID_B = "7c1e9b2d-2222-4c4c-9d9d-000000000002"


def test_ids_clocks_paths_and_agent_request_ids_do_not_count() -> None:
    sdk = _run(SID_A, 0, ["a", "b"], "/tmp/w1")
    compat = _run(SID_B, 1, ["a", "b"], "/tmp/w2")
    assert diff(sdk, compat) == []
    # Without the allowed rule, the request ids are a difference.
    assert any('"id": 0' in line for line in diff(sdk, compat, allowed=[]))


def test_order_and_content_of_updates_count() -> None:
    sdk = _run(SID_A, 0, ["a", "b"])
    assert diff(sdk, _run(SID_A, 0, ["b", "a"])) != []
    assert diff(sdk, _run(SID_A, 0, ["a"])) != []


def test_detached_updates_compare_by_their_last_value() -> None:
    sdk = _run(SID_A, 0, ["a"])
    compat = _run(SID_A, 0, ["a"])
    compat["processes"][0].pop(2)  # one usage_update fewer, as a detached task may give
    assert diff(sdk, compat) != []
    assert diff(sdk, compat, frozenset({"usage_update"})) == []
    compat["processes"][0][-1][1]["params"]["update"]["used"] = 3  # but the last value counts
    assert diff(sdk, compat, frozenset({"usage_update"})) != []


def _story_run(words_before_cancel: int, words_after_cancel: int, leaked: list[str]) -> dict[str, Any]:
    """A story turn: words, the client's cancel, maybe words still on their way, the answer; then
    a next turn that may begin with words of the story under a message id of its own."""
    sid = SID_A

    def chunk(text: str, message: str) -> tuple[str, dict[str, Any]]:
        content = {"type": "text", "text": text}
        update = {"sessionUpdate": "agent_message_chunk", "messageId": message, "content": content}
        return ("in", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})

    words = iter(range(1, 10_000))
    log: list[tuple[str, dict[str, Any]]] = [chunk(f"w{next(words)} ", "m-1") for _ in range(words_before_cancel)]
    log.append(("out", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
    log += [chunk(f"w{next(words)} ", "m-1") for _ in range(words_after_cancel)]
    log.append(("in", {"jsonrpc": "2.0", "id": 6, "result": {"stopReason": "cancelled"}}))
    log.append(("out", {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": sid}}))
    log += [chunk(text, "m-2") for text in [*leaked, "Hello"]]
    return {"processes": [log], "project": "/tmp/w1/project", "home": "/tmp/w1/home", "work": "/tmp/w1"}


def test_story_words_compare_by_message_not_by_count() -> None:
    sdk = _story_run(20, 3, [])
    assert diff(sdk, _story_run(25, 0, [])) == []
    leaked = diff(sdk, _story_run(20, 0, ["w655 ", "w656 "]))
    assert leaked != [] and any("<story>" in line and line.startswith("+") for line in leaked)
