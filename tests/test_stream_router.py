"""The Streamable HTTP router, sans-IO: which stream each outgoing line goes to, and its bounds."""

from __future__ import annotations

import json
from typing import Any

from acp_fast.transports.routing import CONNECTION_STREAM, StreamRouter


class Sink:
    def __init__(self) -> None:
        self.data = b""
        self.buffered = 0

    def send(self, data: bytes) -> None:
        self.data += data

    def messages(self) -> list[Any]:
        return [json.loads(e[len(b"data: ") :]) for e in self.data.split(b"\n\n") if e.startswith(b"data: ")]


def _router(**kw: Any) -> StreamRouter:
    return StreamRouter(**{"max_streams": 8, "max_buffered": 1 << 20, "max_routes": 64, **kw})


def _line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_answers_follow_their_request_and_session_messages_their_session() -> None:
    r = _router()
    r.accepted({"id": 0, "method": "initialize"}, None)
    r.accepted({"id": 1, "method": "session/new"}, None)
    r.accepted({"id": 2, "method": "session/prompt", "params": {"sessionId": "s"}}, "s")
    r.accepted({"id": 3, "method": "session/load", "params": {"sessionId": "s"}}, "s")
    conn, sess = Sink(), Sink()
    assert r.attach(CONNECTION_STREAM, conn) is None
    r.write(
        _line({"id": 0, "result": {}})
        + _line({"id": 1, "result": {"sessionId": "s"}})
        + _line({"method": "session/update", "params": {"sessionId": "s"}})
        + _line({"id": 9, "method": "session/request_permission", "params": {"sessionId": "s"}})
        + _line({"id": 2, "result": {"stopReason": "end_turn"}})
        + _line({"id": 3, "result": {}})
        + _line({"method": "_ext/notice", "params": {}})
    )
    assert r.initial == b'{"id": 0, "result": {}}'  # the initialize answer is the POST's own body
    assert [m.get("id") for m in conn.messages()] == [1, 3, None]  # session/load's answer: connection stream
    assert r.streams["s"].queued > 0  # no reader yet: held
    assert r.attach("s", sess) is None
    assert [m.get("id", m.get("method")) for m in sess.messages()] == ["session/update", 9, 2]
    assert r.attach("s", Sink()) == "this stream already has a reader"


def test_session_headers_are_checked_for_messages_and_for_answers_to_session_requests() -> None:
    r = _router()
    prompt = {"id": 5, "method": "session/prompt", "params": {"sessionId": "s"}}
    assert r.check(prompt, None) == "Missing Acp-Session-Id"
    assert r.check(prompt, "t") == "Mismatched Acp-Session-Id"
    assert r.check(prompt, "s") is None
    r.write(_line({"id": 9, "method": "session/request_permission", "params": {"sessionId": "s"}}))
    assert r.check({"id": 9, "result": {}}, None) == "Missing Acp-Session-Id"
    assert r.check({"id": 9, "result": {}}, "s") is None
    r.accepted({"id": 9, "result": {}}, "s")
    assert r.check({"id": 9, "result": {}}, None) is None  # answered: no longer tracked
    assert r.check({"id": "9", "method": "session/list"}, None) is None


def test_a_stream_past_max_buffered_is_reported_and_streams_are_bounded() -> None:
    r = _router(max_buffered=150, max_streams=2)
    assert r.write(_line({"method": "session/update", "params": {"sessionId": "a", "x": "y" * 40}})) is False
    assert r.write(_line({"method": "session/update", "params": {"sessionId": "a", "x": "y" * 40}})) is True
    assert r.refusal("b") == "too many streams on this connection"  # connection stream + "a"
    assert r.write(_line({"method": "session/update", "params": {"sessionId": "b"}})) is True


def test_a_reader_leaving_keeps_what_waits_and_forgets_an_empty_session_stream() -> None:
    r = _router()
    sink = Sink()
    r.attach("s", sink)
    r.detach("s", sink)
    assert "s" not in r.streams
    r.write(_line({"method": "session/update", "params": {"sessionId": "s"}}))
    assert r.buffered > 0
    later = Sink()
    r.attach("s", later)
    assert len(later.messages()) == 1 and r.buffered == 0


def test_route_tables_stay_bounded_when_answers_never_come() -> None:
    r = _router(max_routes=4)
    for i in range(100):
        r.accepted({"id": i, "method": "session/prompt", "params": {"sessionId": "s"}}, "s")
        r.write(_line({"id": 1000 + i, "method": "session/request_permission", "params": {"sessionId": "s"}}))
    assert len(r._answer_to) <= 4 and len(r._client_answers) <= 4
