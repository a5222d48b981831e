"""The WebSocket write side: each queued message leaves as its own text frame, a loop turn's frames in one write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("picows")

from acp_fast.peer.writer import Writer
from acp_fast.transports.ws import frame_text
from acp_fast.wire.limits import Limits


class Recorder(asyncio.WriteTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


def parse_server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(first byte, payload) of each unmasked frame in ``data``; fails on a truncated or masked frame."""
    frames, i = [], 0
    while i < len(data):
        first, second = data[i], data[i + 1]
        assert not second & 0x80, "server frames are never masked"
        size, i = second & 0x7F, i + 2
        if size == 126:
            size, i = int.from_bytes(data[i : i + 2], "big"), i + 2
        elif size == 127:
            size, i = int.from_bytes(data[i : i + 8], "big"), i + 8
        assert i + size <= len(data), "truncated frame"
        frames.append((first, data[i : i + size]))
        i += size
    return frames


def message(size: int) -> bytes:
    """A JSON string of exactly ``size`` bytes, newline-terminated as the encoder writes it."""
    return b'"' + b"x" * (size - 2) + b'"\n'


def test_every_message_is_one_text_frame_at_each_header_size_boundary(run: Any) -> None:
    run(_boundaries())


async def _boundaries() -> None:
    writer = Writer(asyncio.get_running_loop(), Limits(), frame_text)
    out = Recorder()
    writer.attach(out)
    sizes = [2, 125, 126, 127, 65535, 65536, 70000, 3]
    for size in sizes:
        writer.write(message(size))
    writer.flush()
    frames = parse_server_frames(b"".join(out.writes))
    assert [len(p) for _, p in frames] == sizes
    assert all(first == 0x81 for first, _ in frames)  # FIN, no RSV bits, text
    assert [p for _, p in frames] == [message(s)[:-1] for s in sizes]


def test_the_messages_of_one_loop_turn_leave_in_one_write(run: Any) -> None:
    run(_one_turn())


async def _one_turn() -> None:
    writer = Writer(asyncio.get_running_loop(), Limits(), frame_text)
    out = Recorder()
    writer.attach(out)
    for i in range(5):
        writer.write(b'{"n":%d}\n' % i)
    assert out.writes == []
    await asyncio.sleep(0)  # the flush scheduled for the end of the turn
    assert len(out.writes) == 1
    assert [p for _, p in parse_server_frames(out.writes[0])] == [b'{"n":%d}' % i for i in range(5)]


def test_a_message_without_the_encoders_newline_is_framed_whole(run: Any) -> None:
    run(_no_newline())


async def _no_newline() -> None:
    writer = Writer(asyncio.get_running_loop(), Limits(), frame_text)
    out = Recorder()
    writer.attach(out)
    writer.write(b'{"a":1}')
    writer.flush()
    assert parse_server_frames(out.writes[0]) == [(0x81, b'{"a":1}')]
