"""R24 in process: every kind of bad input gets its one error and the next line is served.

Bytes go in through ``Harness.send_raw`` exactly as a pipe would deliver
them, so the real framer, decoder, dispatch loop and ACP layer answer.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_fast.agent.base import Agent
from tests.helpers import Harness, close_and_check, prompt_params

pytestmark = pytest.mark.usefixtures("read_path")


class PickyAgent(Agent):
    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        raise RuntimeError("secret detail: /home/user/.token")

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        return "end_turn"


def line(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def req(id: Any, method: str, params: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        out["params"] = params
    return out


SID = "{sid}"  # replaced by the test's session id

CASES = [
    pytest.param(b"this is not json\n", None, -32700, None, id="invalid-json"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"method":\n', None, -32700, None, id="truncated-json"),
    pytest.param(b'\xff\xfe{"jsonrpc":"2.0"}\n', None, -32700, None, id="invalid-utf8"),
    pytest.param(line({"jsonrpc": "1.0", "id": 7, "method": "initialize"}), 7, -32600, None, id="wrong-version"),
    pytest.param(line({"jsonrpc": "2.0", "id": 8}), 8, -32600, None, id="no-method-no-result"),
    pytest.param(line({"jsonrpc": "2.0", "id": 9, "method": 5}), 9, -32600, None, id="method-not-a-string"),
    pytest.param(line([req(10, "initialize")]), None, -32600, None, id="batch"),
    pytest.param(line(42), None, -32600, None, id="not-an-object"),
    pytest.param(line(req(11, "no/such/method")), 11, -32601, None, id="unknown-method"),
    pytest.param(line(req(12, "session/new", {"mcpServers": []})), 12, -32602, "cwd", id="missing-field"),
    pytest.param(
        line(req(13, "session/prompt", {"sessionId": SID, "prompt": "not a list"})),
        13,
        -32602,
        "prompt",
        id="ill-typed-field",
    ),
    pytest.param(
        line(req(14, "session/set_mode", {"sessionId": SID, "modeId": "x"})),
        14,
        -32603,
        None,
        id="handler-raises",
    ),
]


@pytest.mark.parametrize(("data", "rid", "code", "field"), CASES)
def test_r24_bad_input_gets_its_error_and_the_next_line_is_served(
    run: Any, framer_cls: type, data: bytes, rid: Any, code: int, field: str | None
) -> None:
    async def body() -> None:
        h = Harness(PickyAgent(), framer_cls=framer_cls)
        await h.initialize()
        sid = await h.new_session()
        before = len(h.messages)
        follow = req("next", "session/prompt", prompt_params(sid, "still there?"))
        h.send_raw(data.replace(SID.encode(), sid.encode()) + line(follow))
        ok = await h.response("next")
        assert ok["result"] == {"stopReason": "end_turn"}, ok
        new = h.messages[before:]
        assert len(new) == 2 and new[1] is ok, new  # exactly one answer to the bad line
        err = new[0]
        assert err["id"] == rid and err["error"]["code"] == code, err
        message = err["error"]["message"]
        assert isinstance(message, str) and message
        if field is not None:
            assert field in message and err["error"]["data"] == {"field": field}, err
        if code == -32603:
            assert "secret" not in orjson.dumps(err).decode() and "Traceback" not in message, err
        await close_and_check(h)

    run(body())


def test_r24_unknown_notification_is_ignored_and_the_next_line_is_served(
    run: Any, framer_cls: type
) -> None:
    async def body() -> None:
        h = Harness(PickyAgent(), framer_cls=framer_cls)
        await h.initialize()
        before = len(h.messages)
        h.send_raw(
            line({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
            + line({"jsonrpc": "2.0", "method": "_vendor/ping"})
            + line(req("next", "session/new", {"cwd": "/tmp", "mcpServers": []}))
        )
        ok = await h.response("next")
        assert "sessionId" in ok["result"], ok
        assert h.messages[before:] == [ok]
        await close_and_check(h)

    run(body())


def test_r24_every_error_in_one_chunk_is_answered_in_order(run: Any) -> None:
    async def body() -> None:
        h = Harness(PickyAgent())
        await h.initialize()
        sid = await h.new_session()
        before = len(h.messages)
        chunk = b"".join(p.values[0] for p in CASES).replace(SID.encode(), sid.encode())
        h.send_raw(chunk + line(req("last", "session/new", {"cwd": "/tmp", "mcpServers": []})))
        await h.response("last")
        got = [(m["id"], m["error"]["code"]) for m in h.messages[before:-1]]
        assert got == [(p.values[1], p.values[2]) for p in CASES]
        await close_and_check(h)

    run(body())
