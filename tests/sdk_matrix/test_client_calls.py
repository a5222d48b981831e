"""Agent->client calls in the installed release's own parameter order, positional and by keyword.

0.8 to 0.10 order ``request_permission(options, session_id, tool_call)``,
``read_text_file(path, session_id, limit, line)``, ``write_text_file(content,
path, session_id)`` and ``create_terminal(command, session_id, args, cwd, env,
...)``; 0.11 on put ``session_id`` first. An agent pinned to either calls
positionally (kimi-cli on 0.8 does), so each call here is made both ways and
the request the client receives is checked (the terminal calls, ``session_update``
and ``ext_method``, whose order no release changed, too). The orders are written out here,
not read from the SDK, so a wrong derivation in compat fails the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
from acp.schema import PermissionOption, ToolCallUpdate

from acp_fast.compat import SDK_VERSION, wrap_sdk_agent
from tests.helpers import Harness, close_and_check
from tests.sdk_matrix.test_sdk_release import ReleaseAgent

#: Releases before 0.11 put the payload first and ``session_id`` after it.
OLD_ORDER = SDK_VERSION < (0, 11)


async def _sent(h: Harness, method: str, call: Callable[[], Awaitable[Any]], answer: Any) -> tuple[Any, Any]:
    """Make ``call``; the params of the one request it sends and the call's return value."""
    before = len(h.outgoing_requests(method))
    task = asyncio.ensure_future(call())
    new = await h.wait_for(lambda: h.outgoing_requests(method)[before:])
    assert len(new) == 1, new
    h.send({"jsonrpc": "2.0", "id": new[0]["id"], "result": answer})
    return new[0]["params"], await task


def _cases(conn: Any, sid: str) -> list[tuple[str, Any, Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]]:
    """(wire method, client answer, positional call, keyword call) for each call with a reordered signature."""
    option = PermissionOption(option_id="ok", name="OK", kind="allow_once")
    tool = ToolCallUpdate(tool_call_id="tc1")
    if OLD_ORDER:
        positional = [
            lambda: conn.request_permission([option], sid, tool),
            lambda: conn.read_text_file("/a.txt", sid, 5, 2),
            lambda: conn.write_text_file("text", "/a.txt", sid),
            lambda: conn.create_terminal("ls", sid, ["-l"], "/tmp"),
        ]
    else:
        positional = [
            lambda: conn.request_permission(sid, tool, [option]),
            lambda: conn.read_text_file(sid, "/a.txt", 2, 5),
            lambda: conn.write_text_file(sid, "/a.txt", "text"),
            lambda: conn.create_terminal(sid, "ls", ["-l"], None, "/tmp"),
        ]
    keyword = [
        lambda: conn.request_permission(options=[option], tool_call=tool, session_id=sid),
        lambda: conn.read_text_file(limit=5, line=2, path="/a.txt", session_id=sid),
        lambda: conn.write_text_file(path="/a.txt", content="text", session_id=sid),
        lambda: conn.create_terminal(cwd="/tmp", args=["-l"], command="ls", session_id=sid),
    ]
    answers = [
        ("session/request_permission", {"outcome": {"outcome": "cancelled"}}),
        ("fs/read_text_file", {"content": "x"}),
        ("fs/write_text_file", {}),
        ("terminal/create", {"terminalId": "t1"}),
    ]
    return [(m, a, p, k) for (m, a), p, k in zip(answers, positional, keyword, strict=True)]


def _expected(sid: str) -> dict[str, dict[str, Any]]:
    return {
        "session/request_permission": {
            "sessionId": sid,
            "toolCall": {"toolCallId": "tc1"},
            "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
        },
        "fs/read_text_file": {"sessionId": sid, "path": "/a.txt", "line": 2, "limit": 5},
        "fs/write_text_file": {"sessionId": sid, "path": "/a.txt", "content": "text"},
        "terminal/create": {"sessionId": sid, "command": "ls", "args": ["-l"], "cwd": "/tmp"},
    }


def test_client_calls_take_the_releases_positional_order_and_keywords(run: Any) -> None:
    async def body() -> None:
        agent = ReleaseAgent()
        h = Harness(wrap_sdk_agent(agent))
        await h.initialize()
        sid = await h.new_session()
        expected = _expected(sid)
        for method, answer, positional, keyword in _cases(agent.conn, sid):
            for call in (positional, keyword):
                params, result = await _sent(h, method, call, answer)
                assert params == expected[method], (method, params)
                assert result is None or type(result).__name__.endswith("Response")
        terminal_calls = {
            "terminal_output": "terminal/output",
            "release_terminal": "terminal/release",
            "wait_for_terminal_exit": "terminal/wait_for_exit",
            "kill_terminal": "terminal/kill",
        }
        for name, method in terminal_calls.items():
            answer: Any = {"output": "", "truncated": False} if name == "terminal_output" else {}
            answer = {"exitCode": 0} if name == "wait_for_terminal_exit" else answer
            fn = getattr(agent.conn, name)
            for call in (partial(fn, sid, "t1"), partial(fn, terminal_id="t1", session_id=sid)):
                params, _ = await _sent(h, method, call, answer)
                assert params == {"sessionId": sid, "terminalId": "t1"}
        conn = agent.conn
        by_keyword = partial(conn.ext_method, params={"n": 1}, method="x/ping")
        for call in (partial(conn.ext_method, "x/ping", {"n": 1}), by_keyword):
            params, result = await _sent(h, "_x/ping", call, {"pong": True})
            assert params == {"n": 1} and result == {"pong": True}
        update = agent.text_update("hi")
        await conn.session_update(sid, update)
        await conn.session_update(update=update, session_id=sid)
        first, second = await h.wait_for(lambda: h.updates(sid) if len(h.updates(sid)) == 2 else None)
        assert first == second and first["update"]["content"]["text"] == "hi"
        await close_and_check(h)

    run(body())


def test_client_calls_refuse_what_the_release_refuses(run: Any) -> None:
    async def body() -> None:
        agent = ReleaseAgent()
        h = Harness(wrap_sdk_agent(agent))
        await h.initialize()
        with pytest.raises(TypeError):
            agent.conn.write_text_file("a", "b", "c", "one too many")
        with pytest.raises(TypeError):
            agent.conn.request_permission(session_id="s1")  # options and tool_call missing
        assert h.outgoing_requests() == []
        await close_and_check(h)

    run(body())
