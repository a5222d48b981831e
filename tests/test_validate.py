"""``--validate`` / ACP_FAST_VALIDATE=1: what an agent writes is checked against the ACP schema.

The agent below writes three mistakes an SDK user would have had caught by
pydantic: a misspelt ``sessionUpdate`` tag, a tool-call ``kind`` outside the
enum, and a stop reason that does not exist. Each must be logged to stderr
with the JSON path of the bad value, while the session carries on.

Two schema sources are checked: the installed SDK's models (the default) and
the protocol's schema files @agentclientprotocol/sdk 2.4.0 bundles
(``--validate-schema``); the tests of the second skip, saying why, when
tests/interop/node_modules is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_fast import Agent
from acp_fast.agent import schema_source, validate
from tests.helpers import AgentProcess, Harness, prompt_params
from tests.schema_oracle import (
    NPM_SCHEMA_STABLE,
    NPM_SCHEMA_UNSTABLE,
    NPM_SDK_DIR,
    SchemaViolation,
    assert_messages_valid,
    needs_npm_schema,
)

pytest.importorskip("jsonschema")

#: The sources a test runs under: the SDK's models, and the npm SDK's folder (its unstable file).
SOURCES = [pytest.param(None, id="sdk-models"), pytest.param(str(NPM_SDK_DIR), id="npm-2.4.0", marks=needs_npm_schema)]


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
    env = {**(env or {}), schema_source.SCHEMA_ENV_VAR: ""}  # the default source unless a flag names one
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
    first = stderr.splitlines()[0]
    assert "checked against the ACP schema agent-client-protocol " in first and "models (schema-v1." in first, first


@pytest.mark.slow
@needs_npm_schema
def test_validate_schema_flag_checks_against_the_file_and_names_it_first() -> None:
    answer, stderr = _run_session("--validate-schema", str(NPM_SDK_DIR))
    assert answer["result"] == {"stopReason": "finished"}
    first = stderr.splitlines()[0]
    assert "@agentclientprotocol/sdk 2.4.0: schema/v1/schema.unstable.json, sha256 " in first, first
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


@pytest.fixture(params=SOURCES)
def validating(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Validation on, from each source in turn (the environment names it); yields the source."""
    monkeypatch.setenv(validate.ENV_VAR, "1")
    monkeypatch.setenv(validate.SCHEMA_ENV_VAR, request.param or "")
    source: str | None = request.param
    return source


@pytest.mark.usefixtures("validating")
def test_valid_output_raises_no_violation(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The demo agent's whole session is valid: validation reports nothing (no false alarm)."""
    from acp_fast.demo import DemoAgent

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


@pytest.fixture(scope="module", params=SOURCES)
def checker(request: pytest.FixtureRequest) -> validate.OutgoingValidator:
    source = request.param
    return validate.OutgoingValidator(schema_source.load(source) if source else schema_source.load_sdk())


def _npm(path: Path = NPM_SCHEMA_UNSTABLE) -> validate.OutgoingValidator:
    return validate.OutgoingValidator(schema_source.load_file(str(path)))


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


# -- the newer schema: @agentclientprotocol/sdk 2.4.0's files ---------------------------

NOTICE = _update({"sessionUpdate": "notice", "severity": "info", "title": "context almost full"})


@needs_npm_schema
def test_a_kind_only_the_newer_schema_has_is_valid_there_and_flagged_by_the_sdk_models() -> None:
    assert _npm().check(NOTICE) == []
    found = validate.OutgoingValidator(schema_source.load_sdk()).check(NOTICE)
    assert len(found) == 1 and found[0].startswith("$.params.update.sessionUpdate: 'notice' is not one of"), found


@needs_npm_schema
def test_the_schema_oracle_checks_against_the_file_too() -> None:
    """tests/schema_oracle.py: the SDK's models refuse the new kind; the 2.4.0 file accepts it, and checks it."""
    with pytest.raises(SchemaViolation, match="notice"):
        assert_messages_valid([NOTICE], None)
    assert assert_messages_valid([NOTICE], None, NPM_SCHEMA_UNSTABLE) == 1
    empty_title = _update({"sessionUpdate": "notice", "severity": "info", "title": ""})
    with pytest.raises(SchemaViolation, match=r"SessionNotification \$\.update"):
        assert_messages_valid([empty_title], None, NPM_SCHEMA_UNSTABLE)


@needs_npm_schema
def test_the_stable_file_flags_an_unstable_kind_the_unstable_file_accepts() -> None:
    removed = _update({"sessionUpdate": "plan_removed", "planId": "p-1"})
    assert _npm(NPM_SCHEMA_UNSTABLE).check(removed) == []
    found = _npm(NPM_SCHEMA_STABLE).check(removed)
    assert len(found) == 1 and found[0].startswith("$.params.update.sessionUpdate: 'plan_removed' is not one of")


@needs_npm_schema
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            _update({"sessionUpdate": "plan_update", "plan": {"type": "outline"}}),
            "$.params.update.plan.type: 'outline' is not one of ['file', 'items', 'markdown']",
        ),
        (
            _update({"sessionUpdate": "notice", "severity": "info", "title": ""}),
            "$.params.update.title: '' should be non-empty",
        ),
        (
            {"jsonrpc": "2.0", "method": "auth/status_update", "params": {"accounts": []}},
            "$.params: 'state' is a required property (AuthStatusUpdateNotification)",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "mcp/message",
                "params": {"serverId": "srv", "requestId": 1, "method": "tools/list"},
            },
            "$.params.requestId: 1 is not of type 'string' (MessageMcpRequest)",
        ),
        (
            _update({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "kind": "peek"}),
            "$.params.update.kind: 'peek' is not one of ['read', ",
        ),
    ],
    ids=["plan-update-content", "notice-title", "auth-status-update", "request-scoped-mcp-message", "const-enum"],
)
def test_new_messages_are_checked_with_a_json_path(message: dict[str, Any], expected: str) -> None:
    found = _npm().check(message)
    assert len(found) == 1 and found[0].startswith(expected), found


@needs_npm_schema
def test_results_of_the_new_methods_are_checked_by_the_method_the_client_called() -> None:
    checker = _npm()
    for rid, method in enumerate(("session/status", "session/archive", "providers/list", "auth/status")):
        checker.note_incoming(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}))
    assert checker.check({"jsonrpc": "2.0", "id": 0, "result": {"status": "open"}}) == []
    assert checker.check({"jsonrpc": "2.0", "id": 1, "result": {}}) == []
    found = checker.check({"jsonrpc": "2.0", "id": 2, "result": {}})
    assert found and found[0].startswith("$.result: 'providers' is a required property"), found
    found = checker.check({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert found and "(AuthStatusResponse)" in found[0], found


@needs_npm_schema
def test_the_method_tables_come_from_the_file() -> None:
    """Every agent-written method of the unstable schema is known, and nothing the file lacks (mcp/connect) is."""
    schema = schema_source.load_file(str(NPM_SCHEMA_UNSTABLE))
    assert {"logout", "session/delete", "session/archive", "session/unarchive", "session/status"} <= set(schema.results)
    assert {"session/set_title", "auth/status", "providers/list", "providers/set", "providers/disable"} <= set(
        schema.results
    )
    assert schema.requests["mcp/message"] == "MessageMcpRequest"
    assert schema.notifications["auth/status_update"] == "AuthStatusUpdateNotification"
    assert schema.notifications["$/cancel_request"] == "CancelRequestNotification"
    assert "mcp/connect" not in schema.requests and "mcp/message" not in schema.notifications
    stable = schema_source.load_file(str(NPM_SCHEMA_STABLE))
    assert "session/archive" not in stable.results and "auth/status_update" not in stable.notifications


@needs_npm_schema
def test_a_folder_resolves_to_its_unstable_file() -> None:
    assert schema_source.resolve(NPM_SDK_DIR) == NPM_SCHEMA_UNSTABLE.resolve()


def _tiny_schema(root: Path, version: str) -> Path:
    """A minimal ACP-shaped schema file in the ACP repository's layout (Cargo.toml marker, meta.json)."""
    folder = root / "schema" / "v1"
    folder.mkdir(parents=True)
    (folder / "Cargo.toml").write_text(f'[package]\nname = "acp-json-schema-v1"\nversion = "{version}"\n')
    (folder / "meta.json").write_text('{"version": 1, "agentMethods": {}, "clientMethods": {}}')
    update = {"type": "object", "required": ["sessionId"], "x-method": "session/update", "x-side": "client"}
    document = {
        "$defs": {
            "AgentRequest": {"properties": {"params": {}}},
            "AgentNotification": {"properties": {"params": {"anyOf": [{"$ref": "#/$defs/SessionNotification"}]}}},
            "AgentResponse": {"anyOf": [{"properties": {"result": {"anyOf": [{"$ref": "#/$defs/PromptResponse"}]}}}]},
            "SessionNotification": update,
            "PromptResponse": {"type": "object", "required": ["stopReason"], "x-method": "session/prompt"},
            "Error": {"type": "object", "required": ["code", "message"]},
        }
    }
    (folder / "schema.json").write_bytes(orjson.dumps(document))
    return folder / "schema.json"


def test_a_schema_file_is_named_by_its_release_and_its_tables_read_from_it(tmp_path: Path) -> None:
    path = _tiny_schema(tmp_path, "1.34.0")
    schema = schema_source.load(str(tmp_path))
    assert schema.revision.startswith("acp-json-schema-v1 1.34.0: schema.json, protocol version 1, sha256 ")
    assert (schema.requests, schema.notifications) == ({}, {"session/update": "SessionNotification"})
    assert schema.results == {"session/prompt": "PromptResponse"}
    checker = validate.OutgoingValidator(schema)
    found = checker.check({"jsonrpc": "2.0", "method": "session/update", "params": {}})
    assert found == ["$.params: 'sessionId' is a required property (SessionNotification)"]
    assert schema_source.describe(str(path)).startswith("acp-json-schema-v1 1.34.0: schema.json")


def test_a_missing_or_foreign_schema_file_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(validate.SCHEMA_ENV_VAR, str(tmp_path / "absent.json"))
    assert validate.unavailable() == f"{validate.SCHEMA_ENV_VAR}: {tmp_path / 'absent.json'}: no such schema file"
    (tmp_path / "other.json").write_text('{"$defs": {"Thing": {}}}')
    monkeypatch.setenv(validate.SCHEMA_ENV_VAR, str(tmp_path / "other.json"))
    problem = validate.unavailable()
    assert problem is not None and "not an ACP schema file" in problem, problem
    with pytest.raises(RuntimeError, match="not an ACP schema file"):
        validate.OutgoingValidator()


def test_the_first_log_line_names_the_revision_once_per_process(
    run: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, validating: str | None
) -> None:
    source = validating
    monkeypatch.setattr(validate, "_announced", set())
    caplog.set_level("INFO", logger=validate.log.name)

    async def main() -> None:
        for _ in range(2):
            await Harness(MisspeakingAgent()).close()

    run(main())
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == validate.log.name]
    revision = schema_source.load(source).revision if source else schema_source.load_sdk().revision
    expected = f"outgoing messages are checked against the ACP schema {revision} ({validate.ENV_VAR}=1)"
    assert lines == [("WARNING", expected), ("INFO", expected)], lines
    assert ("@agentclientprotocol/sdk 2.4.0" if source else "agent-client-protocol") in revision


def test_version_names_the_schema_validate_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from acp_fast.cli import main

    monkeypatch.setenv(validate.SCHEMA_ENV_VAR, str(_tiny_schema(tmp_path, "1.30.1")))
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("acp-fast "), lines
    assert lines[1].startswith("--validate schema: acp-json-schema-v1 1.30.1: schema.json, protocol version 1"), lines
    monkeypatch.delenv(validate.SCHEMA_ENV_VAR)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "--validate schema: agent-client-protocol " in capsys.readouterr().out
