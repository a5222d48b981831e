"""Output with its route: Streamable HTTP sorts lines by what their sender knew, never by parsing them back.

Two checks. Sans-IO, a hypothesis differential: any sequence of accepted
POSTs and outgoing lines lands on the same streams, in the same order, with
the same initialize answer, whether each line comes with its route
(``RoutedWriter``) or is parsed (``StreamRouter._route``). Over a real socket:
a whole Streamable HTTP walk (initialize, sessions, streamed updates, an agent
request answered by the client, a cancel, bad input answered with errors)
never falls back to parsing a line.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_fast.transports.routing import CONNECTION_STREAM, StreamRouter
from acp_fast.wire.routes import ANSWER, ERROR, NOTIFICATION, REQUEST, Route
from tests.host_helpers import with_host
from tests.http_helpers import HttpAcpClient
from tests.test_hosting_http import LONG, _allow
from tests.test_stream_router import Sink

SESSIONS = ["s1", "s2"]
ids = st.one_of(st.integers(0, 5), st.sampled_from(["0", "1", "a"]))
sessions = st.one_of(st.none(), st.sampled_from(SESSIONS))


def _accepted() -> Any:
    """A POSTed request (its answer's stream is remembered) or an answer to an agent request."""
    request = st.builds(
        lambda rid, method, session: ("request", rid, method, session),
        ids,
        st.sampled_from(["initialize", "session/new", "session/prompt", "session/load"]),
        sessions,
    )
    answer = st.builds(lambda rid: ("answer", rid, None, None), st.integers(1, 5))
    return st.one_of(request, answer)


def _outgoing() -> Any:
    """A line the agent side writes, with its route."""
    return st.one_of(
        st.builds(lambda rid: (ANSWER, rid, None), ids),
        st.builds(lambda rid: (ERROR, rid, None), st.one_of(ids, st.none())),
        st.builds(lambda rid, s: (REQUEST, rid, s), st.integers(1, 5), sessions),
        st.builds(lambda s: (NOTIFICATION, None, s), sessions),
    )


def _line(route: Route) -> bytes:
    kind, rid, session = route
    params = {"sessionId": session} if session is not None else {}
    if kind == ANSWER:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": {}}
    elif kind == ERROR:
        message = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "x"}}
    elif kind == REQUEST:
        message = {"jsonrpc": "2.0", "id": rid, "method": "fs/read_text_file", "params": params}
    else:
        message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return json.dumps(message).encode() + b"\n"


def _run(steps: list[Any], routed: bool) -> tuple[dict[Any, bytes], bytes | None, bool]:
    r = StreamRouter(max_streams=8, max_buffered=1 << 30, max_routes=64)
    sinks = {key: Sink() for key in [CONNECTION_STREAM, *SESSIONS]}
    for key, sink in sinks.items():
        r.attach(key, sink)
    for step in steps:
        if step[0] == "request":
            _, rid, method, session = step
            message = {"id": rid, "method": method, "params": {"sessionId": session} if session else {}}
            r.accepted(message, session)
        elif step[0] == "answer":
            r.accepted({"id": step[1], "result": {}}, None)
        else:
            batch: list[Route] = step[1]
            data = b"".join(_line(route) for route in batch)
            routes: deque[Route | None] = deque(batch)
            r.write(data, routes if routed else None)
            assert not routed or not routes  # one route taken per line
    return {k: s.data for k, s in sinks.items()}, r.initial, r.initial_ok


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_accepted(), st.tuples(st.just("write"), st.lists(_outgoing(), min_size=1, max_size=4)))))
def test_lines_with_their_route_land_where_parsing_them_would_put_them(steps: list[Any]) -> None:
    assert _run(steps, routed=True) == _run(steps, routed=False)


@pytest.mark.parametrize("metrics", [False, True], ids=["plain", "metrics-on"])
def test_a_hosted_streamable_http_walk_never_parses_an_outgoing_line(
    run: Any, monkeypatch: pytest.MonkeyPatch, metrics: bool
) -> None:
    """Also with metrics on, whose timed requests write their answers themselves."""
    parsed: list[bytes] = []
    real = StreamRouter._route

    def spy(self: StreamRouter, line: bytes) -> Any:
        parsed.append(line)
        return real(self, line)

    monkeypatch.setattr(StreamRouter, "_route", spy)

    async def body(host: Any) -> None:
        c = HttpAcpClient(host.port)
        c.auto_answer = _allow
        await c.initialize()
        sid = await c.new_session()
        pid = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}, sid
        )
        await c.wait_for(lambda: len(c.updates(sid)) >= 3)
        await c.notify("session/cancel", {"sessionId": sid}, sid)
        _, answer = await c.wait_for(lambda: c.find(pid))
        assert answer["result"] == {"stopReason": "cancelled"}
        tool = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tool"}]}, sid)
        assert tool["result"] == {"stopReason": "end_turn"}
        assert any(m.get("method") == "session/request_permission" for _, m in c.messages)  # an agent request
        bad = await c.request("session/set_mode", {"sessionId": sid, "modeId": "no-such-mode"}, sid)
        assert bad["error"]["code"] == -32602  # an error answer
        unknown = await c.request("no/such_method", {})
        assert unknown["error"]["code"] == -32601
        assert (await c.delete()).status == 202
        c.close()

    run(with_host(body, metrics=metrics))
    assert parsed == []
