"""The session/update kinds of schema 1.25-1.34 on the Client handle, and their capability gates (R05, R26).

Each helper's output is compared with the exact wire dict it must produce and
validated against the TypeScript SDK's bundled JSON schema (update_schema),
which also refuses properties the schema does not declare. Gating: a kind
the client did not advertise raises CapabilityNotSupported and writes
nothing; advertised, it is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from acp_fast.agent.base import Agent
from acp_fast.agent.client_handle import CLEAR, CapabilityNotSupported, Client
from acp_fast.agent.methods import UPDATE_GATES
from tests.helpers import Harness, close_and_check, prompt_params
from tests.schema_oracle import assert_messages_valid, record_sent
from tests.update_schema import check_update

pytestmark = pytest.mark.usefixtures("read_path")

Script = Callable[[Client, str], Awaitable[Any]]

ALL_CAPS: dict[str, Any] = {"session": {"notices": {}, "compaction": {}}, "plan": {}, "subagents": {}}


class ScriptAgent(Agent):
    """Its prompt runs ``script(client, session_id)``; what the script returns is kept."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.result: Any = None

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
        self.result = await self.script(self.client, session_id)


async def run_script(script: Script, caps: dict[str, Any]) -> tuple[Harness, ScriptAgent, str, dict[str, Any]]:
    agent = ScriptAgent(script)
    h = record_sent(Harness(agent))
    await h.initialize(caps)
    sid = await h.new_session()
    resp = await h.call("session/prompt", prompt_params(sid, "go"))
    return h, agent, sid, resp


def assert_all_valid(h: Harness) -> None:
    """Newer kinds (and tool calls naming their tool) against the bundled JSON schema, the rest against
    the SDK's models."""
    older = []
    for msg in h.messages:
        update = msg.get("params", {}).get("update") if msg.get("method") == "session/update" else None
        if update is not None and (update["sessionUpdate"] in UPDATE_GATES or "name" in update):
            check_update(msg["params"])
        else:
            older.append(msg)
    assert_messages_valid(older, h.sent)


TEXT = {"type": "text", "text": "kept"}

#: (helper call, the update it must write), in the order the script sends them.
CASES: list[tuple[Callable[[Client, str], Awaitable[None]], dict[str, Any]]] = [
    (
        lambda c, s: c.notice(s, "Rate limited"),
        {"sessionUpdate": "notice", "severity": "info", "title": "Rate limited"},
    ),
    (
        lambda c, s: c.notice(s, "Quota", severity="warning", description="80% used"),
        {"sessionUpdate": "notice", "severity": "warning", "title": "Quota", "description": "80% used"},
    ),
    (
        lambda c, s: c.compaction_update(s, "c1", "in_progress"),
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
    ),
    (
        lambda c, s: c.compaction_summary_chunk(s, "c1", "so far"),
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
         "content": {"type": "text", "text": "so far"}},
    ),
    (
        lambda c, s: c.compaction_update(s, "c1", "completed", summary=[TEXT], error=CLEAR),
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed", "summary": [TEXT],
         "error": None},
    ),
    (
        lambda c, s: c.plan_update(s, "p1", entries=[{"content": "step", "priority": "high", "status": "pending"}]),
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p1",
                                                  "entries": [{"content": "step", "priority": "high",
                                                               "status": "pending"}]}},
    ),
    (
        lambda c, s: c.plan_update(s, "p2", markdown="# Plan\n- a", path="/tmp/plan.md"),
        {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p2", "content": "# Plan\n- a",
                                                  "path": "/tmp/plan.md"}},
    ),
    (
        lambda c, s: c.plan_update(s, "p3", markdown="just text"),
        {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p3", "content": "just text"}},
    ),
    (
        lambda c, s: c.plan_update(s, "p4", uri="file:///tmp/plan.md"),
        {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p4", "uri": "file:///tmp/plan.md"}},
    ),
    (lambda c, s: c.plan_removed(s, "p2"), {"sessionUpdate": "plan_removed", "planId": "p2"}),
    (
        lambda c, s: c.subagent_update(s, "kid", title="Search", description="greps", state="running", cwd="/tmp",
                                       additional_directories=["/var"]),
        {"sessionUpdate": "subagent_update", "sessionId": "kid", "title": "Search", "description": "greps",
         "state": {"state": "running"}, "cwd": "/tmp", "additionalDirectories": ["/var"]},
    ),
    (
        lambda c, s: c.subagent_update(s, "kid", title=CLEAR, capabilities=CLEAR,
                                       state={"state": "idle", "stopReason": "max_tokens"}),
        {"sessionUpdate": "subagent_update", "sessionId": "kid", "title": None, "capabilities": None,
         "state": {"state": "idle", "stopReason": "max_tokens"}},
    ),
    (
        lambda c, s: c.session_message(s, "m1", sender_session_id=s, recipient_session_id="kid", content=[TEXT]),
        {"sessionUpdate": "session_message", "messageId": "m1", "senderSessionId": "SID",
         "recipientSessionId": "kid", "content": [TEXT]},
    ),
    (
        lambda c, s: c.session_message_chunk(s, "m1", TEXT),
        {"sessionUpdate": "session_message_chunk", "messageId": "m1", "content": TEXT},
    ),
    (
        lambda c, s: c.session_message(s, "m1", recipient_message_id="m9", content=CLEAR),
        {"sessionUpdate": "session_message", "messageId": "m1", "recipientMessageId": "m9", "content": None},
    ),
    (
        lambda c, s: c.tool_call(s, "t1", "Read a.txt", name="read_file", kind="read"),
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.txt", "name": "read_file",
         "kind": "read"},
    ),
    (
        lambda c, s: c.tool_call_update(s, "t1", name="read_file", status="completed"),
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "name": "read_file", "status": "completed"},
    ),
    (
        lambda c, s: c.tool_call(s, "t2", "Plain"),
        {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Plain"},
    ),
]


def test_r05_each_new_helper_writes_its_exact_schema_valid_update_in_order(run: Any) -> None:
    async def script(c: Client, sid: str) -> None:
        for call, _ in CASES:
            await call(c, sid)

    async def body() -> None:
        h, _agent, sid, resp = await run_script(script, ALL_CAPS)
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        updates = [u["update"] for u in h.updates(sid)]
        expected = [{k: (sid if v == "SID" else v) for k, v in want.items()} for _, want in CASES]
        assert updates == expected
        last_update = max(i for i, m in enumerate(h.messages) if m.get("method") == "session/update")
        assert h.messages.index(resp) > last_update  # R05
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


#: One call per gated kind, with the capability that gates it.
GATED: dict[str, Callable[[Client, str], Awaitable[None]]] = {
    "notice": lambda c, s: c.notice(s, "n"),
    "compaction_update": lambda c, s: c.compaction_update(s, "c", "in_progress"),
    "compaction_summary_chunk": lambda c, s: c.compaction_summary_chunk(s, "c", "x"),
    "plan_update": lambda c, s: c.plan_update(s, "p", markdown="x"),
    "plan_removed": lambda c, s: c.plan_removed(s, "p"),
    "subagent_update": lambda c, s: c.subagent_update(s, "kid", title="t"),
    "session_message": lambda c, s: c.session_message(s, "m", content=[TEXT]),
    "session_message_chunk": lambda c, s: c.session_message_chunk(s, "m", "x"),
}


def test_gated_kinds_cover_every_gate() -> None:
    assert set(GATED) == set(UPDATE_GATES)


@pytest.mark.parametrize(
    ("caps", "allowed"),
    [
        ({}, set()),
        ({"session": {"notices": {}}}, {"notice"}),
        ({"session": {"compaction": {}}}, {"compaction_update", "compaction_summary_chunk"}),
        ({"plan": {}}, {"plan_update", "plan_removed"}),
        ({"subagents": {}}, {"subagent_update", "session_message", "session_message_chunk"}),
        ({"session": {"notices": None, "compaction": False}, "plan": None, "subagents": False}, set()),
        (ALL_CAPS, set(UPDATE_GATES)),
    ],
    ids=["none", "notices", "compaction", "plan", "subagents", "null-and-false", "all"],
)
def test_a_gated_kind_is_sent_only_when_advertised_else_raises_before_writing(
    run: Any, caps: dict[str, Any], allowed: set[str]
) -> None:
    async def script(c: Client, sid: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for kind, call in GATED.items():
            asked = c.supports_update(kind)
            before = len(h_ref[0].messages)
            try:
                await call(c, sid)
                outcome = "sent"
            except CapabilityNotSupported as exc:
                outcome = "refused"
                assert kind in str(exc)
                assert len(h_ref[0].messages) == before  # nothing written, not even a partial line
                try:  # the raw path applies the same rule
                    await c.session_update(sid, {"sessionUpdate": kind})
                    outcome = "raw sent"
                except CapabilityNotSupported:
                    pass
            seen[kind] = (asked, outcome)
        seen["ungated"] = c.supports_update("agent_message_chunk")
        return seen

    h_ref: list[Harness] = []

    async def body() -> None:
        agent = ScriptAgent(script)
        h = record_sent(Harness(agent))
        h_ref.append(h)
        await h.initialize(caps)
        sid = await h.new_session()
        resp = await h.call("session/prompt", prompt_params(sid, "go"))
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        assert agent.result == {
            "ungated": True,
            **{k: (True, "sent") if k in allowed else (False, "refused") for k in GATED},
        }
        assert sorted(u["update"]["sessionUpdate"] for u in h.updates(sid)) == sorted(allowed)
        assert_all_valid(h)
        await close_and_check(h)

    run(body())


def test_helpers_refuse_arguments_that_would_make_a_malformed_update(run: Any) -> None:
    async def script(c: Client, sid: str) -> list[str]:
        refused = []
        for name, call in [
            ("no variant", lambda: c.plan_update(sid, "p")),
            ("two variants", lambda: c.plan_update(sid, "p", markdown="x", uri="file:///x")),
            ("path without markdown", lambda: c.plan_update(sid, "p", uri="file:///x", path="/x")),
            ("cancel for a child nobody runs", lambda: c.subagent_update(sid, "kid", capabilities={"cancel": {}})),
        ]:
            try:
                await call()
            except ValueError:
                refused.append(name)
        return refused

    async def body() -> None:
        h, agent, sid, resp = await run_script(script, ALL_CAPS)
        assert resp["result"] == {"stopReason": "end_turn"}, resp
        assert agent.result == ["no variant", "two variants", "path without markdown",
                                "cancel for a child nobody runs"]
        assert h.updates(sid) == []
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "notice", "title": "no severity"},
        {"sessionUpdate": "notice", "severity": "info", "title": ""},
        {"sessionUpdate": "notice", "severity": "info", "title": "t", "detail": "misspelt"},
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "plan_id": "p", "entries": []}},
        {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p", "path": "/x"}},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c", "content": "bare string"},
        {"sessionUpdate": "subagent_update", "sessionId": "k", "state": {"state": "idle", "stop_reason": "x"}},
        {"sessionUpdate": "subagent_update", "sessionId": "k", "capabilities": {"cancel": {}, "kill": {}}},
        {"sessionUpdate": "session_message_chunk", "messageId": "m"},
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": [
            {"content": "a", "priority": "high", "status": "pending", "prio": 1}]}},
    ],
)
def test_the_schema_oracle_refuses_malformed_updates(update: dict[str, Any]) -> None:
    with pytest.raises(AssertionError):
        check_update({"sessionId": "s", "update": update})
