"""acp_fast.compat: an agent written on the official Python SDK, served by acp_fast (Harness, no pipes).

The agent under test is tests/interop/sdk_sample_agent.py, plain SDK code.
Waiting is event-driven (Harness.wait_for and the agent's own Events).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from typing import Any

import pytest
from acp import RequestError, text_block, update_agent_message
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionCapabilities,
    SessionListCapabilities,
    TextContentBlock,
    Usage,
)

from acp_fast.agent.base import Agent
from acp_fast.compat import SdkClient, wrap_sdk_agent
from acp_fast.wire.limits import Limits
from tests.helpers import Harness, close_and_check, prompt_params
from tests.interop.sdk_sample_agent import SampleAgent

pytestmark = pytest.mark.usefixtures("read_path")

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


async def _start(
    sample: SampleAgent | None = None, caps: dict[str, Any] | None = None, limits: Limits | None = None
) -> tuple[Harness, SampleAgent, str]:
    sample = sample or SampleAgent()
    h = Harness(wrap_sdk_agent(sample), limits=limits)
    await h.initialize(caps)
    return h, sample, await h.new_session()


def _texts(h: Harness, sid: str) -> list[str]:
    chunks = [u["update"] for u in h.updates(sid) if u["update"]["sessionUpdate"] == "agent_message_chunk"]
    return [c["content"]["text"] for c in chunks]


def _calls(sample: SampleAgent, name: str) -> list[dict[str, Any]]:
    return [kw for n, kw in sample.calls if n == name]


def test_compat_importing_acp_fast_does_not_import_the_sdk() -> None:
    code = "import sys, acp_fast, acp_fast.agent.server, acp_fast.cli; sys.exit(1 if 'acp' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_compat_initialize_uses_the_sdk_agents_response_and_capabilities(run: Any) -> None:
    async def body() -> None:
        sample = SampleAgent()
        h = Harness(wrap_sdk_agent(sample))
        result = await h.initialize(FS)
        # The SDK agent's own InitializeResponse, serialised as the SDK does (exclude_unset) ...
        assert result["agentInfo"] == {"name": "sdk-sample", "title": "SDK sample agent", "version": "0.1.0"}
        assert result["agentCapabilities"]["promptCapabilities"] == {"embeddedContext": True}
        # ... and valid for the SDK's client-side model.
        InitializeResponse.model_validate(result)
        # It defines no load_session/list_sessions: nothing advertised, and -32601.
        assert "loadSession" not in result["agentCapabilities"]
        assert "sessionCapabilities" not in result["agentCapabilities"]
        resp = await h.call("session/load", {"sessionId": "x", "cwd": "/tmp", "mcpServers": []})
        assert resp["error"]["code"] == -32601
        # It got the SDK's pydantic model for the nested params.
        assert isinstance(sample.client_capabilities, ClientCapabilities)
        assert sample.client_capabilities.fs.read_text_file is True
        await close_and_check(h)

    run(body())


def test_compat_prompt_streams_updates_and_gets_sdk_models(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        resp = await h.call("session/prompt", prompt_params(sid, "stream 3 0"))
        assert resp["result"] == {"stopReason": "end_turn"}
        assert _texts(h, sid) == ["chunk 0 ", "chunk 1 ", "chunk 2 "]
        first = h.updates(sid)[0]
        assert first == {
            "sessionId": sid,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "chunk 0 "}},
        }
        (call,) = _calls(sample, "prompt")
        assert isinstance(call["prompt"][0], TextContentBlock)
        assert call["session_id"] == sid
        await close_and_check(h)

    run(body())


def test_compat_meta_is_spread_into_kwargs_and_extra_kwargs_become_meta(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        params = {**prompt_params(sid, "wait"), "_meta": {"trace": "t-1"}}
        pid = h.request("session/prompt", params)
        await h.wait_for(lambda: h.updates(sid))
        # session_update(..., source="sample") -> params._meta, as the SDK sends it.
        assert h.updates(sid)[0]["_meta"] == {"source": "sample"}
        assert _calls(sample, "prompt")[0]["trace"] == "t-1"
        sample.release.set()
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        new = _calls(sample, "new_session")[0]
        assert new["cwd"] == "/tmp" and new["mcp_servers"] == [] and new["additional_directories"] is None
        await close_and_check(h)

    run(body())


def test_r10_compat_cancel_mid_stream_answers_cancelled_and_calls_sdk_cancel(run: Any) -> None:
    """``wait`` does not watch its cancel: as under the SDK only the agent's ``cancel`` is called,
    so the watchdog answers (R30) and then stops the task."""

    async def body() -> None:
        h, sample, sid = await _start(limits=Limits(cancel_grace_s=0.01))
        pid = h.request("session/prompt", prompt_params(sid, "wait"))
        await h.wait_for(lambda: h.updates(sid))
        h.notify("session/cancel", {"sessionId": sid, "_meta": {"why": "user"}})
        assert (await h.response(pid))["result"] == {"stopReason": "cancelled"}
        await h.wait_for(lambda: _calls(sample, "cancel"))
        assert _calls(sample, "cancel") == [{"session_id": sid, "why": "user"}]
        assert not sample.release.is_set()  # the prompt was stopped, not let finish
        await close_and_check(h)

    run(body())


class _OwnCancelAnswer(SampleAgent):
    """Streams, stops when cancelled (its ``cancel()`` on the SDK's runtime, ``CancelledError`` on
    compat), sends one more update and answers the cancel itself, with usage and ``_meta``."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped = asyncio.Event()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        await super().cancel(session_id, **kwargs)
        self.stopped.set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        conn = self._client()
        await conn.session_update(session_id, update_agent_message(text_block("chunk 0 ")))
        await conn.session_update(session_id, update_agent_message(text_block("chunk 1 ")))
        with contextlib.suppress(asyncio.CancelledError):  # the agent catches its cancel
            await self.stopped.wait()
        await conn.session_update(session_id, update_agent_message(text_block("after cancel")))
        return PromptResponse(
            stop_reason="cancelled",
            usage=Usage(input_tokens=7, output_tokens=3, total_tokens=10),
            field_meta={"turn": "t-1"},
        )


OWN_CANCEL_ANSWER = {
    "stopReason": "cancelled",
    "usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10},
    "_meta": {"turn": "t-1"},
}


@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
def test_r10_compat_agents_own_cancel_answer_comes_after_every_update(run: Any, how: str) -> None:
    async def body() -> None:
        h, _sample, sid = await _start(_OwnCancelAnswer())
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await h.wait_for(lambda: len(h.updates(sid)) == 2)
        h.notify(how, {"sessionId": sid} if how == "session/cancel" else {"requestId": pid})
        answer = await h.response(pid)
        assert answer["result"] == OWN_CANCEL_ANSWER
        # In the written order: every update of the turn, then its answer, and nothing after it.
        at = h.messages.index(answer)
        assert [m["params"]["update"]["content"]["text"] for m in h.messages[:at] if m.get("method")] == [
            "chunk 0 ",
            "chunk 1 ",
            "after cancel",
        ]
        assert h.messages[at + 1 :] == [] and h.conn.dropped_late == 0
        await close_and_check(h)

    run(body())


def test_r30_compat_agent_ignoring_the_cancel_is_answered_by_the_watchdog(run: Any) -> None:
    class Deaf(SampleAgent):
        async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
            conn = self._client()
            await conn.session_update(session_id, update_agent_message(text_block("started")))
            while not self.release.is_set():  # the cancel goes unnoticed, however often it comes
                try:
                    await asyncio.shield(self.release.wait())
                except asyncio.CancelledError:
                    continue
            await conn.session_update(session_id, update_agent_message(text_block("late")))
            return PromptResponse(stop_reason="end_turn", field_meta={"never": "sent"})

    async def body() -> None:
        sample = Deaf()
        h = Harness(wrap_sdk_agent(sample), limits=Limits(cancel_grace_s=0.01))
        await h.initialize()
        sid = await h.new_session()
        pid = h.request("session/prompt", prompt_params(sid, "go"))
        await h.wait_for(lambda: h.updates(sid))
        h.notify("session/cancel", {"sessionId": sid})
        answer = await h.response(pid)
        assert answer["result"] == {"stopReason": "cancelled"}
        [job] = h.server.pool.jobs()
        assert job.orphaned and not job.task.done()
        sample.release.set()
        await job.task
        at = h.messages.index(answer)
        assert h.messages[at + 1 :] == [] and h.conn.dropped_late == 1
        assert _texts(h, sid) == ["started"]
        await close_and_check(h)

    run(body())


def test_r10_compat_cancel_in_same_chunk_as_prompt_cancels_it(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        prompt = h.request_obj("session/prompt", prompt_params(sid, "wait"))
        h.send(prompt, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        assert (await h.response(prompt["id"]))["result"] == {"stopReason": "cancelled"}
        # Cancelled before its task ran a step: the SDK agent's prompt is never called (R10).
        assert _calls(sample, "prompt") == [] and h.updates(sid) == []
        await close_and_check(h)

    run(body())


def test_r07_compat_second_prompt_on_busy_session_rejected(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        first = h.request("session/prompt", prompt_params(sid, "wait"))
        await h.wait_for(lambda: h.updates(sid))
        second = await h.call("session/prompt", prompt_params(sid, "hello"))
        assert second["error"]["code"] == -32000 and sid in second["error"]["message"]
        sample.release.set()
        assert (await h.response(first))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())


def test_compat_set_mode_and_its_request_error(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        ok = await h.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
        assert ok["result"] == {}
        assert sample.sessions[sid] == "code"
        assert h.server.sessions.get(sid).mode_id == "code"
        bad = await h.call("session/set_mode", {"sessionId": sid, "modeId": "nope"})
        # RequestError.invalid_params({"modeId": ...}) -> the same JSON-RPC error.
        assert bad["error"] == {"code": -32602, "message": "Invalid params", "data": {"modeId": "nope"}}
        await close_and_check(h)

    run(body())


def test_compat_permission_request_round_trip_with_sdk_models(run: Any) -> None:
    async def body() -> None:
        h, sample, sid = await _start()
        pid = h.request("session/prompt", prompt_params(sid, "tool"))
        (req,) = await h.wait_for(lambda: h.outgoing_requests("session/request_permission"))
        assert req["params"]["toolCall"] == {"toolCallId": "call-1", "title": "List files"}
        assert req["params"]["options"][0] == {"optionId": "allow", "name": "Allow", "kind": "allow_once"}
        h.send({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        outcome = _calls(sample, "permission_answer")[0]["outcome"]
        assert type(outcome).__name__ == "AllowedOutcome" and outcome.option_id == "allow"
        last = h.updates(sid)[-1]["update"]
        assert last == {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed"}
        await close_and_check(h)

    run(body())


def test_compat_fs_read_and_write_through_the_sdk_client(run: Any) -> None:
    async def body() -> None:
        h, _sample, sid = await _start(caps=FS)
        pid = h.request("session/prompt", prompt_params(sid, "write /tmp/a.txt hi there"))
        (w,) = await h.wait_for(lambda: h.outgoing_requests("fs/write_text_file"))
        assert w["params"] == {"sessionId": sid, "path": "/tmp/a.txt", "content": "hi there"}
        h.send({"jsonrpc": "2.0", "id": w["id"], "result": None})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        pid = h.request("session/prompt", prompt_params(sid, "read /tmp/a.txt"))
        (r,) = await h.wait_for(lambda: h.outgoing_requests("fs/read_text_file"))
        assert r["params"] == {"sessionId": sid, "path": "/tmp/a.txt"}
        h.send({"jsonrpc": "2.0", "id": r["id"], "result": {"content": "hi there"}})
        assert (await h.response(pid))["result"] == {"stopReason": "end_turn"}
        assert _texts(h, sid) == ["wrote /tmp/a.txt", "read 8"]
        await close_and_check(h)

    run(body())


def test_compat_client_errors_reach_the_sdk_agent_as_request_error(run: Any) -> None:
    async def body() -> None:
        h, _sample, sid = await _start(caps=FS)
        pid = h.request("session/prompt", prompt_params(sid, "read /tmp/missing"))
        (r,) = await h.wait_for(lambda: h.outgoing_requests("fs/read_text_file"))
        h.send({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32002, "message": "Resource not found"}})
        # The sample does not catch it: the RequestError leaves the prompt as that same error.
        resp = await h.response(pid)
        assert resp["error"]["code"] == -32002 and resp["error"]["message"] == "Resource not found"
        await close_and_check(h)

    run(body())


def test_compat_strict_capability_gate_raises_request_error_in_sdk_code(run: Any) -> None:
    async def body() -> None:
        sample = SampleAgent()
        h = Harness(wrap_sdk_agent(sample, strict=True))
        await h.initialize()  # no fs capability advertised
        conn = sample.conn
        assert isinstance(conn, SdkClient)
        try:
            await conn.read_text_file(session_id="s", path="/tmp/x")
        except RequestError as exc:
            assert exc.code == -32601
        else:
            raise AssertionError("read_text_file went out although the client did not allow it")
        assert not h.outgoing_requests("fs/read_text_file")
        await close_and_check(h)

    run(body())


def test_r24_compat_errors_map_like_the_sdk(run: Any) -> None:
    async def body() -> None:
        h, _sample, sid = await _start()
        fail = await h.call("session/prompt", prompt_params(sid, "fail"))
        assert fail["error"] == {"code": -32602, "message": "Invalid params", "data": {"why": "asked to fail"}}
        crash = await h.call("session/prompt", prompt_params(sid, "crash"))
        assert crash["error"]["code"] == -32603
        # A ValidationError raised by the agent's own code: -32602, as the SDK's connection answers.
        invalid = await h.call("session/prompt", prompt_params(sid, "invalid"))
        assert invalid["error"]["code"] == -32602 and invalid["error"]["data"]["errors"][0]["loc"] == ["stopReason"]
        # A block the SDK's PromptRequest model refuses: -32602 with pydantic's errors, as the SDK answers.
        bad = await h.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text"}]})
        assert bad["error"]["code"] == -32602 and bad["error"]["data"]["errors"][0]["loc"][-1] == "text"
        # Not defined by the SDK agent: -32601; and it keeps serving.
        assert (await h.call("session/list", {}))["error"]["code"] == -32601
        assert (await h.call("session/prompt", prompt_params(sid, "hi")))["result"] == {"stopReason": "end_turn"}
        await close_and_check(h)

    run(body())


def test_compat_ext_method_gets_the_name_without_underscore(run: Any) -> None:
    async def body() -> None:
        h, sample, _sid = await _start()
        resp = await h.call("_sample/echo", {"x": 1})
        assert resp["result"] == {"echo": "sample/echo", "params": {"x": 1}}
        assert _calls(sample, "ext_method") == [{"method": "sample/echo", "params": {"x": 1}}]
        await close_and_check(h)

    run(body())


class _Minimal:
    """An SDK agent that defines only prompt (no initialize, no new_session)."""

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        return PromptResponse(stop_reason="end_turn")


class _Unstable(SampleAgent):
    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("close_session", {"session_id": session_id}))


def test_compat_undefined_new_session_answers_method_not_found(run: Any) -> None:
    async def body() -> None:
        h = Harness(wrap_sdk_agent(_Minimal()))
        await h.initialize()
        resp = await h.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert resp["error"]["code"] == -32601
        await close_and_check(h)

    run(body())


def test_compat_unstable_methods_need_the_flag_as_in_the_sdk(run: Any) -> None:
    async def body() -> None:
        off = Harness(wrap_sdk_agent(_Unstable()))
        caps = (await off.initialize())["agentCapabilities"]
        assert "sessionCapabilities" not in caps
        sid = await off.new_session()
        with pytest.warns(UserWarning, match="use_unstable_protocol"):  # as the SDK warns
            assert (await off.call("session/close", {"sessionId": sid}))["error"]["code"] == -32601
        await close_and_check(off)

        sample = _Unstable()
        on = Harness(wrap_sdk_agent(sample, use_unstable_protocol=True))
        await on.initialize()
        sid = await on.new_session()
        assert (await on.call("session/close", {"sessionId": sid}))["result"] == {}
        assert _calls(sample, "close_session") == [{"session_id": sid}]
        await close_and_check(on)

    run(body())


class _Loader(SampleAgent):
    """Defines load_session; whether it advertises it is the agent's own choice."""

    advertise = False

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(load_session=self.advertise, session_capabilities=SessionCapabilities())
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=caps)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("load_session", {"session_id": session_id}))


class _Overclaims(SampleAgent):
    """Advertises loadSession and session/list without defining either."""

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(
            load_session=True, session_capabilities=SessionCapabilities(list=SessionListCapabilities())
        )
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=caps)


def test_compat_sdk_agent_decides_capabilities_passed_through_as_on_the_sdk(run: Any) -> None:
    async def body() -> None:
        quiet = Harness(wrap_sdk_agent(_Loader()))
        caps = (await quiet.initialize())["agentCapabilities"]
        assert caps.get("loadSession") is not True  # defined, but not advertised by the agent: not added
        await close_and_check(quiet)

        loud = _Loader()
        loud.advertise = True
        h = Harness(wrap_sdk_agent(loud))
        assert (await h.initialize())["agentCapabilities"]["loadSession"] is True
        resp = await h.call("session/load", {"sessionId": "old-1", "cwd": "/tmp", "mcpServers": []})
        assert resp["result"] == {}  # None -> {} as the SDK's normalize_result answers
        assert _calls(loud, "load_session") == [{"session_id": "old-1"}]
        await close_and_check(h)

        over = Harness(wrap_sdk_agent(_Overclaims()))
        answer = await over.initialize()
        # As the SDK's runtime: the agent's answer unchanged (no authMethods added, overclaims kept) ...
        assert answer == {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"list": {}}},
        }
        # ... and what it overclaims answers the SDK's -32601.
        resp = await over.call("session/load", {"sessionId": "old-1", "cwd": "/tmp", "mcpServers": []})
        assert resp["error"] == {"code": -32601, "message": "Method not found", "data": {"method": "session/load"}}
        await close_and_check(over)

    run(body())


class UnstableSdkAgent:
    """An SDK-style agent that defines one unstable method (served only with --unstable)."""

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> Any:
        from acp.schema import NewSessionResponse

        return NewSessionResponse(session_id="s-1")

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        return None


@pytest.mark.parametrize("unstable", [False, True], ids=["stable-only", "unstable"])
def test_cli_serve_unstable_flag_serves_the_sdk_agents_unstable_methods(unstable: bool) -> None:
    from tests.helpers import AgentProcess

    args = ["serve", "tests.test_compat:UnstableSdkAgent", *(["--unstable"] if unstable else [])]
    with AgentProcess(*args) as agent:
        agent.initialize()
        sid = agent.new_session()
        answer = agent.call("session/close", {"sessionId": sid})
        if unstable:
            assert answer.get("result") == {}, answer
        else:
            assert answer["error"]["code"] == -32601, answer
        agent.close_stdin()
        assert agent.wait() == 0


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_cli_serve_strict_flag_keeps_acp_fasts_answers_for_an_sdk_agent(strict: bool) -> None:
    """`serve --strict` is `wrap_sdk_agent(strict=True)`: an unknown session is -32602, not handed to the agent."""
    from tests.helpers import AgentProcess

    args = ["serve", "tests.test_compat:UnstableSdkAgent", "--unstable", *(["--strict"] if strict else [])]
    with AgentProcess(*args) as agent:
        agent.initialize()
        answer = agent.call("session/close", {"sessionId": "never-made"})
        if strict:
            assert answer["error"]["code"] == -32602, answer
        else:
            assert answer.get("result") == {}, answer  # the SDK's way: the agent decides
        agent.close_stdin()
        assert agent.wait() == 0


class _ParamsAgent:
    """Records what each handler got; ``prompt`` "hold" waits until released."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.release = asyncio.Event()

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        self.got.append(("new_session", {"cwd": cwd}))
        return NewSessionResponse(session_id=f"p{len(self.got)}")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        self.got.append(("prompt", {"session_id": session_id, "text": prompt[0].text, **kwargs}))
        if prompt[0].text == "hold":
            await self.release.wait()
        return PromptResponse(stop_reason="end_turn")


def test_compat_each_request_gets_its_own_wire_params(run: Any) -> None:
    """Two prompts in one read: each task builds its model from its own params, not the later one's."""

    async def body() -> None:
        agent = _ParamsAgent()
        h = Harness(wrap_sdk_agent(agent))
        await h.initialize()
        resp = await h.call("session/new", {"cwd": "rel/dir", "mcpServers": []})  # lenient, as on the SDK
        sid_a = resp["result"]["sessionId"]
        sid_b = await h.new_session("/abs")
        a = h.request_obj("session/prompt", {**prompt_params(sid_a, "hold"), "_meta": {"trace": "a"}})
        b = h.request_obj("session/prompt", {**prompt_params(sid_b, "b"), "_meta": {"trace": "b"}})
        h.send(a, b)
        assert (await h.response(b["id"]))["result"] == {"stopReason": "end_turn"}
        agent.release.set()
        assert (await h.response(a["id"]))["result"] == {"stopReason": "end_turn"}
        prompts = sorted((kw for n, kw in agent.got if n == "prompt"), key=lambda kw: kw["trace"])
        assert prompts == [
            {"session_id": sid_a, "text": "hold", "trace": "a"},
            {"session_id": sid_b, "text": "b", "trace": "b"},
        ]
        assert [kw["cwd"] for n, kw in agent.got if n == "new_session"] == ["rel/dir", "/abs"]
        await close_and_check(h)

        strict = Harness(wrap_sdk_agent(_ParamsAgent(), strict=True))
        await strict.initialize()
        assert (await strict.call("session/new", {"cwd": "rel/dir", "mcpServers": []}))["error"]["code"] == -32602
        await close_and_check(strict)

    run(body())


class _NativeEcho(Agent):
    """A native acp_fast agent: the SDK's error shapes are compat's only, never a native agent's."""

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> None:
        return None


def test_native_agents_keep_acp_fasts_own_errors_and_initialize(run: Any) -> None:
    async def body() -> None:
        h = Harness(_NativeEcho())
        assert (await h.initialize())["authMethods"] == []
        sid = await h.new_session()
        unknown = (await h.call("no/such_method", {}))["error"]
        assert unknown["message"] == "Method not found: no/such_method"
        assert unknown["data"] == {"method": "no/such_method"}
        bad = (await h.call("session/prompt", {"sessionId": sid}))["error"]
        assert bad["code"] == -32602 and bad["data"] == {"field": "prompt"} and "prompt" in bad["message"]
        await close_and_check(h)

    run(body())
