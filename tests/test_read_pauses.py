"""peer/flow.py: the reasons a socket is not read, and the transport told on the edges only."""

from __future__ import annotations

from acp_fast.peer.flow import Pause, ReadControl, ReadPauses


def _pauses() -> tuple[ReadPauses, list[bool], list[str]]:
    edges: list[bool] = []
    closed: list[str] = []
    return ReadPauses(edges.append, lambda: closed.append("closed")), edges, closed


def test_reading_resumes_only_when_no_reason_holds_it() -> None:
    p, edges, _ = _pauses()
    p.hold(Pause.OUTPUT)
    p.pause_reading()  # the Connection's inbox: another reason, no second edge
    p.hold(Pause.OUTPUT)  # the same reason twice counts once
    assert edges == [True] and p.paused and p.reasons == Pause.OUTPUT | Pause.INBOX
    p.release(Pause.OUTPUT)
    assert edges == [True] and p.paused  # the inbox still holds it
    p.resume_reading()
    assert edges == [True, False] and not p.paused
    p.release(Pause.DRAIN)  # releasing what was never held changes nothing
    p.resume_reading()
    assert edges == [True, False]


def test_set_and_close_and_it_is_the_connections_read_control() -> None:
    p, edges, closed = _pauses()
    p.set(Pause.HELD, True)
    p.set(Pause.DRAIN, True)
    p.set(Pause.HELD, False)
    p.set(Pause.DRAIN, False)
    assert edges == [True, False]
    control: ReadControl = p
    control.close()
    assert closed == ["closed"]


def test_an_edge_handler_that_pauses_again_is_seen_once() -> None:
    """A release whose edge feeds input that fills the inbox again: one more edge, no recursion."""
    edges: list[bool] = []

    def on_edge(paused: bool) -> None:
        edges.append(paused)
        if not paused and len(edges) < 4:
            p.pause_reading()

    p = ReadPauses(on_edge, lambda: None)
    p.pause_reading()
    p.resume_reading()
    assert edges == [True, False, True] and p.paused
