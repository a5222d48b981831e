"""The protocol of schema 1.34: undeclared params reach the agent, systemPrompt, the unstable 1.29-1.32
methods, and session/load and session/resume (one rule for a session already open; the answer
follows the whole replay, the start callback's updates included: R22).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from schema_oracle import NPM_SCHEMA_UNSTABLE, assert_schema_valid, needs_npm_schema, record_sent

from acp_fast.agent.base import Agent, current_turn
from tests.helpers import AgentProcess, Harness, close_and_check, prompt_params

CWD = "/tmp"
TEXT = [{"type": "text", "text": "be brief"}]


class Recording(Agent):
    """Records what each handler received; prompt waits on its token when asked to."""

    def __init__(self) -> None:
        self.got: dict[str, list[dict[str, Any]]] = {}
        self.waiting = asyncio.Event()

    def seen(self, name: str, **kw: Any) -> None:
        self.got.setdefault(name, []).append(kw)

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kw: Any) -> dict[str, Any]:
        self.seen("new_session", cwd=cwd, **kw)
        return {"sessionId": f"s{len(self.got['new_session'])}"}

    async def load_session(self, session_id: str, cwd: str, mcp_servers: list[Any], **kw: Any) -> None:
        self.seen("load_session", cwd=cwd, mcp_servers=mcp_servers, **kw)

    async def resume_session(self, session_id: str, cwd: str, mcp_servers: Any = None, **kw: Any) -> None:
        self.seen("resume_session", cwd=cwd, mcp_servers=mcp_servers, **kw)

    async def fork_session(self, session_id: str, cwd: str, mcp_servers: Any = None, **kw: Any) -> dict[str, Any]:
        self.seen("fork_session", **kw)
        return {"sessionId": session_id + "-fork"}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> str:
        self.seen("prompt", session_id=session_id, **kw)
        if prompt[0].get("text") == "wait":
            self.waiting.set()
            await current_turn().token.wait()
        return "end_turn"


class Narrow(Agent):
    """Handlers written without ``**kwargs``: they get only what they name."""

    def __init__(self) -> None:
        self.ids: list[Any] = []

    async def new_session(self, cwd: str, mcp_servers: list[Any]) -> dict[str, Any]:  # type: ignore[override]
        return {"sessionId": "n1"}

    async def prompt(self, session_id: str, prompt: list[Any], message_id: str | None = None) -> str:  # type: ignore[override]
        self.ids.append(message_id)
        return "end_turn"


async def _started(agent: Agent, caps: dict[str, Any] | None = None) -> tuple[Harness, dict[str, Any]]:
    h = record_sent(Harness(agent))
    init = await h.initialize(caps)
    return h, init


# -- every param reaches the agent -------------------------------------------------------------------


def test_undeclared_params_reach_a_handler_with_kwargs_under_snake_case_names(run: Any) -> None:
    async def body() -> None:
        agent = Recording()
        h, _ = await _started(agent)
        params = {"cwd": CWD, "mcpServers": [], "zzNoSchemaHasThis": {"k": [1]}, "_meta": {"trace": "t"}}
        sid = (await h.call("session/new", params))["result"]["sessionId"]
        assert agent.got["new_session"][0] == {
            "cwd": CWD,
            "additional_directories": None,
            "zz_no_schema_has_this": {"k": [1]},
            "field_meta": {"trace": "t"},
        }
        prompt = {**prompt_params(sid, "hi"), "messageId": "m-1", "session_id": "shadow", "field_meta": 3}
        assert (await h.call("session/prompt", prompt))["result"] == {"stopReason": "end_turn"}
        # A name that would replace a declared param or field_meta is dropped: the declared value wins.
        assert agent.got["prompt"] == [{"session_id": sid, "message_id": "m-1"}]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_a_handler_without_kwargs_gets_only_the_params_it_names(run: Any) -> None:
    async def body() -> None:
        agent = Narrow()
        h, _ = await _started(agent)
        new = await h.call("session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": [], "x": 1})
        assert new["result"]["sessionId"] == "n1"
        for extra in ({"messageId": "m-2", "other": True}, {"other": True}, {}):
            resp = await h.call("session/prompt", {**prompt_params("n1", "hi"), **extra})
            assert resp["result"] == {"stopReason": "end_turn"}, resp
        assert agent.ids == ["m-2", None, None]
        await close_and_check(h)

    run(body())


# -- systemPrompt (schema 1.30) ---------------------------------------------------------------------


class Prompted(Recording):
    system_prompt_modes: ClassVar[frozenset[str]] = frozenset({"append"})


class Overriding(Recording):
    system_prompt_modes: ClassVar[frozenset[str]] = frozenset({"append", "override"})


def test_system_prompt_is_refused_with_invalid_params_when_the_agent_does_not_declare_it(run: Any) -> None:
    async def body() -> None:
        agent = Recording()
        h, init = await _started(agent)
        assert "systemPrompt" not in init["agentCapabilities"].get("sessionCapabilities", {})
        resp = await h.call(
            "session/new", {"cwd": CWD, "mcpServers": [], "systemPrompt": {"mode": "append", "content": TEXT}}
        )
        assert resp["error"]["code"] == -32602
        assert "systemPrompt" in resp["error"]["message"]
        assert "new_session" not in agent.got and len(h.server.sessions) == 0
        await close_and_check(h)

    run(body())


@needs_npm_schema
def test_system_prompt_capability_and_unstable_answers_are_valid_under_the_newest_schema(run: Any) -> None:
    async def body() -> None:
        h, init = await _started(Overriding())
        assert init["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
        sp = {"mode": "override", "content": TEXT}
        assert "result" in await h.call("session/new", {"cwd": CWD, "mcpServers": [], "systemPrompt": sp})
        assert assert_schema_valid(h, NPM_SCHEMA_UNSTABLE) >= 2
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize(("cls", "advertised"), [(Prompted, {}), (Overriding, {"mode": {"override": {}}})])
def test_system_prompt_reaches_every_opening_method_of_an_agent_that_declares_it(
    run: Any, cls: type[Recording], advertised: dict[str, Any]
) -> None:
    async def body() -> None:
        agent = cls()
        h, init = await _started(agent)
        assert init["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == advertised
        sp = {"mode": "append", "content": TEXT}
        sid = (await h.call("session/new", {"cwd": CWD, "mcpServers": [], "systemPrompt": sp}))["result"]["sessionId"]
        for method in ("session/load", "session/resume", "session/fork"):
            resp = await h.call(method, {"sessionId": sid, "cwd": CWD, "mcpServers": [], "systemPrompt": sp})
            assert "result" in resp, resp
        for name in ("new_session", "load_session", "resume_session", "fork_session"):
            assert agent.got[name][-1]["system_prompt"] == sp, name
        plain = await h.call("session/new", {"cwd": CWD, "mcpServers": []})  # none sent: no argument at all
        assert "result" in plain and "system_prompt" not in agent.got["new_session"][-1]
        if NPM_SCHEMA_UNSTABLE.exists():  # the 0.12 models predate systemPrompt; see the test below
            assert_schema_valid(h, NPM_SCHEMA_UNSTABLE)
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize(
    ("sp", "field"),
    [
        ({"mode": "override", "content": TEXT}, "systemPrompt.mode"),
        ({"mode": "sideways", "content": TEXT}, "systemPrompt.mode"),
        ({"mode": "append", "content": "be brief"}, "systemPrompt.content"),
        ({"mode": "append"}, "systemPrompt.content"),
    ],
)
def test_a_system_prompt_the_agent_cannot_apply_is_refused_before_it_runs(run: Any, sp: Any, field: str) -> None:
    async def body() -> None:
        agent = Prompted()
        h, _ = await _started(agent)
        resp = await h.call("session/new", {"cwd": CWD, "mcpServers": [], "systemPrompt": sp})
        assert resp["error"]["code"] == -32602 and resp["error"]["data"] == {"field": field}, resp
        assert "new_session" not in agent.got
        assert "result" in await h.call("session/new", {"cwd": CWD, "mcpServers": []})  # still serving
        await close_and_check(h)

    run(body())


# -- unstable methods of schema 1.29-1.32 --------------------------------------------------------------


class Unstable(Recording):
    """Implements every unstable method; each answers what it was given."""

    async def archive_session(self, session_id: str, **kw: Any) -> None:
        self.seen("archive_session", session_id=session_id)

    async def unarchive_session(self, session_id: str, **kw: Any) -> None:
        self.seen("unarchive_session", session_id=session_id)

    async def session_status(self, session_id: str, **kw: Any) -> dict[str, Any]:
        return {"status": "open" if session_id.startswith("s") else "saved"}

    async def set_session_title(self, session_id: str, title: str, **kw: Any) -> None:
        self.seen("set_session_title", session_id=session_id, title=title)

    async def auth_status(self, **kw: Any) -> dict[str, Any]:
        return {"state": "authenticated"}

    async def list_providers(self, **kw: Any) -> dict[str, Any]:
        return {"providers": []}

    async def set_provider(self, provider_id: str, api_type: str, base_url: str, **kw: Any) -> None:
        self.seen("set_provider", provider_id=provider_id, api_type=api_type, base_url=base_url, **kw)

    async def disable_provider(self, provider_id: str, **kw: Any) -> None:
        self.seen("disable_provider", provider_id=provider_id)

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kw: Any) -> dict[str, Any]:
        self.seen("list_sessions", **kw)
        return {"sessions": []}


class ArchiveOnly(Recording):
    async def archive_session(self, session_id: str, **kw: Any) -> None:
        return None


def test_unstable_methods_reach_an_agent_that_implements_them_and_are_advertised(run: Any) -> None:
    async def body() -> None:
        agent = Unstable()
        h, init = await _started(agent)
        caps = init["agentCapabilities"]
        assert {"archive", "status", "title"} <= set(caps["sessionCapabilities"])
        assert caps["auth"]["status"] == {} and caps["providers"] == {}
        sid = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        assert (await h.call("session/status", {"sessionId": sid}))["result"] == {"status": "open"}
        assert (await h.call("session/set_title", {"sessionId": sid, "title": "T"}))["result"] == {"title": "T"}
        assert (await h.call("auth/status", {}))["result"] == {"state": "authenticated"}
        assert (await h.call("providers/list"))["result"] == {"providers": []}
        set_params = {"providerId": "p", "apiType": "openai", "baseUrl": "http://127.0.0.1:1", "headers": {"a": "b"}}
        assert (await h.call("providers/set", set_params))["result"] == {}
        assert (await h.call("providers/disable", {"providerId": "p"}))["result"] == {}
        assert (await h.call("session/list", {"archived": "only"}))["result"] == {"sessions": []}
        assert agent.got["list_sessions"] == [{"archived": "only"}]
        assert agent.got["set_provider"] == [
            {"provider_id": "p", "api_type": "openai", "base_url": "http://127.0.0.1:1", "headers": {"a": "b"}}
        ]
        # Archiving an open session with a running prompt: the prompt is cancelled, the session closed.
        rid = h.request("session/prompt", prompt_params(sid, "wait"))
        await agent.waiting.wait()
        assert (await h.call("session/archive", {"sessionId": sid}))["result"] == {}
        assert (await h.response(rid))["result"] == {"stopReason": "cancelled"}
        assert h.server.sessions.find(sid) is None
        assert (await h.call("session/unarchive", {"sessionId": sid}))["result"] == {}
        assert agent.got["archive_session"] == agent.got["unarchive_session"] == [{"session_id": sid}]
        if NPM_SCHEMA_UNSTABLE.exists():  # every answer above, under the schema that has these methods
            assert_schema_valid(h, NPM_SCHEMA_UNSTABLE)
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize("cls", [Recording, ArchiveOnly])
def test_unstable_methods_an_agent_lacks_answer_method_not_found_and_are_not_advertised(
    run: Any, cls: type[Agent]
) -> None:
    async def body() -> None:
        h, init = await _started(cls())
        caps = init["agentCapabilities"]
        assert not {"archive", "status", "title"} & set(caps.get("sessionCapabilities", {}))  # archive needs both
        assert "providers" not in caps and "status" not in caps.get("auth", {})
        for method, params in [
            ("session/unarchive", {"sessionId": "s"}),
            ("session/status", {"sessionId": "s"}),
            ("auth/status", {}),
            ("providers/list", {}),
        ]:
            assert (await h.call(method, params))["error"]["code"] == -32601, method
        await close_and_check(h)

    run(body())


# -- session/load and session/resume of a session already open here -------------------------------------


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_reopening_an_open_session_takes_the_new_cwd_and_mcp_servers(run: Any, method: str) -> None:
    async def body() -> None:
        agent = Recording()
        h, _ = await _started(agent)
        sid = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        h.server.sessions.get(sid).data["kept"] = True
        acp = [{"type": "acp", "name": "tools", "serverId": "srv-2"}]
        assert "result" in await h.call(method, {"sessionId": sid, "cwd": "/var", "mcpServers": acp})
        session = h.server.sessions.get(sid)
        assert (session.cwd, session.mcp_servers, session.data) == ("/var", acp, {"kept": True})
        assert h.server._declared_acp_servers() == ["srv-2"]  # the MCP bridge sees the new server
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_r07_reopening_a_session_with_a_running_prompt_is_refused(run: Any, method: str) -> None:
    async def body() -> None:
        agent = Recording()
        h, _ = await _started(agent)
        sid = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        rid = h.request("session/prompt", prompt_params(sid, "wait"))
        await agent.waiting.wait()
        resp = await h.call(method, {"sessionId": sid, "cwd": "/var", "mcpServers": []})
        assert resp["error"]["code"] == -32000 and sid in resp["error"]["message"]
        assert not agent.got.get(method.replace("session/", "") + "_session")
        assert h.server.sessions.get(sid).cwd == CWD
        h.notify("session/cancel", {"sessionId": sid})
        assert (await h.response(rid))["result"] == {"stopReason": "cancelled"}
        await close_and_check(h)

    run(body())


# -- R22: the load/resume answer follows the replay and the start callback ---------------------------------


class Replaying(Recording):
    """Replays history on load; its start callback announces commands, asks the client, then reports."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    async def load_session(self, session_id: str, cwd: str, mcp_servers: list[Any], **kw: Any) -> None:
        await self.client.user_message_chunk(session_id, "replayed")

    async def on_session_start(self, session_id: str) -> None:
        self.started.append(session_id)
        await self.client.available_commands_update(session_id, [{"name": "go", "description": "go"}])
        answer = await self.client.ext_method("_test/hello", {"sessionId": session_id})
        await self.client.agent_message_chunk(session_id, f"ready {answer['n']}")


def _kinds(h: Harness, sid: str) -> list[str]:
    return [u["update"]["sessionUpdate"] for u in h.updates(sid)]


@pytest.mark.usefixtures("read_path")
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_r22_load_and_resume_answer_after_the_replay_and_the_start_callback(run: Any, method: str) -> None:
    async def body() -> None:
        agent = Replaying()
        h, _ = await _started(agent)
        rid = h.request(method, {"sessionId": "old", "cwd": CWD, "mcpServers": []})
        ask = await h.wait_for(lambda: h.outgoing_requests("_test/hello"))
        assert h.find_response(rid) is None  # the callback is still running: no answer yet
        # The control lane is free meanwhile: the callback can await the client (R21 does not apply).
        assert "result" in await h.call("session/new", {"cwd": CWD, "mcpServers": []})
        h.send({"jsonrpc": "2.0", "id": ask[0]["id"], "result": {"n": 5}})
        await h.response(rid)
        answered = next(i for i, m in enumerate(h.messages) if m.get("id") == rid and "method" not in m)
        old = [i for i, m in enumerate(h.messages) if m.get("method") == "session/update"
               and m["params"]["sessionId"] == "old"]
        expected = ["available_commands_update", "agent_message_chunk"]
        if method == "session/load":
            expected.insert(0, "user_message_chunk")
        assert _kinds(h, "old") == expected and max(old) < answered
        assert agent.started.count("old") == 1
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


class FailingStart(Recording):
    async def on_session_start(self, session_id: str) -> None:
        raise RuntimeError("start failed")


def test_r22_a_failing_start_callback_still_lets_the_load_answer(run: Any) -> None:
    async def body() -> None:
        h, _ = await _started(FailingStart())
        resp = await h.call("session/load", {"sessionId": "old", "cwd": CWD, "mcpServers": []})
        assert resp["result"] == {}
        await close_and_check(h)

    run(body())


def test_r13_eof_while_a_load_waits_for_its_start_callback_still_answers_the_load(run: Any) -> None:
    async def body() -> None:
        h, _ = await _started(Replaying())
        rid = h.request("session/load", {"sessionId": "old", "cwd": CWD, "mcpServers": []})
        await h.wait_for(lambda: h.outgoing_requests("_test/hello"))
        h.eof()
        await h.task
        assert len(h.responses(rid)) == 1  # exactly one answer, written before the connection closed
        h.assert_no_leaks()

    run(body())


@pytest.mark.slow
def test_r22_demo_load_over_a_real_pipe_sends_nothing_for_the_session_after_its_answer() -> None:
    with AgentProcess("demo") as agent:
        agent.initialize()
        sid = agent.new_session()
        _, resp = agent.until_response(agent.request("session/prompt", prompt_params(sid, "hello")))
        assert resp["result"]["stopReason"] == "end_turn"
        before, resp = agent.until_response(
            agent.request("session/load", {"sessionId": sid, "cwd": CWD, "mcpServers": []})
        )
        assert "result" in resp, resp
        kinds = [m["params"]["update"]["sessionUpdate"] for m in before if m.get("method") == "session/update"]
        assert "user_message_chunk" in kinds and kinds[-1] == "available_commands_update", kinds
        # A quiet period: a round trip the client starts after the answer finds nothing in between.
        between, marker = agent.until_response(agent.request("_acp_fast/unknown", {}))
        assert marker["error"]["code"] == -32601 and between == [], between
        agent.close_stdin()
        assert agent.wait() == 0


def test_reopen_rule_covers_load_after_load_for_the_start_callback(run: Any) -> None:
    """A second load runs the start callback again, before its own answer."""

    async def body() -> None:
        agent = Replaying()
        h, _ = await _started(agent)
        for n in (1, 2):
            rid = h.request("session/load", {"sessionId": "old", "cwd": CWD, "mcpServers": []})
            ask = await h.wait_for(lambda n=n: len(h.outgoing_requests("_test/hello")) == n and h.outgoing_requests())
            h.send({"jsonrpc": "2.0", "id": ask[-1]["id"], "result": {"n": n}})
            await h.response(rid)
        assert agent.started == ["old", "old"]
        await close_and_check(h)

    run(body())


class NarrowCancel(Recording):
    """A cancel hook written without ``**kwargs``: a cancel's ``_meta`` must not break it."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = asyncio.Event()

    async def cancel(self, session_id: str) -> None:  # type: ignore[override]
        self.seen("cancel", session_id=session_id)
        self.cancelled.set()


def test_r06_a_cancel_hook_without_kwargs_gets_only_the_session_id(run: Any) -> None:
    async def body() -> None:
        agent = NarrowCancel()
        h, _ = await _started(agent)
        sid = (await h.call("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        rid = h.request("session/prompt", prompt_params(sid, "wait"))
        await agent.waiting.wait()
        h.notify("session/cancel", {"sessionId": sid, "_meta": {"traceparent": "00-x"}, "reason": "user"})
        assert (await h.response(rid))["result"] == {"stopReason": "cancelled"}
        await agent.cancelled.wait()
        assert agent.got["cancel"] == [{"session_id": sid}]
        await close_and_check(h)

    run(body())
