"""Shared parking proven on real processes: replicas behind HAProxy on one Redis, workers on SQLite.

* Two ``acp-fast serve --listen`` replicas behind HAProxy (cookie affinity)
  share one ``redis-server`` started here on loopback: a client runs a
  session on replica A, A is drained (SIGTERM) while the client is still
  connected, the client reconnects with its cookie, lands on B, and
  ``session/load`` replays the session there; a second prompt works.
* Two processes sharing a store race two ``session/load``s for one parked
  session: exactly one wins, the other is told the session is unknown.
* ``--workers 2`` with no ``--session-store`` parks in a SQLite file the
  supervisor made; kill -9 of the worker that parked a session leaves the
  session in the file, and whichever worker the kernel picks re-attaches it.

Skipped with a reason when haproxy, redis-server or the redis package is
missing (failed in CI, whose .ci/run installs them). Loops are bounded;
timeouts are hang guards only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from acp_fast.demo import DemoAgent
from acp_fast.hosting.store import REDIS_PREFIX, connect_sqlite
from tests.interop.test_ws_python_sdk_interop import ROOT, start_server, stop_server
from tests.store_helpers import free_port, need_tool, redis_server
from tests.test_hosting_haproxy import HAPROXY_CFG
from tests.ws_helpers import WsClient

pytestmark = pytest.mark.slow

INVALID_PARAMS = -32602


class PidDemo(DemoAgent):
    """The demo agent (its history replays on session/load), naming its process in agentInfo."""

    def __init__(self) -> None:
        super().__init__(pace_ms=0, unique_ids=True)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> dict[str, Any]:
        result = await super().initialize(protocol_version, **kwargs)
        result["agentInfo"] = {**result["agentInfo"], "name": f"pid-{os.getpid()}"}
        return result


TARGET = "tests.test_hosting_store_deploy:PidDemo"


def _load(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}


def _prompt(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


def _replayed(c: WsClient, sid: str) -> list[str]:
    return [u["content"]["text"] for u in c.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]


async def _open(url: str, cookie: str | None = None) -> tuple[WsClient, int, str | None]:
    """Connect and initialize: the client, the pid that answered, the affinity cookie (if one was set)."""
    c = await WsClient.open(url, additional_headers={"Cookie": cookie} if cookie else {})
    assert c.ws.response is not None
    set_cookie = c.ws.response.headers.get("Set-Cookie")
    init = await c.initialize()
    return c, int(init["agentInfo"]["name"].removeprefix("pid-")), set_cookie.split(";")[0] if set_cookie else None


def _wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def test_haproxy_replicas_on_one_redis_hand_a_session_over_at_a_drain(tmp_path: Path) -> None:
    haproxy = need_tool("haproxy", "apt-get install haproxy")
    with redis_server(tmp_path) as redis_port:
        a, b, front = free_port(), free_port(), free_port()
        store = ["--session-store", f"redis://127.0.0.1:{redis_port}/0"]
        replicas = [start_server(["serve", TARGET, "--listen", f"127.0.0.1:{p}", *store])[0] for p in (a, b)]
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(HAPROXY_CFG.format(front=front, a=a, b=b))
        lb = subprocess.Popen(
            [haproxy, "-db", "-f", str(cfg)], cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True
        )
        url = f"ws://127.0.0.1:{front}/acp"
        try:
            _wait_port(front)

            async def walk() -> None:
                first, pid, cookie = await _open(url)
                assert cookie is not None and cookie.startswith("ACPSERVER=")
                sid = await first.new_session()
                done = await first.request("session/prompt", _prompt(sid, "before the deploy"))
                assert done["result"]["stopReason"] == "end_turn"

                # Drain the replica holding the session while the client is connected: 1001, session parked.
                victim = next(p for p in replicas if p.pid == pid)
                victim.send_signal(signal.SIGTERM)
                await first.wait_for(lambda: first.close_code is not None)
                assert first.close_code == 1001
                assert await asyncio.to_thread(victim.wait, 30) == 0

                # Reconnect with the cookie: its server is gone, HAProxy redispatches to the other replica.
                for _ in range(200):
                    try:
                        again, pid2, _ = await _open(url, cookie)
                        break
                    except Exception:  # 503 while HAProxy still counts the drained replica
                        await asyncio.sleep(0.05)
                else:
                    raise AssertionError("no replica answered after the drain")
                assert pid2 != pid
                loaded = await again.request("session/load", _load(sid))
                assert "result" in loaded, loaded
                assert _replayed(again, sid) == ["before the deploy"]
                more = await again.request("session/prompt", _prompt(sid, "after the deploy"))
                assert more["result"]["stopReason"] == "end_turn"
                await again.close()

            asyncio.run(asyncio.wait_for(walk(), 120))
        finally:
            os.killpg(lb.pid, signal.SIGKILL)
            lb.wait()
            for proc in replicas:
                stop_server(proc)


def _parked_count(spec: str, redis_port: int | None) -> int:
    if redis_port is not None:
        import redis

        client = redis.Redis(port=redis_port)
        try:
            return len(list(client.scan_iter(match=REDIS_PREFIX + "*")))
        finally:
            client.close()
    db = connect_sqlite(spec.removeprefix("sqlite:"), 1.0)
    try:
        return int(db.execute("SELECT count(*) FROM parked").fetchone()[0])
    finally:
        db.close()


def _wait_parked(spec: str, redis_port: int | None, n: int) -> None:
    for _ in range(400):
        if _parked_count(spec, redis_port) == n:
            return
        time.sleep(0.025)
    raise AssertionError(f"the store never held {n} parked session(s): {_parked_count(spec, redis_port)}")


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
def test_two_processes_racing_to_load_one_parked_session_exactly_one_wins(tmp_path: Path, kind: str) -> None:
    rounds = 5

    def race(spec: str, redis_port: int | None) -> None:
        ports = free_port(), free_port()
        args = ["serve", TARGET, "--session-store", spec, "--listen"]
        procs = [start_server([*args, f"127.0.0.1:{p}"])[0] for p in ports]
        urls = [f"ws://127.0.0.1:{p}/acp" for p in ports]
        try:

            async def one_round(i: int) -> None:
                owner, _, _ = await _open(urls[i % 2])
                sid = await owner.new_session()
                assert "result" in await owner.request("session/prompt", _prompt(sid, f"round {i}"))
                await owner.close()
                await asyncio.to_thread(_wait_parked, spec, redis_port, 1)
                (c1, pid1, _), (c2, pid2, _) = await asyncio.gather(_open(urls[0]), _open(urls[1]))
                assert pid1 != pid2
                load = _load(sid)
                answers = await asyncio.gather(c1.request("session/load", load), c2.request("session/load", load))
                winners = [a for a in answers if "result" in a]
                losers = [a for a in answers if "error" in a]
                assert len(winners) == 1 and len(losers) == 1, answers
                assert losers[0]["error"]["code"] == INVALID_PARAMS
                winner = c1 if "result" in answers[0] else c2
                assert _replayed(winner, sid) == [f"round {i}"]
                await c1.close()
                await c2.close()
                await asyncio.to_thread(_wait_parked, spec, redis_port, 1)  # the winner's close parks it again
                await asyncio.to_thread(_clear, spec, redis_port)

            async def rounds_all() -> None:
                for i in range(rounds):
                    await one_round(i)

            asyncio.run(asyncio.wait_for(rounds_all(), 120))
        finally:
            for proc in procs:
                stop_server(proc)

    if kind == "redis":
        with redis_server(tmp_path) as port:
            race(f"redis://127.0.0.1:{port}/0", port)
    else:
        race(f"sqlite:{tmp_path / 'sessions.sqlite3'}", None)


def _clear(spec: str, redis_port: int | None) -> None:
    if redis_port is not None:
        import redis

        client = redis.Redis(port=redis_port)
        try:
            client.flushdb()
        finally:
            client.close()
        return
    db = connect_sqlite(spec.removeprefix("sqlite:"), 1.0)
    try:
        db.execute("DELETE FROM parked")
    finally:
        db.close()


def _children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _store_file(pid: int) -> Path:
    """The SQLite file a worker has open (the supervisor's temporary one)."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = Path(os.readlink(fd))
            if target.name == "sessions.sqlite3" and target.parent.name.startswith("acp-fast-sessions-"):
                return target
    raise AssertionError(f"worker {pid} has no session store open")


def test_workers_park_in_a_sqlite_file_by_default_and_a_killed_workers_sessions_survive() -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}/acp"
    proc, _ = start_server(["serve", TARGET, "--listen", f"127.0.0.1:{port}", "--workers", "2"])
    try:
        for _ in range(600):
            if len(_children(proc.pid)) == 2:
                break
            time.sleep(0.05)
        files: list[Path] = []

        async def walk() -> None:
            c1, holder, _ = await _open(url)
            sid = await c1.new_session()
            assert "result" in await c1.request("session/prompt", _prompt(sid, "parked in the file"))
            await c1.close()
            for _ in range(400):  # the worker opens the file when it parks its first session
                with contextlib.suppress(AssertionError):
                    files.append(_store_file(holder))
                    break
                await asyncio.sleep(0.025)
            spec = f"sqlite:{_store_file(holder)}"
            await asyncio.to_thread(_wait_parked, spec, None, 1)
            os.kill(holder, signal.SIGKILL)  # the worker that parked it dies without a word
            for _ in range(600):
                kids = _children(proc.pid)
                if len(kids) == 2 and holder not in kids:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the killed worker was not replaced")
            c2, pid2, _ = await _open(url)
            assert pid2 != holder
            loaded = await c2.request("session/load", _load(sid))
            assert "result" in loaded, loaded
            assert _replayed(c2, sid) == ["parked in the file"]
            more = await c2.request("session/prompt", _prompt(sid, "and on"))
            assert more["result"]["stopReason"] == "end_turn"
            await c2.close()

        asyncio.run(asyncio.wait_for(walk(), 120))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not files[0].parent.exists()  # the supervisor removed its directory
    finally:
        stop_server(proc)
