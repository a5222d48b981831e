"""``acp-fast top``: the frame computed from two real scrapes, ``--once``, and a clean exit on Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from acp_fast.hosting import AcpHost
from acp_fast.tools.top import frame, quantile, scrape
from tests.host_helpers import with_host
from tests.ws_helpers import WsClient


def test_quantile_interpolates_inside_the_bucket() -> None:
    before = [(0.1, 0.0), (1.0, 0.0), (float("inf"), 0.0)]
    now = [(0.1, 10.0), (1.0, 20.0), (float("inf"), 20.0)]
    assert quantile(0.5, now, before) == pytest.approx(0.1)
    assert quantile(0.75, now, before) == pytest.approx(0.55)
    assert quantile(0.5, before, before) is None  # nothing observed in the interval


def test_frame_from_two_scrapes(run: Any) -> None:
    frames: list[str] = []

    async def body(host: AcpHost) -> None:
        url = f"http://127.0.0.1:{host.port}/metrics"
        c = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp")
        await c.initialize()
        sid = await c.new_session()
        before = await asyncio.to_thread(scrape, url)
        for _ in range(5):
            await c.request("session/set_mode", {"sessionId": sid, "modeId": "code"})
        long_id = await c.request_nowait(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream 100000 5"}]}
        )
        await c.wait_for(lambda: c.updates(sid))
        await c.notify("session/cancel", {"sessionId": sid})
        await c.response(long_id)
        now = await asyncio.to_thread(scrape, url)
        frames.append(frame(url, now, before))
        await c.close()

    run(with_host(body, metrics=True))
    (text,) = frames
    assert "connections  websocket 1  http 0" in text
    assert "sessions  attached 1" in text
    set_mode = next(line for line in text.splitlines() if line.startswith("session/set_mode"))
    assert (set_mode.split()[1] == "control" and "µs" in set_mode) or "ms" in set_mode
    prompt = next(line for line in text.splitlines() if line.startswith("session/prompt"))
    assert prompt.split()[1] == "background"
    assert "(1 in interval)" in text  # the cancel


def test_once_and_ctrl_c(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        url = f"127.0.0.1:{host.port}"
        cmd = [sys.executable, "-m", "acp_fast", "top", url, "--interval", "0.2"]
        once = await asyncio.create_subprocess_exec(*cmd, "--once", stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(once.communicate(), 60)
        assert once.returncode == 0
        assert out.startswith(b"acp-fast top  http://127.0.0.1:") and b"requests/s" in out
        pipe = asyncio.subprocess.PIPE
        live = await asyncio.create_subprocess_exec(*cmd, stdout=pipe, stderr=pipe)
        assert live.stdout is not None
        first = await asyncio.wait_for(live.stdout.readuntil(b"cancel latency"), 60)  # a frame was drawn
        assert b"\x1b[2J" in first
        live.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(live.communicate(), 60)
        assert live.returncode == 0 and b"Traceback" not in err, err

    run(with_host(body, metrics=True))
