"""What a WebSocket client does wrong is its fault: counted by reason, logged at INFO at a bounded rate.

Raw sockets send frames RFC 6455 forbids, some refused by picows' parser
(unmasked, a reserved opcode, an oversized ping), some by the peer (a reserved
bit, a text message that is not UTF-8). Nothing reaches the log at WARNING or
above, at most ``client_error_logs_per_min`` lines say what happened, and
``acp_client_errors_total`` counts every connection's fault. Waits are bounded
(``asyncio.wait_for``); nothing synchronizes on a clock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_fast.hosting import AcpHost
from acp_fast.transports.client_faults import ClientFaults
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host
from tests.test_metrics import http_get, samples, value
from tests.test_ws_hardening import BOUND_S, OP_CLOSE, OP_PING, OP_TEXT, raw_upgrade
from tests.ws_helpers import client_frame, read_frame

#: One bad frame per connection, and its reason label.
BAD_FRAMES = [
    (bytes([0x81, 0x01]) + b"x", "ws_protocol"),  # unmasked (picows)
    (client_frame(0x3, b"x"), "ws_protocol"),  # a reserved opcode (picows)
    (client_frame(OP_PING, b"x" * 126), "ws_protocol"),  # a control frame past 125 bytes (picows)
    (client_frame(OP_TEXT, b"{}", rsv=0x20), "ws_protocol"),  # a reserved bit (the peer)
    (client_frame(OP_TEXT, b"\xff\xfe"), "ws_invalid_text"),  # not UTF-8 (the peer)
]
PER_MIN = 3


async def _bad_connection(host: AcpHost, frame: bytes) -> int:
    """Send ``frame``, read up to the close frame (the fault is counted before it), send it again; its code."""
    reader, writer = await raw_upgrade(host)
    try:
        writer.write(frame)
        for _ in range(100):
            b0, payload = await asyncio.wait_for(read_frame(reader), BOUND_S)
            if b0 & 0x0F == OP_CLOSE:
                writer.write(frame)  # still the same client's fault: not counted or logged again
                return int.from_bytes(payload[:2], "big")
        raise AssertionError("no close frame")
    finally:
        writer.close()


def test_client_protocol_errors_are_counted_and_logged_at_info_within_the_rate(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rounds = 3
    codes: list[int] = []

    async def body(host: AcpHost) -> None:
        for _ in range(rounds):
            for frame, _reason in BAD_FRAMES:
                codes.append(await _bad_connection(host, frame))
        status, text = await http_get(host.port)
        assert status == 200
        found = samples(text)
        expected: dict[str, int] = {}
        for _frame, reason in BAD_FRAMES * rounds:
            expected[reason] = expected.get(reason, 0) + 1
        for reason, n in expected.items():
            assert value(found, "acp_client_errors_total", reason=reason) == n, (reason, found)

    run(with_host(body, limits=Limits(client_error_logs_per_min=PER_MIN), metrics=True))
    assert codes == [1002, 1002, 1002, 1002, 1007] * rounds
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [r.getMessage() for r in loud]
    lines = [r for r in caplog.records if r.name == "acp_fast.transports.client_faults"]
    assert len(lines) == PER_MIN, [r.getMessage() for r in lines]
    assert all(r.levelno == logging.INFO and "client error (ws_" in r.getMessage() for r in lines)


def test_client_fault_lines_resume_each_minute_and_say_how_many_were_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="acp_fast.transports.client_faults")
    now = [0.0]
    faults = ClientFaults(per_min=2, clock=lambda: now[0])
    for _ in range(5):
        faults.report("ws_protocol", "bad frame", "c1")
    now[0] = 60.0
    faults.report("ws_not_a_reason", "odd")
    assert faults.counts == {"ws_protocol": 5, "other": 1}
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "client error (ws_protocol) on connection c1: bad frame",
        "client error (ws_protocol) on connection c1: bad frame",
        "client error (other): odd (3 earlier one(s) not logged: over client_error_logs_per_min)",
    ]
