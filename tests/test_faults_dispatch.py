"""R04, R10, R12, R24 and the outgoing-request and context faults, end to end over real pipes.

Each test runs ``python -m acp_fast serve ...`` (or ``demo``) with the compiled
framer and writes to its stdin as a client would. Lines that must race are
written in one ``write`` (below PIPE_BUF, so the agent reads them in one
chunk); every wait is on a message, and ``AgentProcess``'s hang timeout only
turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, ClassVar

import orjson
import pytest
from acp import PromptResponse, text_block, update_agent_message
from acp.schema import NewSessionResponse

from acp_fast.agent.base import Agent
from tests.helpers import AgentProcess

pytestmark = pytest.mark.slow

TARGET = "tests.test_faults_dispatch:DispatchFaultAgent"

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("dispatch_fault_seen", default="<unset>")


class _Opaque:
    """A value orjson has no encoding for."""


#: set_mode ``modeId`` -> what the handler returns (R04: not encodable as JSON).
UNENCODABLE: dict[str, Any] = {
    "set": {1, 2},
    "bigint": {"n": 2**70},
    "object": {"o": _Opaque()},
}


class DispatchFaultAgent(Agent):
    """Control-lane faults through ``set_session_mode``, background ones through ``prompt``."""

    background_extensions: ClassVar[frozenset[str]] = frozenset({"_bg_set"})

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self._n = getattr(self, "_n", 0) + 1
        return {"sessionId": f"s{self._n}"}

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> Any:
        if mode_id in UNENCODABLE:
            return UNENCODABLE[mode_id]
        if mode_id == "timeout0":
            async with asyncio.timeout(0):
                await asyncio.sleep(3600)
        if mode_id == "raise-cancelled":
            raise asyncio.CancelledError("raised by the handler, nobody cancelled it")
        if mode_id == "self-cancel":
            task = asyncio.current_task()
            assert task is not None
            task.cancel("the handler's own task, cancelled")
            await asyncio.sleep(3600)
        if mode_id == "pause":
            await asyncio.sleep(0.001)
        return {}

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> Any:
        text = str(prompt[0].get("text", ""))
        if text == "unencodable":
            return {"stopReason": "end_turn", "extra": {1, 2}}
        if text == "raise-cancelled":
            raise asyncio.CancelledError("raised by the prompt, nobody cancelled it")
        for i in range(3):  # never suspends: the pipe is read, so no update waits
            await self.client.agent_message_chunk(session_id, f"emitted {i}")
        return "end_turn"

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        if method == "_bg_set":
            return {3, 4}
        if method == "_ctx":  # one context per handler across its awaits
            before = _seen.get()
            _seen.set(str(params["v"]))
            await asyncio.sleep(0)
            return {"before": before, "after": _seen.get()}
        raise NotImplementedError(method)


class NeverSuspendsSdkAgent:
    """An agent on the official SDK whose prompt body never suspends (served through compat)."""

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> Any:
        return NewSessionResponse(session_id="sdk-1")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        for i in range(3):
            await self.conn.session_update(session_id, update_agent_message(text_block(f"sdk {i}")))
        return PromptResponse(stop_reason="end_turn")


def _line(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _req(id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def _prompt(sid: str, text: str, id: Any) -> dict[str, Any]:
    return _req(id, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def _cancel(sid: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}


def _set_mode(sid: str, mode: str, id: Any) -> dict[str, Any]:
    return _req(id, "session/set_mode", {"sessionId": sid, "modeId": mode})


def _until(agent: AgentProcess, ids: set[Any]) -> tuple[list[Any], dict[Any, list[dict[str, Any]]]]:
    """Read until every id in ``ids`` is answered: (every message, the answers by id)."""
    seen: list[Any] = []
    answers: dict[Any, list[dict[str, Any]]] = {}
    while not ids <= set(answers):
        msg = agent.next()
        seen.append(msg)
        if isinstance(msg, dict) and "method" not in msg:
            answers.setdefault(msg["id"], []).append(msg)
    return seen, answers


def _finish(agent: AgentProcess, answered: set[Any]) -> str:
    """EOF, a clean exit, nothing more on stdout and no id answered twice; returns stderr."""
    agent.close_stdin()
    assert agent.wait() == 0, agent.stderr[-3000:]
    rest = agent.no_more_output()
    late = [m for m in rest if isinstance(m, dict) and m.get("id") in answered and "method" not in m]
    assert late == [], late  # exactly one answer each (R04)
    return agent.stderr


def _turn_output(messages: list[Any], sid: str) -> list[Any]:
    """What a turn emitted: its session/update notifications and every agent->client request."""
    return [
        m
        for m in messages
        if isinstance(m, dict)
        and (
            (m.get("method") == "session/update" and m["params"]["sessionId"] == sid
             and m["params"]["update"]["sessionUpdate"] != "available_commands_update")
            or ("method" in m and "id" in m)
        )
    ]


def test_r10_demo_tool_prompt_cancelled_in_the_same_write_emits_nothing_over_pipes() -> None:
    with AgentProcess("demo") as agent:
        agent.initialize()
        sid = agent.new_session()
        agent.send_raw(_line(_prompt(sid, "tool", "p-tool")) + _line(_cancel(sid)) + _line(
            _req("after", "session/new", {"cwd": "/tmp", "mcpServers": []})
        ))
        seen, answers = _until(agent, {"p-tool", "after"})
        assert answers["p-tool"][0]["result"] == {"stopReason": "cancelled"}, answers
        assert "result" in answers["after"][0]  # still serving
        # Not a tool_call update, not a permission request: the body never ran.
        assert _turn_output(seen, sid) == [], _turn_output(seen, sid)
        _finish(agent, {"p-tool", "after"})


def test_r10_sdk_agent_that_never_suspends_is_not_called_when_cancelled_in_the_same_write() -> None:
    with AgentProcess("serve", "tests.test_faults_dispatch:NeverSuspendsSdkAgent") as agent:
        agent.initialize()
        sid = agent.new_session()
        agent.send_raw(_line(_prompt(sid, "go", "p-sdk")) + _line(_cancel(sid)))
        seen, answers = _until(agent, {"p-sdk"})
        assert answers["p-sdk"][0]["result"] == {"stopReason": "cancelled"}, answers
        assert _turn_output(seen, sid) == [], seen
        # Not cancelled: the same body runs to its end and streams all it has.
        agent.send_raw(_line(_prompt(sid, "go", "p-sdk-2")))
        seen, answers = _until(agent, {"p-sdk-2"})
        assert answers["p-sdk-2"][0]["result"] == {"stopReason": "end_turn"}, answers
        assert len(_turn_output(seen, sid)) == 3, seen
        _finish(agent, {"p-sdk", "p-sdk-2"})


def test_r04_unencodable_results_get_one_32603_naming_the_type_over_pipes() -> None:
    with AgentProcess("serve", TARGET) as agent:
        agent.initialize()
        sid = agent.new_session()
        wanted = {"set": "set", "bigint": "Integer", "object": "_Opaque"}
        chunk = b"".join(_line(_set_mode(sid, mode, f"m-{mode}")) for mode in wanted)
        chunk += _line(_prompt(sid, "unencodable", "p-unenc"))
        chunk += _line(_req("bg", "_bg_set", {}))
        agent.send_raw(chunk)
        ids = {f"m-{mode}" for mode in wanted} | {"p-unenc", "bg"}
        _, answers = _until(agent, ids)
        for mode, name in wanted.items():
            [answer] = answers[f"m-{mode}"]
            assert answer["error"]["code"] == -32603 and name in answer["error"]["message"], answer
        for rid in ("p-unenc", "bg"):  # the background path answers too (R04)
            [answer] = answers[rid]
            assert answer["error"]["code"] == -32603 and "set" in answer["error"]["message"], answer
        ok = agent.call("session/set_mode", {"sessionId": sid, "modeId": "plain"})
        assert ok["result"] == {}, ok  # still serving
        err = _finish(agent, ids)
        assert "Task exception was never retrieved" not in err and "second answer" not in err, err[-3000:]


@pytest.mark.parametrize("queued", [False, True], ids=["inline", "queued"])
def test_r24_cancellation_and_timeout_in_handlers_are_answered_and_serving_continues_over_pipes(
    queued: bool,
) -> None:
    cases = {"timeout0": (-32603, "TimeoutError"), "raise-cancelled": (-32603, "CancelledError"),
             "self-cancel": (-32800, None)}
    with AgentProcess("serve", TARGET) as agent:
        agent.initialize()
        sid = agent.new_session()
        for mode, (code, error) in cases.items():
            # Alone, a line reaches a parked loop and runs inline; behind a handler
            # that suspends, it is dispatched by the loop task.
            lead = _line(_set_mode(sid, "pause", f"lead-{mode}")) if queued else b""
            agent.send_raw(lead + _line(_set_mode(sid, mode, f"m-{mode}")))
            _, answers = _until(agent, {f"m-{mode}"})
            [answer] = answers[f"m-{mode}"]
            assert answer["error"]["code"] == code, answer
            if error is not None:
                assert answer["error"]["data"] == {"error": error}, answer
            ok = agent.call("session/set_mode", {"sessionId": sid, "modeId": "plain"})
            assert ok["result"] == {}, (mode, ok)  # the connection keeps serving
        agent.send_raw(_line(_prompt(sid, "raise-cancelled", "p-rc")))
        _, answers = _until(agent, {"p-rc"})
        [answer] = answers["p-rc"]
        assert answer["error"]["code"] == -32603 and answer["error"]["data"] == {"error": "CancelledError"}, answer
        _finish(agent, {"p-rc"} | {f"m-{m}" for m in cases})


def test_outgoing_request_abandoned_by_a_cancelled_turn_is_cancelled_and_its_late_reply_is_quiet() -> None:
    with AgentProcess("demo", "--log-level", "info") as agent:
        agent.initialize()
        sid = agent.new_session()
        agent.send_raw(_line(_prompt(sid, "tool", "p-tool")))
        while True:
            msg = agent.next()
            if msg.get("method") == "session/request_permission":
                break
        agent.send_raw(_line(_cancel(sid)))
        seen, answers = _until(agent, {"p-tool"})
        assert answers["p-tool"][0]["result"] == {"stopReason": "cancelled"}, answers
        cancels = [m for m in seen if m.get("method") == "$/cancel_request"]
        assert cancels == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": msg["id"]}}]
        assert seen.index(cancels[0]) < seen.index(answers["p-tool"][0])  # before the turn's answer (R05)
        # The client's required answer to the permission request comes after all that.
        agent.send_raw(_line({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "cancelled"}}}))
        assert "result" in agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        err = _finish(agent, {"p-tool"})
        for noise in ("InvalidStateError", "ERROR", "unknown request id", "Traceback"):
            assert noise not in err, err[-3000:]


def test_context_var_set_in_a_handler_survives_its_await_on_both_paths_over_pipes() -> None:
    with AgentProcess("serve", TARGET) as agent:
        agent.initialize()
        first = agent.call("_ctx", {"v": "one"})  # alone: dispatched inline
        assert first["result"]["after"] == "one", first
        # Two in one write: the first runs inline and suspends, the second is the loop task's.
        agent.send_raw(_line(_req("c2", "_ctx", {"v": "two"})) + _line(_req("c3", "_ctx", {"v": "three"})))
        _, answers = _until(agent, {"c2", "c3"})
        assert answers["c2"][0]["result"]["after"] == "two", answers
        assert answers["c3"][0]["result"] == {"before": "two", "after": "three"}, answers
        _finish(agent, {"c2", "c3"})
