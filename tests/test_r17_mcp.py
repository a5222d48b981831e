"""R17: MCP over ACP, provider role (incoming mcp/*) and client role (agent connects).

Also checks that incoming mcp/* requests run in the background lane and count
against the R08 pool, that open connections are bounded, and that every
message the agent writes matches the SDK schema.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from schema_oracle import assert_schema_valid, record_sent

from acp_fast.agent.base import Agent, current_context
from acp_fast.agent.mcp_bridge import McpClientConnection, McpInbound, McpProvider
from acp_fast.wire.errors import InvalidParams, OtherError
from acp_fast.wire.limits import Limits
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")

CWD = "/tmp"


class ToolsProvider(McpProvider):
    """Hosts server "tools"; records what it sees; ``gate`` can hold tools/call."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, Any, bool]] = []
        self.disconnected: list[Any] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self._n = 0

    async def connect(self, server_id: str) -> Any:
        if server_id != "tools":
            raise InvalidParams(f"unknown MCP server {server_id!r}")
        self._n += 1
        return f"handle-{self._n}"

    async def message(self, handle: Any, method: str, params: Any, *, is_request: bool) -> Any:
        self.seen.append((handle, method, params, is_request))
        if method == "tools/list":
            return b'{"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}'  # raw, spaced
        if method == "tools/call":
            if self.gate is not None:
                self.entered.set()
                await self.gate.wait()
            return {"content": [{"type": "text", "text": params["arguments"]["text"]}]}
        if method == "fail":
            raise OtherError(-32042, "inner failure", {"why": "test"})
        return {}

    async def disconnect(self, handle: Any) -> None:
        self.disconnected.append(handle)


class ProviderAgent(Agent):
    def __init__(self) -> None:
        self.mcp_provider = ToolsProvider()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
        return None


async def _provider_harness(limits: Limits | None = None) -> tuple[Harness, ToolsProvider]:
    agent = ProviderAgent()
    h = record_sent(Harness(agent, limits))
    init = await h.initialize()
    assert init["agentCapabilities"]["mcpCapabilities"]["acp"] is True
    assert agent.mcp_provider is not None
    return h, agent.mcp_provider  # type: ignore[return-value]


async def _connect(h: Harness, server_id: str = "tools") -> str:
    resp = await h.call("mcp/connect", {"serverId": server_id})
    return str(resp["result"]["connectionId"])


# -- provider role ----------------------------------------------------------------------------


def test_r17_provider_connect_message_disconnect_round_trip(run: Any) -> None:
    async def body() -> None:
        h, provider = await _provider_harness()
        c1, c2 = await _connect(h), await _connect(h)
        assert c1 != c2  # each mcp/connect gets a fresh id, even for one server
        listed = await h.call("mcp/message", {"connectionId": c1, "method": "tools/list", "params": {}})
        assert listed["result"] == {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        call = await h.call("mcp/message", {"connectionId": c2, "method": "tools/call",
                                            "params": {"name": "echo", "arguments": {"text": "hi"}}})
        assert call["result"] == {"content": [{"type": "text", "text": "hi"}]}
        h.notify("mcp/message", {"connectionId": c1, "method": "notifications/initialized"})
        done = await h.call("mcp/disconnect", {"connectionId": c1})
        assert done["result"] == {}
        assert provider.seen == [
            ("handle-1", "tools/list", {}, True),
            ("handle-2", "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, True),
            ("handle-1", "notifications/initialized", None, False),
        ]
        assert provider.disconnected == ["handle-1"]
        assert_schema_valid(h)
        await close_and_check(h)
        assert provider.disconnected == ["handle-1", "handle-2"]  # shutdown frees what is still open

    run(body())


def test_r17_forwarded_raw_results_are_written_verbatim_without_reencoding(run: Any) -> None:
    async def body() -> None:
        h, _ = await _provider_harness()
        cid = await _connect(h)
        rid = h.request("mcp/message", {"connectionId": cid, "method": "tools/list"})
        await h.response(rid)
        # orjson would re-encode without the spaces; the Fragment keeps the provider's bytes.
        assert b'"result":{"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}' in h.raw
        await close_and_check(h)

    run(body())


def test_r17_inner_error_becomes_the_outer_error(run: Any) -> None:
    async def body() -> None:
        h, _ = await _provider_harness()
        cid = await _connect(h)
        resp = await h.call("mcp/message", {"connectionId": cid, "method": "fail"})
        assert resp["error"] == {"code": -32042, "message": "inner failure", "data": {"why": "test"}}
        unknown_server = await h.call("mcp/connect", {"serverId": "nope"})
        assert unknown_server["error"]["code"] == -32602
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_unknown_or_closed_connection_requests_get_invalid_params_notifications_ignored(run: Any) -> None:
    async def body() -> None:
        h, provider = await _provider_harness()
        cid = await _connect(h)
        await h.call("mcp/disconnect", {"connectionId": cid})
        for params in ({"connectionId": cid, "method": "tools/list"}, {"connectionId": "never", "method": "ping"}):
            resp = await h.call("mcp/message", params)
            assert resp["error"]["code"] == -32602
            assert params["connectionId"] in resp["error"]["message"]
        again = await h.call("mcp/disconnect", {"connectionId": cid})
        assert again["error"]["code"] == -32602
        h.notify("mcp/message", {"connectionId": cid, "method": "notifications/cancelled"})
        h.notify("mcp/message", {"connectionId": "never", "method": "notifications/x"})
        marker = await h.call("session/new", {"cwd": CWD, "mcpServers": []})
        assert "result" in marker
        await close_and_check(h)
        assert provider.seen == []  # nothing reached the provider
        assert [m for m in h.messages if "error" in m and m["id"] is None] == []
        assert_schema_valid(h)

    run(body())


def test_r17_open_connections_are_bounded_by_max_mcp_connections(run: Any) -> None:
    async def body() -> None:
        h, _ = await _provider_harness(Limits(max_mcp_connections=2))
        first, _second = await _connect(h), await _connect(h)
        third = await h.call("mcp/connect", {"serverId": "tools"})
        assert third["error"]["code"] == -32000 and "limit 2" in third["error"]["message"]
        await h.call("mcp/disconnect", {"connectionId": first})
        assert (await h.call("mcp/connect", {"serverId": "tools"}))["result"]["connectionId"]
        assert h.server.mcp.open_counts["hosted"] == 2
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_r08_incoming_mcp_requests_run_in_the_background_pool_and_count_against_it(run: Any) -> None:
    async def body() -> None:
        h, provider = await _provider_harness(Limits(max_background=1))
        cid = await _connect(h)
        provider.gate = asyncio.Event()
        slow = h.request("mcp/message", {"connectionId": cid, "method": "tools/call",
                                         "params": {"name": "echo", "arguments": {"text": "late"}}})
        await provider.entered.wait()
        assert h.server.pool.in_flight == 1
        busy = await h.call("mcp/message", {"connectionId": cid, "method": "tools/list"})
        assert busy["error"]["code"] == -32000  # R08: the pool is full, not queued
        sid = await h.new_session()  # R03/R09: the control lane is not blocked meanwhile
        busy_prompt = await h.call("session/prompt", prompt_params(sid, "x"))
        assert busy_prompt["error"]["code"] == -32000  # prompts share the same pool
        assert h.find_response(slow) is None
        provider.gate.set()
        assert (await h.response(slow))["result"]["content"][0]["text"] == "late"
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_r12_cancel_request_on_an_mcp_message_answers_request_cancelled(run: Any) -> None:
    async def body() -> None:
        h, provider = await _provider_harness()
        cid = await _connect(h)
        provider.gate = asyncio.Event()
        rid = h.request("mcp/message", {"connectionId": cid, "method": "tools/call",
                                        "params": {"name": "echo", "arguments": {"text": "x"}}})
        await provider.entered.wait()
        h.notify("$/cancel_request", {"requestId": rid})
        assert (await h.response(rid))["error"]["code"] == -32800
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_without_a_bridge_mcp_is_not_advertised_and_mcp_requests_are_method_not_found(run: Any) -> None:
    class Plain(Agent):
        async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                             client_info: Any = None, **kw: Any) -> dict[str, Any]:
            return {"agentCapabilities": {"mcpCapabilities": {"http": True, "acp": True}}}

    async def body() -> None:
        h = record_sent(Harness(Plain()))
        caps = (await h.initialize())["agentCapabilities"]
        assert caps["mcpCapabilities"] == {"http": True}
        for method, params in [("mcp/connect", {"serverId": "tools"}),
                               ("mcp/message", {"connectionId": "c", "method": "ping"}),
                               ("mcp/disconnect", {"connectionId": "c"})]:
            assert (await h.call(method, params))["error"]["code"] == -32601
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


# -- client role ------------------------------------------------------------------------------

ACP_SERVER = {"type": "acp", "name": "project-tools", "serverId": "srv-1"}


class Inbound(McpInbound):
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any) -> Any:
        if method == "sampling/createMessage":
            return {"role": "assistant", "content": {"type": "text", "text": "sampled"}}
        return await super().request(method, params)

    async def notification(self, method: str, params: Any) -> None:
        self.notes.append((method, params))


class McpClientAgent(Agent):
    """Prompt "use SERVER_ID" connects, queues traffic before the connect answer, then closes."""

    mcp_over_acp = True

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.inbound = Inbound()
        self.conn: McpClientConnection | None = None
        self.close_now = asyncio.Event()

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kw: Any) -> None:
        server_id = prompt[0]["text"].split()[1]
        try:
            conn = self.client.open_mcp(server_id, self.inbound)
        except InvalidParams as exc:
            self.log.append(("refused", exc.code))
            return
        self.conn = conn
        # An MCP client library starts talking at once; nothing may leave before the connect answer.
        note = asyncio.ensure_future(conn.notify("notifications/initialized"))
        req = asyncio.ensure_future(conn.request("tools/list", {}))
        await asyncio.sleep(0)  # both tasks have run up to their wait for the connect answer
        await self.client.agent_message_chunk(session_id, "queued")
        try:
            await note
            self.log.append(("result", await req))
        except Exception as exc:
            self.log.append(("error", getattr(exc, "code", None)))
            return
        await self.close_now.wait()
        await conn.close()
        self.log.append(("closed", conn.state.value))


async def _client_harness() -> tuple[Harness, McpClientAgent, str]:
    agent = McpClientAgent()
    h = record_sent(Harness(agent))
    caps = (await h.initialize())["agentCapabilities"]
    assert caps["mcpCapabilities"]["acp"] is True
    resp = await h.call("session/new", {"cwd": CWD, "mcpServers": [ACP_SERVER]})
    return h, agent, resp["result"]["sessionId"]


def _mcp_out(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.messages if str(m.get("method", "")).startswith("mcp/")]


def test_r17_client_role_sends_nothing_for_a_connection_before_the_connect_response(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _client_harness()
        rid = h.request("session/prompt", prompt_params(sid, "use srv-1"))
        await h.wait_for(lambda: any(u["update"].get("content", {}).get("text") == "queued" for u in h.updates(sid)))
        out = _mcp_out(h)
        assert [(m["method"], m["params"]) for m in out] == [("mcp/connect", {"serverId": "srv-1"})]
        h.send({"jsonrpc": "2.0", "id": out[0]["id"], "result": {"connectionId": "conn-9"}})
        req = await h.wait_for(lambda: [m for m in _mcp_out(h) if m["method"] == "mcp/message" and "id" in m])
        out = _mcp_out(h)
        assert [(m["method"], "id" in m, m["params"]) for m in out[1:]] == [
            ("mcp/message", False, {"connectionId": "conn-9", "method": "notifications/initialized"}),
            ("mcp/message", True, {"connectionId": "conn-9", "method": "tools/list", "params": {}}),
        ]
        agent.close_now.set()
        h.send({"jsonrpc": "2.0", "id": req[0]["id"], "result": {"tools": []}})
        disc = await h.wait_for(lambda: [m for m in _mcp_out(h) if m["method"] == "mcp/disconnect"])
        assert agent.log == [("result", {"tools": []})]
        assert disc[0]["params"] == {"connectionId": "conn-9"}
        h.send({"jsonrpc": "2.0", "id": disc[0]["id"], "result": {}})
        assert (await h.response(rid))["result"] == {"stopReason": "end_turn"}
        assert agent.log[-1] == ("closed", "closed")
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_client_role_connect_error_fails_the_queued_messages(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _client_harness()
        rid = h.request("session/prompt", prompt_params(sid, "use srv-1"))
        out = await h.wait_for(lambda: _mcp_out(h))
        h.send({"jsonrpc": "2.0", "id": out[0]["id"], "error": {"code": -32602, "message": "unknown server"}})
        await h.response(rid)
        assert agent.log == [("error", -32602)]
        assert [m["method"] for m in _mcp_out(h)] == ["mcp/connect"]
        assert h.server.mcp.open_counts == {"hosted": 0, "client": 0, "serving": 0, "awaiting": 0}
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


def test_r17_client_role_refuses_servers_no_session_declared(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _client_harness()
        await h.call("session/prompt", prompt_params(sid, "use srv-other"))
        assert agent.log == [("refused", -32602)]
        assert _mcp_out(h) == []
        await close_and_check(h)

    run(body())


def test_r17_client_role_serves_requests_and_notifications_from_the_hosted_server(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _client_harness()
        rid = h.request("session/prompt", prompt_params(sid, "use srv-1"))
        out = await h.wait_for(lambda: _mcp_out(h))
        h.send({"jsonrpc": "2.0", "id": out[0]["id"], "result": {"connectionId": "conn-9"}})
        req = await h.wait_for(lambda: [m for m in _mcp_out(h) if m["method"] == "mcp/message" and "id" in m])
        # The hosted server talks back while its own request is open (C->A mcp/message).
        ping = await h.call("mcp/message", {"connectionId": "conn-9", "method": "ping"})
        assert ping["result"] == {}
        sample = await h.call("mcp/message", {"connectionId": "conn-9", "method": "sampling/createMessage",
                                              "params": {"messages": []}})
        assert sample["result"]["content"]["text"] == "sampled"
        unknown = await h.call("mcp/message", {"connectionId": "conn-9", "method": "roots/list"})
        assert unknown["error"]["code"] == -32601
        h.notify("mcp/message", {"connectionId": "conn-9", "method": "notifications/tools/list_changed"})
        agent.close_now.set()
        h.send({"jsonrpc": "2.0", "id": req[0]["id"], "result": {"tools": []}})
        disc = await h.wait_for(lambda: [m for m in _mcp_out(h) if m["method"] == "mcp/disconnect"])
        # The notification was read before the tools/list answer, and its task started first.
        assert agent.inbound.notes == [("notifications/tools/list_changed", None)]
        h.send({"jsonrpc": "2.0", "id": disc[0]["id"], "result": {}})
        await h.response(rid)
        closed = await h.call("mcp/message", {"connectionId": "conn-9", "method": "ping"})
        assert closed["error"]["code"] == -32602  # closed connections are refused
        assert_schema_valid(h)
        await close_and_check(h)

    run(body())


class SnapshotProvider(ToolsProvider):
    """Records the R02 snapshot each message runs under, read after the gate opens."""

    def __init__(self) -> None:
        super().__init__()
        self.authenticated: list[bool] = []

    async def message(self, handle: Any, method: str, params: Any, *, is_request: bool) -> Any:
        result = await super().message(handle, method, params, is_request=is_request)
        self.authenticated.append(current_context().authenticated)
        return result


class AuthProviderAgent(ProviderAgent):
    def __init__(self) -> None:
        self.mcp_provider = SnapshotProvider()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None


def test_r02_r17_mcp_request_sees_the_context_as_of_its_admission(run: Any) -> None:
    async def body() -> None:
        agent = AuthProviderAgent()
        h = Harness(agent)
        await h.initialize()
        provider = agent.mcp_provider
        cid = await _connect(h)
        call = {"connectionId": cid, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}}}
        first = h.request_obj("mcp/message", call)
        auth = h.request_obj("authenticate", {"methodId": "login"})
        # One chunk: authenticate changes the context after the MCP job was admitted
        # but before its task ran a step; the job must still see the old context.
        h.send(first, auth)
        assert "result" in await h.response(auth["id"])
        assert "result" in await h.response(first["id"])
        assert "result" in await h.call("mcp/message", call)  # admitted after authenticate
        assert provider.authenticated == [False, True]
        await close_and_check(h)

    run(body())
