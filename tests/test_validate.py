"""``--validate`` / ACP_FAST_VALIDATE=1: what an agent writes is checked against the ACP schema.

The agent below writes three mistakes an SDK user would have had caught by
pydantic: a misspelt ``sessionUpdate`` tag, a tool-call ``kind`` outside the
enum, and a stop reason that does not exist. Each must be logged to stderr
with the JSON path of the bad value, while the session carries on.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_fast import Agent
from acp_fast.agent import validate
from tests.helpers import AgentProcess, Harness, prompt_params

pytest.importorskip("jsonschema")


class MisspeakingAgent(Agent):
    """Writes schema-invalid updates and result (on purpose) through the public API."""

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any]:
        return {"sessionId": "s-1"}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        await self.client.session_update(
            session_id, {"sessionUpdate": "agent_mesage_chunk", "content": {"type": "text", "text": "hi"}}
        )
        await self.client.session_update(
            session_id, {"sessionUpdate": "tool_call", "toolCallId": "t-1", "title": "look", "kind": "not-a-kind"}
        )
        return {"stopReason": "finished"}


EXPECTED = (
    "$.params.update.sessionUpdate: 'agent_mesage_chunk' is not one of",
    "$.params.update.kind: 'not-a-kind' is not one of",
    "$.result.stopReason: 'finished' is not one of",
)


def _run_session(*flags: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    with AgentProcess("serve", "tests.test_validate:MisspeakingAgent", *flags, env=env) as agent:
        agent.initialize()
        sid = agent.new_session()
        rid = agent.request("session/prompt", prompt_params(sid, "go"))
        _, answer = agent.until_response(rid)
        agent.close_stdin()
        assert agent.wait() == 0
        return answer, agent.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "env"])
def test_validate_logs_each_violation_with_its_json_path(how: str) -> None:
    flags, env = (("--validate",), None) if how == "flag" else ((), {validate.ENV_VAR: "1"})
    answer, stderr = _run_session(*flags, env=env)
    assert answer["result"] == {"stopReason": "finished"}, "validation must not change what is sent"
    for expected in EXPECTED:
        assert expected in stderr, f"{expected!r} missing from stderr:\n{stderr}"
    assert stderr.count("schema violation") == len(EXPECTED), stderr


@pytest.mark.slow
def test_without_validate_nothing_is_checked() -> None:
    _, stderr = _run_session(env={validate.ENV_VAR: "0"})
    assert "schema violation" not in stderr, stderr


def test_off_by_default_leaves_the_write_path_untouched(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(validate.ENV_VAR, raising=False)

    async def main() -> None:
        h = Harness(MisspeakingAgent())
        assert "write" not in vars(h.writer) and "feed_line" not in vars(h.conn)
        await h.close()

    run(main())


def test_valid_output_raises_no_violation(
    run: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The demo agent's whole session is valid: validation reports nothing (no false alarm)."""
    from acp_fast.demo import DemoAgent

    monkeypatch.setenv(validate.ENV_VAR, "1")

    async def main() -> None:
        h = Harness(DemoAgent(pace_ms=0))
        assert "write" in vars(h.writer), "ACP_FAST_VALIDATE=1 did not install the check"
        await h.initialize()
        sid = await h.new_session()
        answer = await h.call("session/prompt", prompt_params(sid, "hello world"))
        assert answer["result"]["stopReason"] == "end_turn"
        await h.close()

    run(main())
    assert not [r for r in caplog.records if "schema violation" in r.getMessage()]


@pytest.fixture(scope="module")
def checker() -> validate.OutgoingValidator:
    return validate.OutgoingValidator()


def _update(update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (_update({"sessionUpdate": "agent_message_chunk"}), "$.params.update: 'content' is a required property"),
        (
            _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}),
            "$.params.update.content.type: 'txt' is not one of",
        ),
        (
            _update({"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "done"}),
            "$.params.update.status: 'done' is not one of",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "session/request_permission",
                "params": {
                    "sessionId": "s",
                    "toolCall": {"toolCallId": "t"},
                    "options": [{"optionId": "a", "name": "A", "kind": "maybe"}],
                },
            },
            "$.params.options[0].kind: 'maybe' is not one of",
        ),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}, "$.error.code: 'x' is not of type"),
        ({"jsonrpc": "2.0", "method": "session/prompt", "params": {}}, "$.method: 'session/prompt' is no agent"),
        ({"jsonrpc": "2.0", "id": 2.5, "result": {}}, "$.id: a response id is"),
        ({"id": 3, "result": {}}, "$: not a JSON-RPC 2.0 message object"),
    ],
    ids=[
        "missing-field",
        "content-type",
        "tool-status",
        "permission-kind",
        "error-code",
        "wrong-direction",
        "float-id",
        "no-jsonrpc",
    ],
)
def test_checker_reports_the_json_path(checker: validate.OutgoingValidator, message: Any, expected: str) -> None:
    found = checker.check(message)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_checker_picks_the_result_schema_by_the_method_the_client_called(checker: validate.OutgoingValidator) -> None:
    checker.note_incoming(b'{"jsonrpc":"2.0","id":"n1","method":"session/new","params":{"cwd":"/","mcpServers":[]}}')
    checker.note_incoming(b'{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{}}')
    assert checker.check({"jsonrpc": "2.0", "id": "m1", "result": {}}) == []
    found = checker.check({"jsonrpc": "2.0", "id": "n1", "result": {"session": "s"}})
    assert found and found[0].startswith("$.result: 'sessionId' is a required property"), found
    # each id is forgotten once answered: a second answer is checked by its envelope only
    assert checker.check({"jsonrpc": "2.0", "id": "n1", "result": {"session": "s"}}) == []
