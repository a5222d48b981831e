"""The ACP agent surface: every client->agent method, capability advertisement,
version negotiation, params validation (R01, R24), and the Client handle's
agent->client calls, each answered by the test client. Every message the
agent writes is checked against the official SDK schema (schema_oracle).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from schema_oracle import assert_schema_valid, record_sent

from acp_fast.agent.base import Agent, current_turn
from acp_fast.agent.client_handle import CapabilityNotSupported
from acp_fast.agent.methods import AGENT_METHODS
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")

CWD = "/tmp"


class FullAgent(Agent):
    """Implements every method; records each call with its keyword arguments."""

    background_extensions = frozenset({"_test/slow"})

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.prompt_started = asyncio.Event()

    def _record(self, name: str, **kw: Any) -> None:
        self.calls.append((name, kw))

    def called(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kw: Any) -> dict[str, Any]:
        self._record("initialize", protocol_version=protocol_version, client_info=client_info)
        return {"agentInfo": {"name": "full", "version": "1"},
                "authMethods": [{"id": "login", "name": "Log in"}]}

    async def authenticate(self, method_id: str, **kw: Any) -> None:
        self._record("authenticate", method_id=method_id)

    async def logout(self, **kw: Any) -> None:
        self._record("logout")

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]],
                          additional_directories: list[str] | None = None, **kw: Any) -> dict[str, Any]:
        self._record("new_session", cwd=cwd, mcp_servers=mcp_servers, additional_directories=additional_directories)
        return {"sessionId": f"s{len(self.called('new_session'))}"}

    async def load_session(self, session_id: str, cwd: str, mcp_servers: list[dict[str, Any]],
                           additional_directories: list[str] | None = None, **kw: Any) -> None:
        self._record("load_session", session_id=session_id, cwd=cwd)

    async def resume_session(self, session_id: str, cwd: str, mcp_servers: Any = None,
                             additional_directories: Any = None, **kw: Any) -> None:
        self._record("resume_session", session_id=session_id, cwd=cwd)

    async def fork_session(self, session_id: str, cwd: str, mcp_servers: Any = None,
                           additional_directories: Any = None, **kw: Any) -> dict[str, Any]:
        self._record("fork_session", session_id=session_id, cwd=cwd)
        return {"sessionId": f"{session_id}-fork"}

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kw: Any) -> dict[str, Any]:
        self._record("list_sessions", cwd=cwd, cursor=cursor)
        return {"sessions": [{"sessionId": "s1", "cwd": CWD}]}

    async def delete_session(self, session_id: str, **kw: Any) -> None:
        self._record("delete_session", session_id=session_id)

    async def close_session(self, session_id: str, **kw: Any) -> None:
        self._record("close_session", session_id=session_id)

    async def set_session_mode(self, session_id: str, mode_id: str, **kw: Any) -> None:
        self._record("set_session_mode", session_id=session_id, mode_id=mode_id)

    async def set_config_option(self, session_id: str, config_id: str, value: str | bool, **kw: Any) -> dict[str, Any]:
        self._record("set_config_option", session_id=session_id, config_id=config_id, value=value, **kw)
        if isinstance(value, bool):
            return {"configOptions": [{"id": config_id, "name": "Fast", "type": "boolean", "currentValue": value}]}
        return {"configOptions": [{"id": config_id, "name": "Model", "type": "select", "currentValue": value,
                                   "options": [{"value": value, "name": str(value)}]}]}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> str:
        self._record("prompt", session_id=session_id, prompt=prompt)
        if prompt[0].get("text") == "wait":
            self.prompt_started.set()
            await current_turn().token.wait()
            return "end_turn"
        return "max_tokens"

    async def cancel(self, session_id: str, **kw: Any) -> None:
        self._record("cancel", session_id=session_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        self._record("ext_method", method=method, params=params)
        return {"echo": params}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self._record("ext_notification", method=method, params=params)


class MinimalAgent(Agent):
    """Only the baseline; claims capabilities it does not implement."""

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kw: Any) -> dict[str, Any]:
        return {"agentCapabilities": {"loadSession": True,
                                      "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
                                      "mcpCapabilities": {"acp": True}}}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
        return None


async def _started(agent: Agent, caps: dict[str, Any] | None = None) -> Harness:
    h = record_sent(Harness(agent))
    await h.initialize(caps)
    return h


# -- initialize: version negotiation and capabilities --------------------------------------


@pytest.mark.parametrize(("requested", "answered"), [(1, 1), (2, 1), (0, 1), (65535, 1)])
def test_r01_initialize_echoes_a_supported_version_else_answers_the_latest(run: Any, requested: int,
                                                                          answered: int) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = record_sent(Harness(agent))
        resp = await h.call("initialize", {"protocolVersion": requested, "clientInfo": {"name": "t", "version": "1"}})
        assert resp["result"]["protocolVersion"] == answered
        assert agent.called("initialize") == [{"protocol_version": requested,
                                               "client_info": {"name": "t", "version": "1"}}]
        assert resp["result"]["agentInfo"] == {"name": "full", "version": "1"}
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r01_initialize_advertises_every_implemented_optional_method(run: Any) -> None:
    async def body() -> None:
        h = await _started(FullAgent())
        caps = h.messages[0]["result"]["agentCapabilities"]
        assert caps["loadSession"] is True
        assert caps["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}}
        assert caps["auth"] == {"logout": {}}
        assert "acp" not in caps.get("mcpCapabilities", {})  # no provider, no client role
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r24_unimplemented_methods_are_not_advertised_and_answer_method_not_found(run: Any) -> None:
    async def body() -> None:
        h = await _started(MinimalAgent())
        caps = h.messages[0]["result"]["agentCapabilities"]
        assert "loadSession" not in caps
        assert caps.get("sessionCapabilities", {}) == {}
        assert "auth" not in caps and "acp" not in caps.get("mcpCapabilities", {})
        sid = await h.new_session()
        calls = {
            "authenticate": {"methodId": "login"},
            "logout": {},
            "session/load": {"sessionId": sid, "cwd": CWD, "mcpServers": []},
            "session/resume": {"sessionId": sid, "cwd": CWD},
            "session/fork": {"sessionId": sid, "cwd": CWD},
            "session/list": {},
            "session/delete": {"sessionId": sid},
            "session/close": {"sessionId": sid},
            "session/set_mode": {"sessionId": sid, "modeId": "ask"},
            "session/set_config_option": {"sessionId": sid, "configId": "m", "value": "x"},
            "mcp/connect": {"serverId": "x"},
            "mcp/disconnect": {"connectionId": "x"},
            "_vendor/thing": {},
            "no/such_method": {},
        }
        for method, params in calls.items():
            resp = await h.call(method, params)
            assert resp.get("error", {}).get("code") == -32601, (method, resp)
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r24_prompt_on_an_agent_without_prompt_answers_method_not_found(run: Any) -> None:
    async def body() -> None:
        h = await _started(Agent())
        sid = await h.new_session()
        resp = await h.call("session/prompt", prompt_params(sid, "hi"))
        assert resp["error"]["code"] == -32601
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r24_requests_before_initialize_are_refused(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = record_sent(Harness(agent))
        resp = await h.call("session/new", {"cwd": CWD, "mcpServers": []})
        assert resp["error"]["code"] == -32600
        assert agent.called("new_session") == []
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- every method reaches its handler with snake_case arguments ----------------------------


def test_r01_every_control_method_reaches_its_handler_and_answers_schema_valid_results(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = await _started(agent)
        auth = await h.call("authenticate", {"methodId": "login"})
        assert auth["result"] == {} and agent.called("authenticate") == [{"method_id": "login"}]
        assert h.server.context.authenticated
        new = await h.call("session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": ["/var"]})
        sid = new["result"]["sessionId"]
        assert agent.called("new_session") == [{"cwd": CWD, "mcp_servers": [], "additional_directories": ["/var"]}]
        assert sid in h.server.sessions
        assert (await h.call("session/load", {"sessionId": sid, "cwd": CWD, "mcpServers": []}))["result"] == {}
        assert (await h.call("session/resume", {"sessionId": sid, "cwd": CWD}))["result"] == {}
        fork = await h.call("session/fork", {"sessionId": sid, "cwd": CWD})
        assert fork["result"]["sessionId"] == f"{sid}-fork" and f"{sid}-fork" in h.server.sessions
        listed = await h.call("session/list", {"cwd": CWD, "cursor": "c1"})
        assert listed["result"]["sessions"][0]["sessionId"] == "s1"
        assert agent.called("list_sessions") == [{"cwd": CWD, "cursor": "c1"}]
        assert (await h.call("session/set_mode", {"sessionId": sid, "modeId": "code"}))["result"] == {}
        assert h.server.sessions.get(sid).mode_id == "code"
        opt = await h.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "big"})
        assert opt["result"]["configOptions"][0]["currentValue"] == "big"
        boolean = await h.call("session/set_config_option",
                               {"sessionId": sid, "configId": "fast", "type": "boolean", "value": True})
        assert "result" in boolean
        assert agent.called("set_config_option")[1] == {"session_id": sid, "config_id": "fast", "value": True,
                                                         "type": "boolean"}
        prompt = await h.call("session/prompt", prompt_params(sid, "go"))
        assert prompt["result"] == {"stopReason": "max_tokens"}
        assert (await h.call("session/close", {"sessionId": sid}))["result"] == {}
        assert sid not in h.server.sessions and agent.called("close_session") == [{"session_id": sid}]
        assert (await h.call("session/delete", {"sessionId": f"{sid}-fork"}))["result"] == {}
        assert f"{sid}-fork" not in h.server.sessions
        assert (await h.call("logout", {}))["result"] == {}
        assert not h.server.context.authenticated
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r10_session_cancel_notification_cancels_the_turn_and_gets_no_response(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = await _started(agent)
        sid = await h.new_session()
        rid = h.request("session/prompt", prompt_params(sid, "wait"))
        await agent.prompt_started.wait()
        before = len(h.messages)
        h.notify("session/cancel", {"sessionId": sid})
        resp = await h.response(rid)
        assert resp["result"] == {"stopReason": "cancelled"}
        assert agent.called("cancel") == [{"session_id": sid}]
        assert len(h.messages) == before + 1  # the prompt's response, nothing for the notification
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r12_cancel_request_notification_cancels_that_prompt(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = await _started(agent)
        sid = await h.new_session()
        rid = h.request("session/prompt", prompt_params(sid, "wait"))
        await agent.prompt_started.wait()
        h.notify("$/cancel_request", {"requestId": rid})
        assert (await h.response(rid))["result"] == {"stopReason": "cancelled"}
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r01_extension_requests_and_notifications_reach_the_agent(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = await _started(agent)
        resp = await h.call("_vendor/echo", {"x": 1})
        assert resp["result"] == {"echo": {"x": 1}}
        slow = await h.call("_test/slow", {"y": 2})  # declared background: answered from the pool
        assert slow["result"] == {"echo": {"y": 2}}
        h.notify("_vendor/note", {"z": 3})
        h.notify("unknown/notification", {"z": 4})  # ignored, never answered
        marker = await h.call("_vendor/echo", {"after": True})
        assert "result" in marker
        assert agent.called("ext_notification") == [{"method": "_vendor/note", "params": {"z": 3}}]
        assert [m for m in h.messages if m.get("id") is None] == []
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- params are checked before the handler runs ---------------------------------------------


_BAD_PARAMS = [
    ("initialize", {}, "protocolVersion"),
    ("initialize", {"protocolVersion": "1"}, "protocolVersion"),
    ("authenticate", {}, "methodId"),
    ("authenticate", {"methodId": 7}, "methodId"),
    ("session/new", {"mcpServers": []}, "cwd"),
    ("session/new", {"cwd": "relative/dir", "mcpServers": []}, "cwd"),
    ("session/new", {"cwd": CWD}, "mcpServers"),
    ("session/new", {"cwd": CWD, "mcpServers": {}}, "mcpServers"),
    ("session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": ["rel"]}, "additionalDirectories"),
    ("session/load", {"cwd": CWD, "mcpServers": []}, "sessionId"),
    ("session/resume", {"sessionId": "s1"}, "cwd"),
    ("session/fork", {"sessionId": 1, "cwd": CWD}, "sessionId"),
    ("session/list", {"cursor": 3}, "cursor"),
    ("session/delete", {}, "sessionId"),
    ("session/close", {"sessionId": ["s1"]}, "sessionId"),
    ("session/set_mode", {"sessionId": "s1"}, "modeId"),
    ("session/set_config_option", {"sessionId": "s1", "configId": "m"}, "value"),
    ("session/set_config_option", {"sessionId": "s1", "configId": "m", "value": 3}, "value"),
    ("session/prompt", {"sessionId": "s1"}, "prompt"),
    ("session/prompt", {"sessionId": "s1", "prompt": ["hi"]}, "prompt"),
    ("session/prompt", {"prompt": []}, "sessionId"),
    ("session/new", {"cwd": CWD, "mcpServers": [], "systemPrompt": "be brief"}, "systemPrompt"),
    ("session/list", {"archived": True}, "archived"),
    ("session/archive", {}, "sessionId"),
    ("session/unarchive", {"sessionId": 1}, "sessionId"),
    ("session/status", {}, "sessionId"),
    ("session/set_title", {"sessionId": "s1"}, "title"),
    ("providers/set", {"providerId": "p", "apiType": "openai"}, "baseUrl"),
    ("providers/disable", {}, "providerId"),
]


@pytest.mark.parametrize(("method", "params", "field"), _BAD_PARAMS, ids=[f"{m}-{f}" for m, _, f in _BAD_PARAMS])
def test_r24_bad_params_get_invalid_params_naming_the_field_before_the_handler_runs(
    run: Any, method: str, params: dict[str, Any], field: str
) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = record_sent(Harness(agent))
        if method != "initialize":
            await h.initialize()
        calls_before = len(agent.calls)
        resp = await h.call(method, params)
        assert resp["error"]["code"] == -32602, resp
        assert resp["error"]["data"] == {"field": field}
        assert repr(field) in resp["error"]["message"]
        assert len(agent.calls) == calls_before, agent.calls[calls_before:]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r24_every_request_method_in_the_table_has_a_bad_params_case() -> None:
    covered = {m for m, _, _ in _BAD_PARAMS}
    fielded = {m for m, spec in AGENT_METHODS.items()
               if not spec.notification and any(f.required for f in spec.fields) and not m.startswith("mcp/")}
    assert fielded <= covered, fielded - covered


def test_r06_malformed_cancel_notifications_are_dropped_without_an_answer(run: Any) -> None:
    async def body() -> None:
        agent = FullAgent()
        h = await _started(agent)
        h.notify("session/cancel", {})
        h.notify("session/cancel", {"sessionId": 5})
        h.notify("$/cancel_request", {"requestId": [1]})
        await h.call("_vendor/echo", {})
        assert agent.called("cancel") == []
        assert all("id" in m and m["id"] is not None for m in h.messages)
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- the Client handle: one helper per session/update variant, and every A->C request -------


class ScriptedAgent(Agent):
    """Its prompt runs the named script against ``self.client``."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
        await getattr(self, "script_" + prompt[0]["text"])(session_id)

    async def script_updates(self, sid: str) -> None:
        c = self.client
        await c.user_message_chunk(sid, "hello", message_id="u1")
        await c.agent_message_chunk(sid, {"type": "text", "text": "hi"}, message_id="a1")
        await c.agent_thought_chunk(sid, "thinking")
        await c.tool_call(sid, "t1", "List", kind="read", status="pending", raw_input={"dir": "/"},
                          locations=[{"path": "/tmp/a", "line": 3}])
        await c.tool_call_update(sid, "t1", status="completed",
                                 content=[{"type": "content", "content": {"type": "text", "text": "a"}}],
                                 raw_output={"n": 1})
        await c.plan(sid, [{"content": "step", "priority": "high", "status": "pending"}])
        await c.available_commands_update(sid, [{"name": "go", "description": "run", "input": {"hint": "x"}}])
        await c.current_mode_update(sid, "code")
        await c.config_option_update(sid, [{"id": "m", "name": "Model", "type": "select", "currentValue": "a",
                                            "options": [{"value": "a", "name": "A"}]}])
        await c.session_info_update(sid, title="T", updated_at="2026-01-01T00:00:00Z")
        await c.session_info_update(sid, title=None)
        await c.usage_update(sid, used=10, size=100, cost={"amount": 0.5, "currency": "USD"})

    async def script_requests(self, sid: str) -> None:
        c = self.client
        r = self.results
        r["permission"] = await c.request_permission(
            sid, {"toolCallId": "t1"}, [{"optionId": "ok", "name": "OK", "kind": "allow_once"}])
        r["read"] = await c.read_text_file(sid, "/tmp/a.txt", line=2, limit=5)
        r["write"] = await c.write_text_file(sid, "/tmp/b.txt", "data")
        term = await c.create_terminal(sid, "ls", args=["-l"], env=[{"name": "A", "value": "1"}], cwd="/tmp",
                                       output_byte_limit=100)
        tid = term["terminalId"]
        r["output"] = await c.terminal_output(sid, tid)
        r["exit"] = await c.wait_for_terminal_exit(sid, tid)
        r["kill"] = await c.kill_terminal(sid, tid)
        r["release"] = await c.release_terminal(sid, tid)

    async def script_gated(self, sid: str) -> None:
        c = self.client
        for name, call in [
            ("read", lambda: c.read_text_file(sid, "/tmp/a")),
            ("write", lambda: c.write_text_file(sid, "/tmp/a", "x")),
            ("terminal", lambda: c.create_terminal(sid, "ls")),
            ("terminal_output", lambda: c.terminal_output(sid, "t")),
            ("elicitation", lambda: c.create_elicitation(
                {"mode": "form", "sessionId": sid, "message": "?", "requestedSchema": {"type": "object"}})),
        ]:
            try:
                await call()
                self.results[name] = "sent"
            except CapabilityNotSupported:
                self.results[name] = "refused"


_VARIANTS = ["user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
             "plan", "available_commands_update", "current_mode_update", "config_option_update",
             "session_info_update", "session_info_update", "usage_update"]


def test_r05_client_has_a_schema_valid_helper_for_every_stable_session_update(run: Any) -> None:
    async def body() -> None:
        h = await _started(ScriptedAgent())
        sid = await h.new_session()
        resp = await h.call("session/prompt", prompt_params(sid, "updates"))
        assert resp["result"] == {"stopReason": "end_turn"}
        updates = [u["update"] for u in h.updates(sid)]
        assert [u["sessionUpdate"] for u in updates] == _VARIANTS
        assert updates[3]["rawInput"] == {"dir": "/"} and updates[3]["locations"] == [{"path": "/tmp/a", "line": 3}]
        assert updates[7] == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
        assert updates[9]["updatedAt"] == "2026-01-01T00:00:00Z"
        assert updates[10] == {"sessionUpdate": "session_info_update", "title": None}
        assert updates[11]["cost"] == {"amount": 0.5, "currency": "USD"}
        # R05: all of them were written before the prompt's response.
        assert h.messages.index(resp) > max(i for i, m in enumerate(h.messages) if m.get("method") == "session/update")
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


_ANSWERS: dict[str, Any] = {
    "session/request_permission": {"outcome": {"outcome": "selected", "optionId": "ok"}},
    "fs/read_text_file": {"content": "line2\n"},
    "fs/write_text_file": None,  # the doc's null form; the helper turns it into {}
    "terminal/create": {"terminalId": "term-1"},
    "terminal/output": {"output": "total 0", "truncated": False, "exitStatus": {"exitCode": 0}},
    "terminal/wait_for_exit": {"exitCode": 0},
    "terminal/kill": {},
    "terminal/release": {},
}


def test_client_requests_reach_the_client_and_return_its_answers(run: Any) -> None:
    async def body() -> None:
        agent = ScriptedAgent()
        h = await _started(agent, {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True})
        sid = await h.new_session()
        rid = h.request("session/prompt", prompt_params(sid, "requests"))
        for n, method in enumerate(_ANSWERS, start=1):
            out = await h.wait_for(lambda n=n: len(h.outgoing_requests()) >= n and h.outgoing_requests()[n - 1])
            assert out["method"] == method
            assert out["params"]["sessionId"] == sid
            h.send({"jsonrpc": "2.0", "id": out["id"], "result": _ANSWERS[method]})
        assert (await h.response(rid))["result"] == {"stopReason": "end_turn"}
        sent = {m["method"]: m["params"] for m in h.outgoing_requests()}
        assert sent["fs/read_text_file"] == {"sessionId": sid, "path": "/tmp/a.txt", "line": 2, "limit": 5}
        assert sent["terminal/create"]["outputByteLimit"] == 100 and sent["terminal/create"]["args"] == ["-l"]
        assert sent["terminal/output"] == {"sessionId": sid, "terminalId": "term-1"}
        r = agent.results
        assert r["permission"] == _ANSWERS["session/request_permission"]
        assert r["read"] == {"content": "line2\n"} and r["write"] == {}
        assert r["output"]["output"] == "total 0" and r["exit"] == {"exitCode": 0}
        assert r["kill"] == {} and r["release"] == {}
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_client_requests_for_unadvertised_capabilities_raise_before_anything_is_sent(run: Any) -> None:
    async def body() -> None:
        agent = ScriptedAgent()
        h = await _started(agent, {"fs": {"readTextFile": False}, "elicitation": {"url": {}}})
        sid = await h.new_session()
        resp = await h.call("session/prompt", prompt_params(sid, "gated"))
        assert resp["result"] == {"stopReason": "end_turn"}
        assert agent.results == {"read": "refused", "write": "refused", "terminal": "refused",
                                 "terminal_output": "refused", "elicitation": "refused"}
        assert h.outgoing_requests() == []
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_client_request_errors_from_the_client_reach_the_agent_as_exceptions(run: Any) -> None:
    class Reader(Agent):
        error: Any = None

        async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
            try:
                await self.client.read_text_file(session_id, "/missing")
            except Exception as exc:
                self.error = exc

    async def body() -> None:
        agent = Reader()
        h = await _started(agent, {"fs": {"readTextFile": True}})
        sid = await h.new_session()
        rid = h.request("session/prompt", prompt_params(sid, "x"))
        out = await h.wait_for(lambda: h.outgoing_requests("fs/read_text_file"))
        h.send({"jsonrpc": "2.0", "id": out[0]["id"],
                "error": {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///missing"}}})
        await h.response(rid)
        assert getattr(agent.error, "code", None) == -32002
        assert agent.error.data == {"uri": "file:///missing"}
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r24_agent_classes_sharing_a_process_each_get_their_own_served_methods(run: Any) -> None:
    """The route table is built once per agent class: one class's control handlers never serve another's."""

    async def body() -> None:
        for order in ((FullAgent, MinimalAgent), (MinimalAgent, FullAgent)):
            for agent_cls in order:
                h = await _started(agent_cls())
                resp = await h.call("session/list", {})
                if agent_cls is FullAgent:
                    assert "sessions" in resp.get("result", {}), resp
                else:
                    error = resp.get("error", {})
                    assert error.get("code") == -32601 and "not supported by this agent" in error["message"], resp
                await close_and_check(h)

    run(body())
