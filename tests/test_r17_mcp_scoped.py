"""R17: the request-scoped form of MCP over ACP (schema 1.24), beside the connect form.

Provider role: a client speaking the request-scoped form (``mcp/message
{serverId, requestId}``) and one speaking the connect form, against the same
agent. Client role: ``Client.mcp_request`` against a client serving each
form, and the rule that picks the form. Bad input gets a clear JSON-RPC error
and the connection keeps serving. The last test runs a real agent process
over pipes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from schema_oracle import NPM_SCHEMA_UNSTABLE, assert_schema_valid, needs_npm_schema, record_sent

from acp_fast.agent.base import Agent
from acp_fast.agent.mcp_bridge import (
    MCP_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    McpError,
    McpProvider,
    McpScope,
    McpServerUnavailable,
)
from acp_fast.wire.errors import AcpError, ConnectionClosed, InvalidParams, OtherError
from acp_fast.wire.limits import Limits
from tests.helpers import AgentProcess, Harness, close_and_check, prompt_params
from tests.test_r17_mcp import ToolsProvider

pytestmark = pytest.mark.usefixtures("read_path")

CWD = "/tmp"
ACP_SERVER = {"type": "acp", "name": "project-tools", "serverId": "srv-1"}


class ScopedProvider(ToolsProvider):
    """Serves "tools" in both forms; the request-scoped one reports progress before its result."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[McpScope] = []

    async def request(self, server_id: str, method: str, params: dict[str, Any] | None, scope: McpScope) -> Any:
        if server_id != "tools":
            raise McpServerUnavailable(f"no MCP server {server_id!r} here", {"serverId": server_id})
        self.scopes.append(scope)
        if method == "crash":
            raise RuntimeError("backend went away")
        await scope.notify("notifications/progress", {"progress": 1})
        return await self.message("scoped", method, params, is_request=True)


class BothFormsAgent(Agent):
    """Hosts servers (provider role) and uses the client's (client role)."""

    mcp_over_acp = True

    def __init__(self, provider: McpProvider | None = None) -> None:
        self.mcp_provider = provider if provider is not None else ScopedProvider()
        self.log: list[Any] = []
        self.notes: list[tuple[str, Any]] = []
        self.calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        """Each text block is one ``mcp_request``: "SERVER METHOD [FORM]"."""
        for block in prompt:
            server_id, method, *form = block["text"].split()
            options: dict[str, Any] = {"on_notification": lambda m, p: self.notes.append((m, p))}
            if form:
                options["form"] = form[0]
            try:
                self.log.append(("result", await self.client.mcp_request(server_id, method, {"x": 1}, **options)))
            except AcpError as exc:
                self.log.append((type(exc).__name__, exc.code, exc.message))
        return {"stopReason": "end_turn"}


async def _harness(agent: Agent | None = None, limits: Limits | None = None) -> tuple[Harness, Any, str]:
    agent = agent if agent is not None else BothFormsAgent()
    h = record_sent(Harness(agent, limits))
    caps = (await h.initialize())["agentCapabilities"]
    assert caps["mcpCapabilities"]["acp"] is True
    resp = await h.call("session/new", {"cwd": CWD, "mcpServers": [ACP_SERVER]})
    return h, agent, resp["result"]["sessionId"]


def _scoped(server_id: str, request_id: str, method: str, params: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"serverId": server_id, "requestId": request_id, "method": method}
    if params is not None:
        obj["params"] = params
    return obj


def _mcp_out(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.messages if m.get("method", "").startswith("mcp/")]


# -- provider role ----------------------------------------------------------------------------


def test_r17_scoped_provider_answers_with_the_inner_outcome_carrier_and_scoped_notifications(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness()
        call = await h.call("mcp/message", _scoped("tools", "q1", "tools/call",
                                                   {"name": "echo", "arguments": {"text": "hi"}}))
        assert call["result"] == {"result": {"content": [{"type": "text", "text": "hi"}]}}
        # The progress notification names the request it belongs to and precedes its answer.
        note = [m for m in _mcp_out(h) if "id" not in m]
        assert note == [{"jsonrpc": "2.0", "method": "mcp/message",
                         "params": _scoped("tools", "q1", "notifications/progress", {"progress": 1})}]
        assert h.messages.index(note[0]) < h.messages.index(call)
        rid = h.request("mcp/message", _scoped("tools", "q2", "tools/list"))
        await h.response(rid)  # raw bytes from the provider are written inside the carrier, verbatim
        assert b'"result":{"result":{"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}}' in h.raw
        inner = await h.call("mcp/message", {**_scoped("tools", "q3", "fail"), "_meta": {"trace": "t-1"}})
        assert inner["result"] == {"error": {"code": -32042, "message": "inner failure", "data": {"why": "test"}}}
        assert [s.request_id for s in agent.mcp_provider.scopes] == ["q1", "q2", "q3"]
        assert [s.meta for s in agent.mcp_provider.scopes] == [None, None, {"trace": "t-1"}]  # the outer _meta
        assert all(s.done for s in agent.mcp_provider.scopes)
        assert h.server.mcp.open_counts["serving"] == 0
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_one_connection_serves_a_connect_form_client_and_a_scoped_one_side_by_side(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness()
        cid = (await h.call("mcp/connect", {"serverId": "tools"}))["result"]["connectionId"]
        old = await h.call("mcp/message", {"connectionId": cid, "method": "tools/call",
                                           "params": {"name": "echo", "arguments": {"text": "old"}}})
        new = await h.call("mcp/message", _scoped("tools", "q1", "tools/call",
                                                  {"name": "echo", "arguments": {"text": "new"}}))
        assert old["result"] == {"content": [{"type": "text", "text": "old"}]}  # connect form: flattened
        assert new["result"] == {"result": {"content": [{"type": "text", "text": "new"}]}}  # scoped: carrier
        old_err = await h.call("mcp/message", {"connectionId": cid, "method": "fail"})
        assert old_err["error"]["code"] == -32042  # connect form: the inner error is the outer one
        assert (await h.call("mcp/disconnect", {"connectionId": cid}))["result"] == {}
        assert [(s[0], s[1]) for s in agent.mcp_provider.seen] == [
            ("handle-1", "tools/call"), ("scoped", "tools/call"), ("handle-1", "fail")]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_a_connect_form_provider_serves_scoped_requests_through_the_default_adapter(run: Any) -> None:
    async def body() -> None:
        provider = ToolsProvider()  # written for the connect form only
        h, _, _ = await _harness(BothFormsAgent(provider))
        ok = await h.call("mcp/message", _scoped("tools", "a", "tools/call",
                                                 {"name": "echo", "arguments": {"text": "adapted"}}))
        assert ok["result"] == {"result": {"content": [{"type": "text", "text": "adapted"}]}}
        inner = await h.call("mcp/message", _scoped("tools", "b", "fail"))
        assert inner["result"]["error"]["code"] == -32042
        unknown = await h.call("mcp/message", _scoped("nope", "c", "tools/list"))
        assert unknown["error"]["code"] == -33001 and "nope" in unknown["error"]["message"]
        assert provider.disconnected == ["handle-1", "handle-2"]  # one connection per request, freed
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"connectionId": "c", "serverId": "tools", "requestId": "r", "method": "ping"}, "connectionId"),
        ({"method": "ping"}, "serverId and requestId"),
        ({"serverId": "tools", "method": "ping"}, "requestId"),
        ({"requestId": "r", "method": "ping"}, "serverId"),
        ({"serverId": "tools", "requestId": "r", "method": "ping", "params": [1]}, "params"),
        ({"serverId": "tools", "requestId": 7, "method": "ping"}, "requestId"),
        ({"serverId": "tools", "requestId": "r"}, "method"),
        ([1, 2], "expected an object"),
    ],
)
def test_r17_malformed_mcp_message_gets_invalid_params_and_the_connection_keeps_serving(
    run: Any, params: Any, names: str
) -> None:
    async def body() -> None:
        h, agent, _ = await _harness(limits=Limits(max_background=1))
        resp = await h.call("mcp/message", params)
        assert resp["error"]["code"] == -32602 and names in resp["error"]["message"], resp
        assert h.server.pool.in_flight == 0  # refused before it took a background slot
        after = await h.call("mcp/message", _scoped("tools", "ok", "tools/call",
                                                    {"name": "echo", "arguments": {"text": "still"}}))
        assert after["result"]["result"]["content"][0]["text"] == "still"
        assert agent.mcp_provider.seen[0][1] == "tools/call"  # nothing malformed reached the provider
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_scoped_binding_errors_unknown_server_duplicate_limit_and_backend_failure(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness(limits=Limits(max_mcp_requests=1))
        provider = agent.mcp_provider
        unknown = await h.call("mcp/message", _scoped("other", "u", "tools/list"))
        assert unknown["error"]["code"] == -33001 and "'other'" in unknown["error"]["message"]
        crash = await h.call("mcp/message", _scoped("tools", "c", "crash"))
        assert crash["error"]["code"] == -33002 and crash["error"]["data"]["details"] == "backend went away"
        provider.gate = asyncio.Event()
        slow = h.request("mcp/message", _scoped("tools", "dup", "tools/call",
                                                {"name": "echo", "arguments": {"text": "slow"}}))
        await provider.entered.wait()
        dup = await h.call("mcp/message", _scoped("tools", "dup", "tools/list"))
        assert dup["error"]["code"] == -32602 and "already active" in dup["error"]["message"]
        over = await h.call("mcp/message", _scoped("tools", "second", "tools/list"))
        assert over["error"]["code"] == -33000 and "limit 1" in over["error"]["message"]
        provider.gate.set()
        assert (await h.response(slow))["result"]["result"]["content"][0]["text"] == "slow"
        again = await h.call("mcp/message", _scoped("tools", "dup", "tools/list"))  # the id is free again
        assert "tools" in again["result"]["result"]
        assert all(len(h.responses(m["id"])) == 1 for m in h.sent if "id" in m)  # one answer each
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_r08_r12_scoped_requests_count_against_the_pool_and_cancel_drops_late_notifications(
    run: Any,
) -> None:
    async def body() -> None:
        h, agent, _ = await _harness(limits=Limits(max_background=1))
        provider = agent.mcp_provider
        provider.gate = asyncio.Event()
        rid = h.request("mcp/message", _scoped("tools", "q", "tools/call",
                                               {"name": "echo", "arguments": {"text": "x"}}))
        await provider.entered.wait()
        assert h.server.pool.in_flight == 1
        busy = await h.call("mcp/message", _scoped("tools", "q2", "tools/list"))
        assert busy["error"]["code"] == -32000  # R08: refused, not queued
        h.notify("$/cancel_request", {"requestId": rid})
        assert (await h.response(rid))["error"]["code"] == -32800
        scope = provider.scopes[0]
        assert scope.done
        before = len(h.messages)
        await scope.notify("notifications/progress", {"progress": 2})  # after the answer: dropped
        assert len(h.messages) == before
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_scoped_request_to_an_agent_hosting_no_servers_is_server_unavailable(run: Any) -> None:
    class ClientRoleOnly(Agent):
        mcp_over_acp = True

    async def body() -> None:
        h = record_sent(Harness(ClientRoleOnly()))
        await h.initialize()
        resp = await h.call("mcp/message", _scoped("tools", "r", "tools/list"))
        assert resp["error"]["code"] == -33001
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- client role ------------------------------------------------------------------------------


async def _answer_next(h: Harness, seen: int, answer: Any, *notes: dict[str, Any]) -> dict[str, Any]:
    """Wait for the agent's next outgoing mcp/* request, send ``notes`` then ``answer`` in one chunk."""
    req: dict[str, Any] = (await h.wait_for(lambda: [m for m in _mcp_out(h) if "id" in m][seen:]))[0]
    params = req["params"]
    h.send(*[{"jsonrpc": "2.0", "method": "mcp/message",
              "params": _scoped(params.get("serverId", ""), params.get("requestId", ""), **n)} for n in notes],
           {"jsonrpc": "2.0", "id": req["id"], **answer})
    return req


def test_r17_scoped_client_sends_one_mcp_message_and_routes_its_notifications(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _harness()
        rid = h.request("session/prompt", prompt_params(sid, "srv-1 tools/call"))
        req = await _answer_next(h, 0, {"result": {"result": {"content": []}}},
                                 {"method": "notifications/progress", "params": {"progress": 1}},
                                 {"method": "notifications/message"})
        params = req["params"]
        assert params["serverId"] == "srv-1" and params["method"] == "tools/call"
        assert isinstance(params["requestId"], str)
        assert params["params"] == {"x": 1, "_meta": {META_PROTOCOL_VERSION: MCP_PROTOCOL_VERSION,
                                                      META_CLIENT_CAPABILITIES: {}}}
        assert "connectionId" not in params and [m["method"] for m in _mcp_out(h)] == ["mcp/message"]
        assert (await h.response(rid))["result"] == {"stopReason": "end_turn"}
        assert agent.log == [("result", {"content": []})]
        assert agent.notes == [("notifications/progress", {"progress": 1}), ("notifications/message", None)]
        assert h.server.mcp.open_counts["awaiting"] == 0
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


@needs_npm_schema
def test_r17_scoped_client_messages_match_the_schema_1_24_file(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _harness()
        rid = h.request("session/prompt", prompt_params(sid, "srv-1 tools/call"))
        await _answer_next(h, 0, {"result": {"result": {"content": []}}})
        await h.response(rid)
        assert agent.log == [("result", {"content": []})]
        # The bundled schema's own MessageMcpRequest (serverId, requestId), not the oracle's model.
        assert assert_schema_valid(h, NPM_SCHEMA_UNSTABLE) >= 4
        await close_and_check(h)

    run(body())


def test_r17_scoped_client_inner_error_binding_error_and_bad_carrier(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _harness()
        rid = h.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "srv-1 a"}, {"type": "text", "text": "srv-1 b"},
            {"type": "text", "text": "srv-1 c"}, {"type": "text", "text": "srv-9 d"}]})
        await _answer_next(h, 0, {"result": {"error": {"code": -32601, "message": "no such tool"}}})
        await _answer_next(h, 1, {"error": {"code": -33001, "message": "MCP server unavailable"}})
        await _answer_next(h, 2, {"result": {"neither": True}})
        await h.response(rid)
        assert agent.log == [
            ("McpError", -32601, "no such tool"),  # inner: inside a successful outer response
            ("McpServerUnavailable", -33001, "MCP server unavailable"),  # outer binding error
            ("McpBackendFailed", -33002, "mcp/message answered without a result or error carrier"),
            ("InvalidParams", -32602,  # srv-9 was never declared: nothing is sent
             "no session declared an ACP-transport MCP server with serverId 'srv-9'"),
        ]
        assert len(_mcp_out(h)) == 3
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_scoped_client_notifications_for_no_active_request_are_dropped(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _harness()
        h.notify("mcp/message", _scoped("srv-1", "never", "notifications/progress"))
        h.notify("mcp/message", {"serverId": "srv-1", "requestId": 5, "method": "x"})  # malformed
        h.notify("mcp/message", {"serverId": "srv-1", "requestId": "r", "method": "x", "params": "no"})
        rid = h.request("session/prompt", prompt_params(sid, "srv-1 ping"))
        await _answer_next(h, 0, {"result": {"result": {}}})
        await h.response(rid)
        h.notify("mcp/message", _scoped("srv-1", _mcp_out(h)[0]["params"]["requestId"], "late"))
        assert "result" in await h.call("session/new", {"cwd": CWD, "mcpServers": []})  # still serving
        assert agent.notes == [] and agent.log == [("result", {})]
        assert [m for m in h.messages if m.get("id") is None and "error" in m] == []  # never answered
        await close_and_check(h)

    run(body())


def test_r17_scoped_client_bounds_requests_awaiting_their_outcome(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness(limits=Limits(max_mcp_requests=1))
        first = asyncio.ensure_future(agent.client.mcp_request("srv-1", "one", request_id="same"))
        await h.wait_for(lambda: _mcp_out(h))
        with pytest.raises(InvalidParams, match="already active"):
            await agent.client.mcp_request("srv-1", "two", request_id="same")
        with pytest.raises(AcpError, match="limit 1") as over:
            await agent.client.mcp_request("srv-1", "three")
        assert over.value.code == -33000
        await _answer_next(h, 0, {"result": {"result": 1}})
        assert await first == 1
        assert len(_mcp_out(h)) == 1
        await close_and_check(h)

    run(body())


def test_r17_client_form_rule_open_connection_then_peer_spoken_form_then_scoped(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _harness()
        bridge = h.server.mcp
        assert bridge.form_for("srv-1") == "request"  # nothing known: schema 1.24's form
        # Forced connect form: connects once, then the connection is reused by the default rule.
        rid = h.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "srv-1 tools/list connect"}, {"type": "text", "text": "srv-1 tools/call"},
            {"type": "text", "text": "srv-1 ping request"}]})
        await _answer_next(h, 0, {"result": {"connectionId": "conn-7"}})
        await _answer_next(h, 1, {"result": {"tools": []}})
        await _answer_next(h, 2, {"result": {"content": []}})
        await _answer_next(h, 3, {"result": {"result": {}}})
        await h.response(rid)
        out = [(m["method"], m["params"]) for m in _mcp_out(h)]
        assert out[:3] == [("mcp/connect", {"serverId": "srv-1"}),
                           ("mcp/message", {"connectionId": "conn-7", "method": "tools/list", "params": {"x": 1}}),
                           ("mcp/message", {"connectionId": "conn-7", "method": "tools/call", "params": {"x": 1}})]
        assert out[3][1]["serverId"] == "srv-1" and "connectionId" not in out[3][1]  # per-call override
        assert agent.log == [("result", {"tools": []}), ("result", {"content": []}), ("result", {})]
        assert bridge.form_for("srv-1") == "connect"
        await close_and_check(h)

    run(body())


def test_r17_client_form_follows_what_the_peer_spoke_on_this_connection(run: Any) -> None:
    async def body() -> None:
        h, _, _ = await _harness()
        bridge = h.server.mcp
        await h.call("mcp/message", {"connectionId": "c", "method": "ping"})  # a connect-form peer
        assert bridge.form_for("srv-1") == "connect"
        h.notify("mcp/message", _scoped("srv-1", "r", "notifications/progress"))  # a scoped peer
        await h.call("session/new", {"cwd": CWD, "mcpServers": []})  # the notification was read before it
        assert bridge.form_for("srv-1") == "request"
        assert bridge.form_for("srv-1", "connect") == "connect"
        await close_and_check(h)

    run(body())


# -- end to end: a real agent process over pipes ------------------------------------------------

E2E_TARGET = "tests.test_r17_mcp_scoped:E2EAgent"


class E2EAgent(BothFormsAgent):
    """The agent the subprocess runs: reports each MCP outcome as a message chunk."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        await super().prompt(session_id, prompt)
        await self.client.agent_message_chunk(session_id, repr((self.log, self.notes)))
        return {"stopReason": "end_turn"}


def test_r17_e2e_both_forms_both_roles_over_real_pipes() -> None:
    tests_dir = str(Path(__file__).resolve().parent)  # this module imports schema_oracle from there
    with AgentProcess("serve", E2E_TARGET, env={"PYTHONPATH": tests_dir}) as agent:
        agent.initialize()
        _, new = agent.until_response(agent.request("session/new", {"cwd": CWD, "mcpServers": [ACP_SERVER]}))
        sid = new["result"]["sessionId"]
        # Provider role, scoped: the progress notification, then the carrier.
        before, resp = agent.until_response(agent.request(
            "mcp/message", _scoped("tools", "q1", "tools/call", {"name": "echo", "arguments": {"text": "e2e"}})))
        assert [m["params"] for m in before] == [_scoped("tools", "q1", "notifications/progress", {"progress": 1})]
        assert resp["result"] == {"result": {"content": [{"type": "text", "text": "e2e"}]}}
        # Provider role, connect form, on the same connection.
        cid = agent.call("mcp/connect", {"serverId": "tools"})["result"]["connectionId"]
        _, listed = agent.until_response(agent.request("mcp/message", {"connectionId": cid, "method": "tools/list"}))
        assert listed["result"]["tools"][0]["name"] == "echo"
        _, bad = agent.until_response(agent.request("mcp/message", {"serverId": "tools", "method": "x"}))
        assert bad["error"]["code"] == -32602
        _, gone = agent.until_response(agent.request("mcp/message", _scoped("gone", "q2", "x")))
        assert gone["error"]["code"] == -33001
        # Client role, scoped: the agent asks, this client serves srv-1.
        rid = agent.request("session/prompt", prompt_params(sid, "srv-1 tools/call"))
        out = agent.next()
        assert out["method"] == "mcp/message" and out["params"]["serverId"] == "srv-1", out
        agent.send({"jsonrpc": "2.0", "method": "mcp/message",
                    "params": _scoped("srv-1", out["params"]["requestId"], "notifications/progress", {"p": 1})},
                   {"jsonrpc": "2.0", "id": out["id"], "result": {"result": {"content": ["ok"]}}})
        updates, done = agent.until_response(rid)
        assert done["result"] == {"stopReason": "end_turn"}
        text = updates[-1]["params"]["update"]["content"]["text"]
        assert text == repr(([("result", {"content": ["ok"]})], [("notifications/progress", {"p": 1})]))
        agent.close_stdin()
        assert agent.wait() == 0


def test_r17_mcp_error_is_an_acp_error_with_the_inner_code() -> None:
    err = McpError(-32601, "no such tool", {"tool": "x"})
    assert isinstance(err, OtherError) and err.to_error_obj() == {
        "code": -32601, "message": "no such tool", "data": {"tool": "x"}}


def _mcp_calls() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A good scoped request, a scoped one with a numeric requestId, a connect-form one missing its id, a connect."""
    scoped = {"jsonrpc": "2.0", "id": 1, "method": "mcp/message", "params": _scoped("srv-1", "r", "tools/list")}
    bad_scoped = {"jsonrpc": "2.0", "id": 2, "method": "mcp/message",
                  "params": {"serverId": "srv-1", "requestId": 7, "method": "tools/list"}}
    bad_old = {"jsonrpc": "2.0", "id": 3, "method": "mcp/message", "params": {"method": "tools/list"}}
    connect = {"jsonrpc": "2.0", "id": 4, "method": "mcp/connect", "params": {"serverId": "srv-1"}}
    return scoped, bad_scoped, bad_old, connect


def test_r17_validator_under_sdk_models_checks_the_connect_form_and_passes_the_scoped_one() -> None:
    from acp_fast.agent import validate

    checker = validate.OutgoingValidator()  # the installed SDK's models: the connect form only
    scoped, bad_scoped, bad_old, connect = _mcp_calls()
    note = {"jsonrpc": "2.0", "method": "mcp/message", "params": _scoped("srv-1", "r", "notifications/progress")}
    assert checker.check(scoped) == [] and checker.check(note) == [] and checker.check(bad_scoped) == []
    assert any("connectionId" in v for v in checker.check(bad_old))
    assert checker.check(connect) == []


@needs_npm_schema
def test_r17_validator_under_the_schema_1_24_file_checks_the_scoped_form_and_passes_the_connect_one() -> None:
    from acp_fast.agent import schema_source, validate

    checker = validate.OutgoingValidator(schema_source.load_file(str(NPM_SCHEMA_UNSTABLE)))
    scoped, bad_scoped, bad_old, connect = _mcp_calls()
    assert checker.check(scoped) == []
    assert any("requestId" in v for v in checker.check(bad_scoped))
    assert checker.check(bad_old) == [] and checker.check(connect) == []  # retired there: not checked


def test_r17_r13_scoped_client_request_open_at_eof_fails_with_connection_closed(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness()
        call = asyncio.ensure_future(agent.client.mcp_request("srv-1", "tools/list"))
        await h.wait_for(lambda: _mcp_out(h))
        await close_and_check(h)  # EOF: the request is never answered
        with pytest.raises(ConnectionClosed):
            await call
        assert h.server.mcp.open_counts["awaiting"] == 0

    run(body())


def test_r17_concurrent_connect_form_calls_share_one_mcp_connect(run: Any) -> None:
    async def body() -> None:
        h, agent, _ = await _harness()
        first = asyncio.ensure_future(agent.client.mcp_request("srv-1", "a", form="connect"))
        await h.wait_for(lambda: _mcp_out(h))
        second = asyncio.ensure_future(agent.client.mcp_request("srv-1", "b"))  # uses the opening one
        await _answer_next(h, 0, {"result": {"connectionId": "c1"}})
        for seen in (1, 2):  # each answered with its own method name; their order is the tasks'
            req = await h.wait_for(lambda n=seen: [m for m in _mcp_out(h) if "id" in m][n:])
            h.send({"jsonrpc": "2.0", "id": req[0]["id"], "result": req[0]["params"]["method"].upper()})
        assert (await first, await second) == ("A", "B")
        assert sorted((m["method"], m["params"].get("connectionId")) for m in _mcp_out(h)) == [
            ("mcp/connect", None), ("mcp/message", "c1"), ("mcp/message", "c1")]
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())
