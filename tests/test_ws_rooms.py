"""The WebSocket transport's rooms: every public name still imports from ``transports/ws.py``, and the
first-message gate's verdicts without a socket."""

from __future__ import annotations

import importlib

import pytest

pytest.importorskip("picows")

from acp_fast.transports import ws
from acp_fast.transports.ws_first_message import FirstMessageGate

#: Every public name ws.py defined before its concerns went to their own modules, with its home now.
HOMES = {
    "CLOSE_NORMAL": "ws_frames",
    "CLOSE_GOING_AWAY": "ws_frames",
    "CLOSE_PROTOCOL_ERROR": "ws_frames",
    "CLOSE_POLICY": "ws_frames",
    "CLOSE_INVALID_TEXT": "ws_frames",
    "CLOSE_TOO_BIG": "ws_frames",
    "CLOSE_INTERNAL": "ws_frames",
    "valid_utf8": "ws_frames",
    "text_frame_header": "ws_frames",
    "frame_text": "ws_frames",
    "DeflateFraming": "ws_frames",
    "FrameWriteTransport": "ws_output",
    "release_pages": "ws_memory",
    "WsPeer": "ws",
}


@pytest.mark.parametrize(("name", "home"), sorted(HOMES.items()))
def test_every_public_name_still_imports_from_ws(name: str, home: str) -> None:
    module = importlib.import_module(f"acp_fast.transports.{home}")
    assert getattr(ws, name) is getattr(module, name)
    assert name in ws.__all__


def test_ws_exports_nothing_else() -> None:
    assert sorted(ws.__all__) == sorted(HOMES)


@pytest.mark.parametrize(
    ("payload", "verdict"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}', True),
        (b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}', False),
        (b'{"jsonrpc":"2.0","method":"initialize","params":{}}', False),  # a notification is not the request
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', False),
        (b"not json", None),  # the Connection answers -32700; the gate still waits
        (b'{"jsonrpc":"2.0","id":1}', None),  # -32600; still waiting
    ],
)
def test_the_first_message_gate_admits_only_its_method_and_waits_past_non_messages(
    payload: bytes, verdict: bool | None
) -> None:
    assert FirstMessageGate("initialize").admits(payload) is verdict
