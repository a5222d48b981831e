"""acp_fast.compat against the installed SDK release, with an agent written for that release's API.

Run by ``.ci/sdk-matrix`` once per release (0.8.0, 0.9.0, 0.10.1, 0.11.1, 0.12.1, 1.0.0rc3), each in its
own venv; the main suite runs it against the pinned test release. Every cell
of the matrix in docs/MIGRATION.md names the test here that backs it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from acp.schema import InitializeRequest
from pydantic import ValidationError

from acp_fast.compat import SDK_VERSION, AgentSideConnection, wrap_sdk_agent
from acp_fast.compat.release import NOTIFICATION_ROUTES, REQUEST_ROUTES, ROUTES
from tests.helpers import Harness, close_and_check, prompt_params
from tests.sdk_matrix import common

RELEASE = common.RELEASE
_SAME_API = common.SAME_API
release_agent = common.release_agent_module()
ReleaseAgent = release_agent.ReleaseAgent

#: What each release's router dispatches (read from its source), and which of those are unstable.
EXPECTED_ROUTES: dict[str, tuple[set[str], set[str]]] = {
    "0.8": (
        {
            "initialize",
            "session/new",
            "session/load",
            "session/list",
            "session/set_mode",
            "session/set_model",
            "session/prompt",
            "authenticate",
            "session/fork",
            "session/resume",
            "session/cancel",
        },
        {"list_sessions", "set_session_model", "fork_session", "resume_session"},
    ),
    "0.10": (
        {
            "initialize",
            "session/new",
            "session/load",
            "session/list",
            "session/close",
            "session/set_mode",
            "session/set_model",
            "session/set_config_option",
            "session/prompt",
            "authenticate",
            "session/fork",
            "session/resume",
            "session/cancel",
        },
        {"close_session", "set_session_model", "fork_session", "resume_session"},
    ),
    "0.12": (
        {
            "initialize",
            "session/new",
            "session/load",
            "session/list",
            "session/close",
            "session/set_mode",
            "session/set_config_option",
            "session/prompt",
            "authenticate",
            "session/fork",
            "session/resume",
            "session/cancel",
        },
        {"close_session", "fork_session", "resume_session"},
    ),
    "1.0": (
        {
            "initialize",
            "authenticate",
            "logout",
            "providers/list",
            "providers/set",
            "providers/disable",
            "session/new",
            "session/load",
            "session/list",
            "session/delete",
            "session/close",
            "session/set_mode",
            "session/set_config_option",
            "session/prompt",
            "session/fork",
            "session/resume",
            "session/cancel",
            "mcp/message",
            "nes/start",
            "nes/suggest",
            "nes/close",
            "nes/accept",
            "nes/reject",
            "document/didOpen",
            "document/didChange",
            "document/didClose",
            "document/didSave",
            "document/didFocus",
        },
        {
            "list_providers",
            "set_provider",
            "disable_provider",
            "fork_session",
            "mcp_message",
            "notify_mcp",
            "start_nes",
            "suggest_nes",
            "close_nes",
            "accept_nes",
            "reject_nes",
            "did_open",
            "did_change",
            "did_close",
            "did_save",
            "did_focus",
        },
    ),
}


def _calls(agent: Any, name: str) -> list[dict[str, Any]]:
    return [kw for n, kw in agent.calls if n == name]


async def _started(unstable: bool = False, strict: bool = False) -> tuple[Harness, Any, str]:
    agent = ReleaseAgent()
    h = Harness(wrap_sdk_agent(agent, use_unstable_protocol=unstable, strict=strict))
    await h.initialize()
    return h, agent, await h.new_session()


def _text_updates(h: Harness, sid: str) -> list[str]:
    return [u["update"]["content"]["text"] for u in h.updates(sid)]


def test_matrix_detects_the_releases_routes() -> None:
    key = _SAME_API.get(RELEASE, RELEASE)
    key = key if key in EXPECTED_ROUTES else ("1.0" if SDK_VERSION[0] >= 1 else "0.12")
    methods, unstable = EXPECTED_ROUTES[key]
    assert set(REQUEST_ROUTES) | set(NOTIFICATION_ROUTES) == methods
    routes = (*REQUEST_ROUTES.values(), *NOTIFICATION_ROUTES.values())
    assert {r.attr for r in routes if r.unstable} == unstable


def test_matrix_set_model_routed_where_the_release_routes_it(run: Any) -> None:
    async def body() -> None:
        for unstable in (False, True):
            h, agent, sid = await _started(unstable=unstable)
            params = {"sessionId": sid, "modelId": "m-2", "_meta": {"why": "x"}}
            if "session/set_model" in ROUTES and not unstable:  # the SDK warns the same way
                with pytest.warns(UserWarning, match="unstable"):
                    resp = await h.call("session/set_model", params)
            else:
                resp = await h.call("session/set_model", params)
            if "session/set_model" in ROUTES and unstable:
                assert resp["result"] == {}
                assert _calls(agent, "set_session_model") == [{"model_id": "m-2", "session_id": sid, "why": "x"}]
            else:  # 0.12 routes no set_model; 0.8/0.10 only with use_unstable_protocol
                assert resp["error"]["code"] == -32601
                assert not _calls(agent, "set_session_model")
            await close_and_check(h)

    run(body())


def test_matrix_set_config_option_routed_from_0_10(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _started()
        resp = await h.call("session/set_config_option", {"sessionId": sid, "configId": "c", "value": "v"})
        if "session/set_config_option" in ROUTES:
            assert resp["result"] == {"configOptions": []}
            assert _calls(agent, "set_config_option") == [{"config_id": "c", "value": "v"}]
        else:
            assert resp["error"]["code"] == -32601
        await close_and_check(h)

    run(body())


def test_matrix_list_sessions_unstable_only_in_0_8(run: Any) -> None:
    async def body() -> None:
        for unstable in (False, True):
            h, _agent, _sid = await _started(unstable=unstable)
            if ROUTES["session/list"].unstable and not unstable:
                with pytest.warns(UserWarning, match="unstable"):
                    resp = await h.call("session/list", {})
            else:
                resp = await h.call("session/list", {})
            if ROUTES["session/list"].unstable and not unstable:
                assert resp["error"]["code"] == -32601
            else:
                assert resp["result"] == {"sessions": []}
            await close_and_check(h)

    run(body())


def test_matrix_close_session_needs_0_10_and_the_unstable_flag(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _started(unstable=True)
        resp = await h.call("session/close", {"sessionId": sid})
        if "session/close" in ROUTES:
            assert resp["result"] == {}
            assert _calls(agent, "close_session") == [{"session_id": sid}]
        else:
            assert resp["error"]["code"] == -32601
        await close_and_check(h)

    run(body())


def test_matrix_terminal_calls_and_raw_send_request(run: Any) -> None:
    async def body() -> None:
        h, _agent, sid = await _started()
        pid = h.request("session/prompt", prompt_params(sid, "terminal"))
        (create,) = await h.wait_for(lambda: h.outgoing_requests("terminal/create"))
        assert create["params"] == {"sessionId": sid, "command": "ls"}
        h.send({"jsonrpc": "2.0", "id": create["id"], "result": {"terminalId": "t1"}})
        (kill,) = await h.wait_for(lambda: h.outgoing_requests("terminal/kill"))
        h.send({"jsonrpc": "2.0", "id": kill["id"], "result": {}})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        pid = h.request("session/prompt", prompt_params(sid, "raw"))
        (out,) = await h.wait_for(lambda: h.outgoing_requests("terminal/output"))
        assert out["params"] == {"sessionId": sid, "terminalId": "t1"}
        h.send({"jsonrpc": "2.0", "id": out["id"], "result": {"output": "a.txt", "truncated": False}})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        assert _text_updates(h, sid) == ["terminal t1", "raw a.txt"]
        await close_and_check(h)

    run(body())


def test_matrix_meta_never_shadows_declared_params(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _started()
        other = await h.new_session()
        meta = {"session_id": other, "prompt": "replaced", "trace": "t-9"}
        resp = await h.call("session/prompt", {**prompt_params(sid, "whoami"), "_meta": meta})
        assert resp["result"] == {"stopReason": "end_turn"}
        (call,) = _calls(agent, "prompt")
        assert call["session_id"] == sid and call["prompt"][0].text == "whoami"
        assert call["trace"] == "t-9"  # a _meta entry that shadows nothing still arrives
        assert _text_updates(h, sid) == [f"session {sid}"] and h.updates(other) == []
        await close_and_check(h)

    run(body())


def test_matrix_uncaught_exception_answers_32603_with_its_message(run: Any) -> None:
    async def body() -> None:
        h, _agent, sid = await _started()
        resp = await h.call("session/prompt", prompt_params(sid, "crash"))
        assert resp["error"]["code"] == -32603
        assert resp["error"]["data"] == {"details": "the release agent crashed"}
        assert (await h.call("session/prompt", prompt_params(sid, "still here")))["result"]["stopReason"] == "end_turn"
        await close_and_check(h)

    run(body())


def test_matrix_lenient_like_the_sdk_and_strict_opt_in(run: Any) -> None:
    async def body() -> None:
        agent = ReleaseAgent()
        h = Harness(wrap_sdk_agent(agent))
        # No initialize, a session id the server never opened: served, as the SDK serves it.
        resp = await h.call("session/prompt", prompt_params("ghost", "whoami"))
        assert resp["result"] == {"stopReason": "end_turn"}
        assert _text_updates(h, "ghost") == ["session ghost"]
        h.notify("session/cancel", {"sessionId": "never-seen"})
        await agent.cancel_seen.wait()
        assert _calls(agent, "cancel") == [{"session_id": "never-seen"}]
        # Client calls go out although the client advertised no terminal capability.
        pid = h.request("session/prompt", prompt_params("ghost", "terminal"))
        (create,) = await h.wait_for(lambda: h.outgoing_requests("terminal/create"))
        h.send({"jsonrpc": "2.0", "id": create["id"], "error": {"code": -32601, "message": "no terminals"}})
        assert (await h.response(pid))["error"]["code"] == -32601
        await close_and_check(h)

        strict = Harness(wrap_sdk_agent(ReleaseAgent(), strict=True))
        assert (await strict.call("session/prompt", prompt_params("ghost", "x")))["error"]["code"] == -32600
        await strict.initialize()
        assert (await strict.call("session/prompt", prompt_params("ghost", "x")))["error"]["code"] == -32602
        sid = await strict.new_session()
        resp = await strict.call("session/prompt", prompt_params(sid, "terminal"))
        assert resp["error"]["code"] == -32601 and not strict.outgoing_requests("terminal/create")
        await close_and_check(strict)

    run(body())


def test_matrix_string_protocol_version_accepted_as_the_sdk_does(run: Any) -> None:
    async def body() -> None:
        agent = ReleaseAgent()
        h = Harness(wrap_sdk_agent(agent))
        resp = await h.call("initialize", {"protocolVersion": "1"})
        assert resp["result"]["protocolVersion"] == 1
        assert _calls(agent, "initialize") == [{"protocol_version": 1}]
        # A date string (as some clients send): 0.10 on read it as 1, 0.8's and 0.9's plain int field refuse it.
        try:
            coerced: int | None = InitializeRequest.model_validate({"protocolVersion": "2024-11-05"}).protocol_version
        except ValidationError:
            coerced = None
        dated = await h.call("initialize", {"protocolVersion": "2024-11-05"})
        if coerced is None:
            assert dated["error"]["code"] == -32602 and RELEASE in ("0.8", "0.9")
        else:
            assert dated["result"]["protocolVersion"] == coerced == 1
        await close_and_check(h)

    run(body())


class _LegacyAgent:
    """The SDK's deprecated styles: a camelCase handler, and ``prompt(self, params)``."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def newSession(self, params: Any) -> Any:
        from acp import NewSessionResponse

        self.seen.append(params)
        return NewSessionResponse(session_id="legacy-1")

    async def prompt(self, params: Any) -> Any:
        from acp import PromptResponse

        self.seen.append(params)
        return PromptResponse(stop_reason="end_turn")


def test_matrix_legacy_handler_styles(run: Any) -> None:
    async def body() -> None:
        agent = _LegacyAgent()
        h = Harness(wrap_sdk_agent(agent))
        await h.initialize()
        with pytest.warns(DeprecationWarning):
            sid = await h.new_session()
            resp = await h.call("session/prompt", prompt_params(sid, "hi"))
        assert sid == "legacy-1" and resp["result"] == {"stopReason": "end_turn"}
        assert [type(p).__name__ for p in agent.seen] == ["NewSessionRequest", "PromptRequest"]
        await close_and_check(h)

    run(body())


# -- AgentSideConnection, driven by the release's own client over a loopback socket ---------------
@contextlib.asynccontextmanager
async def _socket_pair() -> AsyncIterator[tuple[Any, Any, Any, Any]]:
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue(maxsize=1)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put((reader, writer))

    server = await asyncio.start_server(on_client, host="127.0.0.1", port=0)
    host, port = server.sockets[0].getsockname()[:2]
    client_reader, client_writer = await asyncio.open_connection(host, port)
    server_reader, server_writer = await accepted.get()
    try:
        yield server_reader, server_writer, client_reader, client_writer
    finally:
        for w in (client_writer, server_writer):
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()
        server.close()
        await server.wait_closed()


class _RecordingClient:
    """The release's client side: records session updates, answers terminal calls."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.got_update = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.got_update.set()

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> Any:
        from acp.schema import CreateTerminalResponse

        return CreateTerminalResponse(terminal_id="t1")

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        return None


def test_matrix_agent_side_connection_with_the_releases_client(run: Any) -> None:
    async def body() -> None:
        from acp.core import ClientSideConnection
        from acp.schema import TextContentBlock

        events: list[Any] = []
        async with _socket_pair() as (sr, sw, cr, cw):
            agent = ReleaseAgent()
            agent_conn = AgentSideConnection(agent, sw, sr, observers=[events.append])
            client = _RecordingClient()
            client_conn = ClientSideConnection(client, cw, cr)
            init = await client_conn.initialize(protocol_version=1)
            assert init.protocol_version == 1
            session = await client_conn.new_session(cwd="/tmp", mcp_servers=[])
            answer = await client_conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text="terminal")]
            )
            assert answer.stop_reason == "end_turn"
            await client.got_update.wait()
            ((sid, update),) = client.updates
            assert sid == session.session_id and update.content.text == "terminal t1"
            assert agent.conn is agent_conn
            await client_conn.close()
            await agent_conn.close()
        directions = [(e.direction.value, e.message.get("method")) for e in events]
        assert ("incoming", "initialize") in directions and ("outgoing", "terminal/create") in directions
        assert ("outgoing", "session/update") in directions

    run(body())


# -- what 1.0 added, and every declared field -------------------------------------------------------
def test_matrix_logout_and_delete_session_reach_a_1x_agent(run: Any) -> None:
    async def body() -> None:
        h, agent, sid = await _started()
        logout = await h.call("logout", {"_meta": {"why": "bye"}})
        deleted = await h.call("session/delete", {"sessionId": sid, "_meta": {"trace": "t-1"}})
        if "logout" in ROUTES:  # 1.0 on: routed, results normalised ({} for None)
            assert logout["result"] == {} and _calls(agent, "logout") == [{"why": "bye"}]
            assert deleted["result"] == {}
            assert _calls(agent, "delete_session") == [{"session_id": sid, "trace": "t-1"}]
            again = await h.call("session/prompt", prompt_params(sid, "whoami"))
            assert again["result"] == {"stopReason": "end_turn"}  # lenient: a deleted id still reaches the agent
        else:  # before 1.0 the SDK routes neither
            assert logout["error"]["code"] == deleted["error"]["code"] == -32601
        await close_and_check(h)

    run(body())


def test_matrix_unstable_1x_routes_only_with_the_flag(run: Any) -> None:
    if "providers/list" not in ROUTES:
        pytest.skip(f"SDK {RELEASE} routes no providers/*, nes/*, document/* or agent-side mcp/message")

    async def body() -> None:
        h, agent, sid = await _started()
        opened = {"sessionId": sid, "uri": "file:///a", "languageId": "py", "version": 1}
        for method, params in (("providers/list", {}), ("nes/start", {}), ("mcp/message", {})):
            if method == "mcp/message":  # gated: left to acp_fast's MCP bridge, which this agent has not
                resp = await h.call(method, {"connectionId": "c1", "method": "tools/list"})
            else:
                with pytest.warns(UserWarning, match="unstable"):
                    resp = await h.call(method, params)
            assert resp["error"]["code"] == -32601, method
        with pytest.warns(UserWarning, match="unstable"):
            h.notify("document/didOpen", {**opened, "text": ""})
            assert (await h.call("session/list", {}))["result"] == {"sessions": []}  # the notification came first
        assert not agent.notified.is_set()
        await close_and_check(h)

        h, agent, sid = await _started(unstable=True)
        assert (await h.call("providers/list", {}))["result"] == {"providers": []}
        resp = await h.call("providers/set", {"providerId": "p", "apiType": "openai", "baseUrl": "https://x"})
        assert resp["result"] == {}
        assert (await h.call("providers/disable", {"providerId": "p"}))["result"] == {}
        assert (await h.call("providers/set", {"providerId": "p"}))["error"]["code"] == -32602
        assert (await h.call("nes/start", {"workspaceUri": "file:///w"}))["result"] == {"sessionId": "nes-1"}
        suggest = {"sessionId": "nes-1", "uri": "file:///a", "version": 3, "position": {"line": 0, "character": 1}}
        resp = await h.call("nes/suggest", {**suggest, "triggerKind": "manual"})
        assert resp["result"] == {"suggestions": []}
        bad = await h.call("nes/suggest", {"sessionId": "nes-1"})  # background work: refused all the same
        assert bad["error"]["code"] == -32602 and "triggerKind" in str(bad["error"]["data"])
        held = h.request("nes/suggest", {**suggest, "uri": "file:///hold", "triggerKind": "automatic"})
        await agent.suggesting.wait()  # running in the background pool: the control lane still answers
        assert (await h.call("session/list", {}))["result"] == {"sessions": []}
        h.notify("$/cancel_request", {"requestId": held})
        assert (await h.response(held))["error"]["code"] == -32800
        assert _calls(agent, "suggest_cancelled") == [{"uri": "file:///hold"}]
        resp = await h.call("mcp/message", {"connectionId": "c1", "method": "tools/list", "params": {}})
        assert resp["result"] == {"tools": []}
        h.notify("document/didOpen", {**opened, "sessionId": sid, "text": "x"})
        await agent.notified.wait()
        h.notify("document/didOpen", {"sessionId": sid})  # invalid: logged, never answered, serving goes on
        assert (await h.call("session/list", {}))["result"] == {"sessions": []}
        assert [n for n, _ in agent.calls if n != "list_sessions"] == [
            "initialize",
            "list_providers",
            "set_provider",
            "disable_provider",
            "start_nes",
            "suggest_nes",
            "suggest_nes",
            "suggest_cancelled",
            "mcp_message",
            "did_open",
        ]
        assert _calls(agent, "did_open") == [{"session_id": sid, "uri": "file:///a", "text": "x"}]
        await close_and_check(h)

    run(body())


def test_matrix_a_1x_agent_talks_mcp_over_acp_to_the_client(run: Any) -> None:
    if SDK_VERSION[0] < 1:
        pytest.skip(f"SDK {RELEASE}'s connection has no MCP calls")

    async def body() -> None:
        from acp.schema import DisconnectMcpResponse

        h, agent, sid = await _started()
        pid = h.request("session/prompt", prompt_params(sid, "mcp"))
        (connect,) = await h.wait_for(lambda: h.outgoing_requests("mcp/connect"))
        assert connect["params"] == {"serverId": "srv", "_meta": {"trace": "t"}}
        h.send({"jsonrpc": "2.0", "id": connect["id"], "result": {"connectionId": "c9"}})
        (message,) = await h.wait_for(lambda: h.outgoing_requests("mcp/message"))
        assert message["params"] == {"connectionId": "c9", "method": "tools/list", "params": {"cursor": "n"}}
        h.send({"jsonrpc": "2.0", "id": message["id"], "result": [1, "x"]})
        (disconnect,) = await h.wait_for(lambda: h.outgoing_requests("mcp/disconnect"))
        notes = [m["params"] for m in h.messages if m.get("method") == "mcp/message" and "id" not in m]
        assert notes == [{"connectionId": "c9", "method": "notifications/initialized"}]
        h.send({"jsonrpc": "2.0", "id": disconnect["id"], "result": None})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        assert _calls(agent, "mcp_client") == [{"answer": [1, "x"], "closed": DisconnectMcpResponse()}]
        await close_and_check(h)

    run(body())


#: A request whose params are ``None`` here is a prompt on the session ``session/new`` opened.
RawRequest = tuple[str, Any]


async def _raw_answers(make_connection: Any, agent: Any, requests: list[RawRequest]) -> list[Any]:
    """Drive ``agent`` through ``make_connection(agent, writer, reader)`` with raw JSON lines: each
    request's ``result``, or its whole ``error`` object."""
    import json

    async with _socket_pair() as (sr, sw, cr, cw):
        conn = make_connection(agent, sw, sr)
        sid_holder: list[str] = []
        answers: list[Any] = []
        for rid, (method, params) in enumerate(requests, 1):
            if params is None:  # a field some releases declare (0.10: messageId) and one no schema has
                params = {**prompt_params(sid_holder[0], "echo"), "messageId": "m-1", "noSchemaHasThis": 7}
            elif callable(params):
                params = params(sid_holder[0])
            cw.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
            await cw.drain()
            while True:
                msg = json.loads(await cr.readline())
                if msg.get("id") == rid and "method" not in msg:
                    break
            answers.append(msg["result"] if "result" in msg else msg.get("error"))
            if method == "session/new" and "result" in msg:
                sid_holder.append(msg["result"]["sessionId"])
        await conn.close()
    return answers


_PROMPT_RUN: list[RawRequest] = [
    ("initialize", {"protocolVersion": 1}),
    ("session/new", {"cwd": "/tmp", "mcpServers": []}),
    ("session/prompt", None),
]


async def _raw_prompt_answers(make_connection: Any, agent: Any) -> list[Any]:
    return await _raw_answers(make_connection, agent, _PROMPT_RUN)


def test_matrix_declared_prompt_fields_reach_the_agent_on_both_runtimes(run: Any) -> None:
    async def body() -> None:
        from acp.core import AgentSideConnection as SdkConnection
        from acp.schema import PromptRequest

        on_sdk, on_compat = ReleaseAgent(), ReleaseAgent()
        sdk_answers = await _raw_prompt_answers(SdkConnection, on_sdk)
        compat_answers = await _raw_prompt_answers(AgentSideConnection, on_compat)
        assert compat_answers == sdk_answers
        ((sdk_call,), (compat_call,)) = (_calls(on_sdk, "prompt"), _calls(on_compat, "prompt"))
        assert set(compat_call) == set(sdk_call)
        assert "no_schema_has_this" not in compat_call and "noSchemaHasThis" not in compat_call
        if "message_id" in PromptRequest.model_fields:  # 0.10: acp_fast's own table has no messageId
            assert compat_call["message_id"] == "m-1"
            assert compat_answers[2] == {"stopReason": "end_turn", "userMessageId": "m-1"}
        else:
            assert "message_id" not in compat_call and compat_answers[2] == {"stopReason": "end_turn"}

    run(body())


class _PlainAgent(common.RecordingAgent):
    """The release agent's methods without the ``acp.Agent`` protocol's stubs: what it lacks, it lacks
    on both runtimes (a stub the SDK would run is compat's -32601: see MIGRATION)."""

    text_update = ReleaseAgent.text_update


def test_matrix_bad_requests_answered_as_the_releases_own_runtime(run: Any) -> None:
    """The same bad requests to the SDK's runtime and to compat: the same error objects (code,
    message, data), and ``initialize`` answered as the agent returned it (no ``authMethods`` added)."""

    async def body() -> None:
        from acp.core import AgentSideConnection as SdkConnection

        requests: list[RawRequest] = [
            ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
            ("session/new", {"cwd": "/tmp", "mcpServers": []}),
            ("no/such_method", {}),
            ("session/load", {"sessionId": "s1", "cwd": "/tmp", "mcpServers": []}),  # the agent lacks it
            ("session/prompt", lambda sid: {"sessionId": sid}),  # no prompt
            ("session/prompt", lambda sid: {"sessionId": sid, "prompt": [{"type": "text"}]}),  # no text
            ("session/new", {"cwd": 5, "mcpServers": []}),
            ("session/new", ["not", "an", "object"]),
            ("_no/such_extension", {}),  # the agent defines no ext_method
            ("session/prompt", lambda sid: prompt_params(sid, "echo")),  # still serving
        ]
        sdk_answers = await _raw_answers(SdkConnection, _PlainAgent(), requests)
        compat_answers = await _raw_answers(AgentSideConnection, _PlainAgent(), requests)
        differ = [(m, a, b) for (m, _), a, b in zip(requests, sdk_answers, compat_answers, strict=True) if a != b]
        assert differ == []
        assert "authMethods" not in compat_answers[0]
        unknown = {"code": -32601, "message": "Method not found", "data": {"method": "no/such_method"}}
        assert compat_answers[2] == unknown
        assert compat_answers[4]["message"] == "Invalid params" and compat_answers[4]["data"]["errors"]
        assert compat_answers[-1] == {"stopReason": "end_turn"}

    run(body())


class _OwnCancelAnswer(ReleaseAgent):  # type: ignore[misc, valid-type]
    """Streams, stops when cancelled (its ``cancel`` on the SDK's runtime, ``CancelledError`` on
    compat), sends one more update and answers the cancel itself: usage (where the release has it)
    and ``_meta``."""

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp.schema import PromptResponse

        await self.conn.session_update(session_id, self.text_update("chunk 0"))
        with contextlib.suppress(asyncio.CancelledError):  # the agent catches its cancel
            await self.cancel_seen.wait()
        await self.conn.session_update(session_id, self.text_update("after cancel"))
        extra: dict[str, Any] = {}
        if "usage" in PromptResponse.model_fields:
            from acp.schema import Usage

            extra["usage"] = Usage(input_tokens=7, output_tokens=3, total_tokens=10)
        return PromptResponse(stop_reason="cancelled", field_meta={"turn": "t-1"}, **extra)


async def _cancelled_turn(make_connection: Any, agent: Any) -> list[Any]:
    """A prompt cancelled after its first update, with raw JSON lines: what the client reads, in
    order, up to the prompt's answer (updates as their text, the answer whole)."""
    import json

    async def read(rid: int | None = None) -> Any:
        while True:
            msg = json.loads(await cr.readline())
            if rid is None or (msg.get("id") == rid and "method" not in msg):
                return msg

    def send(obj: dict[str, Any]) -> None:
        cw.write(json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n")

    async with _socket_pair() as (sr, sw, cr, cw):
        conn = make_connection(agent, sw, sr)
        send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        await read(1)
        send({"id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
        sid = (await read(2))["result"]["sessionId"]
        send({"id": 3, "method": "session/prompt", "params": prompt_params(sid, "go")})
        seen: list[Any] = []
        first = await read()
        assert first.get("method") == "session/update", first
        seen.append(first["params"]["update"]["content"]["text"])
        send({"method": "session/cancel", "params": {"sessionId": sid}})
        while True:
            msg = await read()
            if msg.get("method") == "session/update":
                seen.append(msg["params"]["update"]["content"]["text"])
                continue
            seen.append(msg)
            if msg.get("id") == 3:
                break
        await conn.close()
    return seen


def test_matrix_the_agents_own_cancel_answer_as_on_the_releases_runtime(run: Any) -> None:
    """A prompt that answers its own cancel: the same answer (usage, ``_meta``) after the same
    updates on the SDK's runtime and on compat."""

    async def body() -> None:
        from acp.core import AgentSideConnection as SdkConnection

        on_sdk = await _cancelled_turn(SdkConnection, _OwnCancelAnswer())
        on_compat = await _cancelled_turn(AgentSideConnection, _OwnCancelAnswer())
        assert on_compat == on_sdk
        *texts, answer = on_compat
        assert texts == ["chunk 0", "after cancel"]
        assert answer["result"]["stopReason"] == "cancelled" and answer["result"]["_meta"] == {"turn": "t-1"}

    run(body())


class _SelfCancel(ReleaseAgent):  # type: ignore[misc, valid-type]
    """Cancels its own prompt: ``prompt`` keeps ``asyncio.current_task()`` and ``cancel`` calls
    ``.cancel()`` on it, as agents written for the SDK's runtime do. Its cleanup awaits (an update,
    then a loop step) before it answers the cancel itself."""

    task: asyncio.Task[Any] | None = None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp.schema import PromptResponse

        self.task = asyncio.current_task()
        await self.conn.session_update(session_id, self.text_update("chunk 0"))
        try:
            await asyncio.Event().wait()  # until its own cancel cancels it
        except asyncio.CancelledError:
            await self.conn.session_update(session_id, self.text_update("after cancel"))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        return PromptResponse(stop_reason="cancelled", field_meta={"turn": "self-cancelled"})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self.task is not None:
            self.task.cancel()


def test_matrix_a_prompt_its_own_cancel_cancels_answers_as_on_the_releases_runtime(run: Any) -> None:
    """An agent whose ``cancel`` cancels its own prompt task: on the SDK's runtime the task is
    cancelled once and the agent's answer goes out; on compat too (the runtime's cancel of the turn
    and the agent's are one CancelledError, not two, so the cleanup is not interrupted)."""

    async def body() -> None:
        from acp.core import AgentSideConnection as SdkConnection

        on_sdk = await _cancelled_turn(SdkConnection, _SelfCancel())
        on_compat = await _cancelled_turn(AgentSideConnection, _SelfCancel())
        *texts, answer = on_sdk
        assert texts == ["chunk 0", "after cancel"]
        assert answer["result"] == {"stopReason": "cancelled", "_meta": {"turn": "self-cancelled"}}
        assert on_compat == on_sdk

    run(body())
