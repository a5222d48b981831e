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


# -- resumable streams (sse_replay) ------------------------------------------------------------------


def _events(data: bytes) -> list[tuple[int | None, Any]]:
    """(id or None, message) per event of an SSE body."""
    out: list[tuple[int | None, Any]] = []
    for block in data.split(b"\n\n"):
        eid, message = None, None
        for line in block.split(b"\n"):
            if line.startswith(b"id: "):
                eid = int(line[4:])
            elif line.startswith(b"data: "):
                message = json.loads(line[6:])
        if message is not None:
            out.append((eid, message))
    return out


def _update(n: int) -> bytes:
    return _line({"method": "session/update", "params": {"sessionId": "s", "n": n}})


def test_replay_off_sends_no_ids_and_keeps_no_ring() -> None:
    r = _router()
    sink = Sink()
    r.attach("s", sink)
    r.write(_update(1))
    assert sink.data == b'data: {"method": "session/update", "params": {"sessionId": "s", "n": 1}}\n\n'
    assert not r.streams["s"].ring
    r.detach("s", sink)
    assert "s" not in r.streams  # an empty session stream is forgotten, as before


def test_replay_numbers_events_per_stream_and_resumes_after_the_last_event_id() -> None:
    r = _router(replay=8, replay_bytes=1 << 20)
    first = Sink()
    r.attach("s", first)
    r.write(_update(1) + _update(2) + _update(3))
    r.write(_line({"method": "_ext/notice", "params": {}}))  # the connection stream counts on its own
    assert [eid for eid, _ in _events(first.data)] == [1, 2, 3]
    r.detach("s", first)  # the socket broke after the client had read up to id 1; 2 and 3 were lost in it
    r.write(_update(4))  # queued while nobody reads
    assert "s" in r.streams  # the ring outlives the reader
    second = Sink()
    assert r.attach("s", second, last_event_id=1) is None
    r.write(_update(5))
    got = _events(second.data)
    assert [(eid, m["params"]["n"]) for eid, m in got] == [(2, 2), (3, 3), (4, 4), (5, 5)]  # no gap, no repeat
    assert r.streams["s"].queued == 0
    conn = Sink()
    r.attach(CONNECTION_STREAM, conn, last_event_id=0)
    assert [eid for eid, _ in _events(conn.data)] == [1]


def test_resuming_at_the_newest_id_replays_nothing_and_a_fresh_reader_gets_only_the_queue() -> None:
    r = _router(replay=8, replay_bytes=1 << 20)
    r.write(_update(1) + _update(2))
    current = Sink()
    r.attach("s", current, last_event_id=2)
    assert current.data == b""
    r.detach("s", current)
    r.write(_update(3))
    fresh = Sink()
    r.attach("s", fresh)  # no Last-Event-ID: what waited, as without replay
    assert [eid for eid, _ in _events(fresh.data)] == [3]


def test_an_id_that_fell_out_of_the_ring_gets_a_gap_notification_then_what_is_held() -> None:
    r = _router(replay=2, replay_bytes=1 << 20)
    r.write(b"".join(_update(n) for n in range(1, 6)))
    assert [seq for seq, _ in r.streams["s"].ring] == [4, 5]  # bounded by count
    sink = Sink()
    r.attach("s", sink, last_event_id=1)
    got = _events(sink.data)
    assert got[0] == (
        None,
        {
            "jsonrpc": "2.0",
            "method": "_acp_fast/stream_gap",
            "params": {"lastEventId": "1", "oldestEventId": "4", "reason": "evicted"},
        },
    )
    assert [eid for eid, _ in got[1:]] == [4, 5]


def test_an_id_never_sent_gets_a_gap_notification_with_reason_unknown() -> None:
    r = _router(replay=4, replay_bytes=1 << 20)
    r.write(_update(1))
    sink = Sink()
    r.attach("s", sink, last_event_id=7)  # e.g. a stream of another process
    got = _events(sink.data)
    assert got[0][1]["params"] == {"lastEventId": "7", "oldestEventId": "1", "reason": "unknown"}
    assert [eid for eid, _ in got[1:]] == [1]


def test_the_ring_is_bounded_in_bytes_and_an_event_larger_than_it_is_a_gap() -> None:
    r = _router(replay=100, replay_bytes=400)
    for n in range(1, 21):
        r.write(_update(n))
    stream = r.streams["s"]
    assert 0 < stream.ring_bytes <= 400
    assert stream.ring_bytes == sum(len(e) for _, e in stream.ring)
    r.write(_line({"method": "session/update", "params": {"sessionId": "s", "big": "x" * 1000}}))
    assert not stream.ring and stream.ring_bytes == 0 and stream.seq == 21
    sink = Sink()
    r.attach("s", sink, last_event_id=20)
    assert _events(sink.data)[0][1]["params"] == {"lastEventId": "20", "oldestEventId": None, "reason": "evicted"}
    r.close()
    assert not stream.ring and stream.ring_bytes == 0
