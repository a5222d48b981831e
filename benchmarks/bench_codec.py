"""Codec cost of typical ACP messages: acp_fast.jsonrpc vs stdlib json vs the SDK's pydantic path.

    python -m pytest benchmarks/bench_codec.py --benchmark-only --benchmark-group-by=group

One group per message shape and direction; in each, ``acp_fast`` is
``jsonrpc.decode``/``encode_*`` (orjson plus envelope classification),
``stdlib-json`` is ``json.loads``/``json.dumps`` alone (no classification, so
it does less), and ``official-sdk`` is what the SDK does per message: its
transport's ``json.loads`` plus the router's ``model_validate`` of the params
on the way in, and model construction, ``model_dump`` and ``json.dumps`` on
the way out. ``extra_info["correct"]`` records that each implementation
produced the expected value; a wrong one fails the benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from acp import schema

from acp_fast.wire import jsonrpc

SET_MODE = {
    "jsonrpc": "2.0",
    "id": 41,
    "method": "session/set_mode",
    "params": {"sessionId": "sess_0123456789abcdef", "modeId": "code"},
}
PROMPT = {
    "jsonrpc": "2.0",
    "id": 42,
    "method": "session/prompt",
    "params": {
        "sessionId": "sess_0123456789abcdef",
        "prompt": [
            {"type": "text", "text": "Refactor the parser so that it streams. " * 8},
            {
                "type": "resource",
                "resource": {"uri": "file:///src/parser.py", "mimeType": "text/x-python", "text": "x = 1\n" * 200},
            },
        ],
    },
}
UPDATE_PARAMS = {
    "sessionId": "sess_0123456789abcdef",
    "update": {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Here is the next word "},
        "messageId": "m1",
    },
}
UPDATE = {"jsonrpc": "2.0", "method": "session/update", "params": UPDATE_PARAMS}
RESULT = {"jsonrpc": "2.0", "id": 42, "result": {"stopReason": "end_turn"}}


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


# -- decoders: bytes -> (method, params as a wire dict) --------------------------------


def _acp_fast_decode(line: bytes) -> tuple[str, Any]:
    msg = jsonrpc.decode(line)
    assert isinstance(msg, jsonrpc.Request)
    return msg.method, msg.params


def _stdlib_decode(line: bytes) -> tuple[str, Any]:
    obj = json.loads(line)
    return obj["method"], obj["params"]


_SDK_PARAM_MODELS: dict[str, Any] = {
    "session/set_mode": schema.SetSessionModeRequest,
    "session/prompt": schema.PromptRequest,
}


def _sdk_decode(line: bytes) -> tuple[str, Any]:
    obj = json.loads(line.strip())  # NdjsonTransport.receive
    model = _SDK_PARAM_MODELS[obj["method"]].model_validate(obj.get("params"))  # the router's validation
    return obj["method"], model


def _same_params(got: Any, want: dict[str, Any]) -> bool:
    if hasattr(got, "model_dump"):
        got = got.model_dump(mode="json", by_alias=True, exclude_none=True)
    return bool(got == want)


DECODERS: dict[str, Callable[[bytes], tuple[str, Any]]] = {
    "acp_fast": _acp_fast_decode,
    "stdlib-json": _stdlib_decode,
    "official-sdk": _sdk_decode,
}


@pytest.mark.parametrize("impl", list(DECODERS))
@pytest.mark.parametrize("shape", ["set_mode", "prompt"])
def test_decode_request(benchmark: Any, shape: str, impl: str) -> None:
    message = SET_MODE if shape == "set_mode" else PROMPT
    line = _line(message)
    benchmark.group = f"decode {message['method']} request ({len(line)} B)"
    method, params = benchmark(DECODERS[impl], line)
    correct = method == message["method"] and _same_params(params, message["params"])
    benchmark.extra_info["correct"] = correct
    benchmark.extra_info["bytes"] = len(line)
    assert correct


# -- encoders: wire values -> one line ------------------------------------------------


def _acp_fast_update() -> bytes:
    return jsonrpc.encode_notification("session/update", UPDATE_PARAMS)


def _stdlib_update() -> bytes:
    return (json.dumps(UPDATE, separators=(",", ":")) + "\n").encode()


def _sdk_update() -> bytes:
    # What AgentSideConnection.session_update + MessageSender.send do per update.
    note = schema.SessionNotification(
        session_id="sess_0123456789abcdef",
        update=schema.AgentMessageChunk(
            session_update="agent_message_chunk",
            content=schema.TextContentBlock(type="text", text="Here is the next word "),
            message_id="m1",
        ),
    )
    params = note.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    payload = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return (json.dumps(payload, separators=(",", ":")) + "\n").encode("utf-8")


def _acp_fast_result() -> bytes:
    return jsonrpc.encode_result(42, {"stopReason": "end_turn"})


def _stdlib_result() -> bytes:
    return (json.dumps(RESULT, separators=(",", ":")) + "\n").encode()


def _sdk_result() -> bytes:
    # Connection._execute_request: model_dump of the handler's model, then the sender's json.dumps.
    result = schema.PromptResponse(stop_reason="end_turn").model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_unset=True
    )
    return (json.dumps({"jsonrpc": "2.0", "id": 42, "result": result}, separators=(",", ":")) + "\n").encode()


ENCODERS: dict[str, dict[str, Callable[[], bytes]]] = {
    "session/update notification": {
        "acp_fast": _acp_fast_update,
        "stdlib-json": _stdlib_update,
        "official-sdk": _sdk_update,
    },
    "prompt result": {"acp_fast": _acp_fast_result, "stdlib-json": _stdlib_result, "official-sdk": _sdk_result},
}
EXPECTED = {"session/update notification": UPDATE, "prompt result": RESULT}


@pytest.mark.parametrize("impl", ["acp_fast", "stdlib-json", "official-sdk"])
@pytest.mark.parametrize("shape", list(ENCODERS))
def test_encode(benchmark: Any, shape: str, impl: str) -> None:
    benchmark.group = f"encode {shape}"
    line = benchmark(ENCODERS[shape][impl])
    correct = line.endswith(b"\n") and line.count(b"\n") == 1 and json.loads(line) == EXPECTED[shape]
    benchmark.extra_info["correct"] = correct
    benchmark.extra_info["bytes"] = len(line)
    assert correct
