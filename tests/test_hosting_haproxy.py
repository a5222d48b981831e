"""Two replicas behind HAProxy, as the Kubernetes manifests in deploy/ rely on.

HAProxy (the Debian package; .ci/run installs it) listens on 127.0.0.1 in
front of two ``acp-fast serve ... --listen`` processes, with cookie-insert
stickiness, WebSocket upgrade and a ``/readyz`` health check. A client that
reconnects with its cookie lands on the same replica and ``session/load``
resumes its session there; after one replica drains (SIGTERM), new
connections go to the other. Loops are bounded; timeouts are hang guards.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from acp_fast.agent.base import Agent
from tests.interop.test_ws_python_sdk_interop import ROOT, start_server, stop_server
from tests.ws_helpers import WsClient

pytestmark = pytest.mark.slow


class ResumableAgent(Agent):
    """Keeps sessions in a store shared by every instance of the process, so a new connection can load them."""

    store: ClassVar[dict[str, list[str]]] = {}

    async def initialize(self, protocol_version: int, **kwargs: Any) -> dict[str, Any]:
        return {
            "agentInfo": {"name": f"replica-{os.getpid()}", "version": "0"},
            "agentCapabilities": {"loadSession": True},
        }

    async def new_session(self, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> dict[str, Any]:
        sid = f"s{len(self.store) + 1}-{os.getpid()}"
        self.store[sid] = []
        return {"sessionId": sid}

    async def load_session(self, session_id: str, cwd: str, mcp_servers: list[Any], **kwargs: Any) -> None:
        for text in self.store[session_id]:  # KeyError -> an error answer: not this replica's session
            await self.client.agent_message_chunk(session_id, text)

    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> None:
        text = str(prompt[0].get("text", ""))
        self.store[session_id].append(text)
        await self.client.agent_message_chunk(session_id, text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


HAPROXY_CFG = """
global
    maxconn 1000
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout tunnel 1h
    option redispatch
frontend acp
    bind 127.0.0.1:{front}
    default_backend replicas
backend replicas
    balance roundrobin
    cookie ACPSERVER insert indirect nocache
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    default-server inter 100ms fall 1 rise 1
    server r1 127.0.0.1:{a} check cookie r1
    server r2 127.0.0.1:{b} check cookie r2
"""


def _haproxy() -> str:
    """The haproxy binary; a skip without it (a failure in CI, which installs it)."""
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail("haproxy is not installed (.ci/run installs it)")
        pytest.skip("haproxy is not installed (apt-get install haproxy)")
    return haproxy


def _wait_listening(port: int) -> None:
    for _ in range(200):  # until HAProxy listens
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)


async def _open(url: str, cookie: str | None = None) -> tuple[WsClient, str, str | None]:
    """Connect and initialize; returns the client, the replica it reached and the affinity cookie set."""
    headers = {"Cookie": cookie} if cookie else {}
    c = await WsClient.open(url, additional_headers=headers)
    assert c.ws.response is not None
    set_cookie = c.ws.response.headers.get("Set-Cookie")
    init = await c.initialize()
    return c, init["agentInfo"]["name"], set_cookie.split(";")[0] if set_cookie else None


def test_haproxy_cookie_affinity_resumes_the_session_and_drain_moves_new_connections(tmp_path: Path) -> None:
    haproxy = _haproxy()
    a, b, front = _free_port(), _free_port(), _free_port()
    target = "tests.test_hosting_haproxy:ResumableAgent"
    replicas = [start_server(["serve", target, "--listen", f"127.0.0.1:{port}"])[0] for port in (a, b)]
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(HAPROXY_CFG.format(front=front, a=a, b=b))
    lb = subprocess.Popen(
        [haproxy, "-db", "-f", str(cfg)], cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True
    )
    url = f"ws://127.0.0.1:{front}/acp"
    try:
        _wait_listening(front)

        async def walk() -> None:
            first, replica, cookie = await _open(url)
            assert cookie is not None and cookie.startswith("ACPSERVER=")
            sid = await first.new_session()
            done = await first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
            assert "result" in done, done
            await first.close()

            # Reconnect with the cookie: the same replica, and session/load replays the session there.
            again, replica2, _ = await _open(url, cookie)
            assert replica2 == replica
            loaded = await again.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
            assert "result" in loaded, loaded
            assert [u["content"]["text"] for u in again.updates(sid)] == ["hi"]
            await again.close()

            # Drain that replica; new connections, even with its cookie, reach the other one.
            victim = replicas[0] if replica == f"replica-{replicas[0].pid}" else replicas[1]
            assert replica == f"replica-{victim.pid}"
            victim.send_signal(signal.SIGTERM)
            for _ in range(200):  # HAProxy's check sees /readyz 503 (or the port closed) within a few checks
                try:
                    c, where, _ = await _open(url, cookie)
                except Exception:  # 503 from HAProxy while it has no replica marked up
                    await asyncio.sleep(0.05)
                    continue
                await c.close()
                if where != replica:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("new connections kept reaching the drained replica")
            assert victim.wait(timeout=30) == 0

        asyncio.run(asyncio.wait_for(walk(), 120))
    finally:
        os.killpg(lb.pid, signal.SIGKILL)
        lb.wait()
        for proc in replicas:
            stop_server(proc)


CLIENT_ADDRESS_CFG = """
global
    maxconn 1000
defaults
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout tunnel 1h
frontend http_mode
    mode http
    bind 127.0.0.1:{http_front}
    option forwardfor
    default_backend forwarded_for
backend forwarded_for
    mode http
    server r 127.0.0.1:{xff}
frontend tcp_mode
    mode tcp
    bind 127.0.0.1:{tcp_front}
    default_backend proxy_protocol
backend proxy_protocol
    mode tcp
    server r 127.0.0.1:{pp} send-proxy-v2
"""


def test_haproxy_http_and_tcp_mode_the_per_client_cap_counts_each_client(tmp_path: Path) -> None:
    """HAProxy in HTTP mode (``option forwardfor``) and in TCP mode (``send-proxy-v2``) in front of a replica that
    trusts it: clients from 127.0.0.2, .3 and .4 each get their own two connections (the cap), the third of one
    client is refused 503 while the others are served, and the access log names each client, not HAProxy."""
    haproxy = _haproxy()
    xff, pp, http_front, tcp_front = _free_port(), _free_port(), _free_port(), _free_port()
    common = ["serve", "tests.test_hosting_haproxy:ResumableAgent", "--forwarded-allow-ips", "127.0.0.1",
              "--max-connections-per-principal", "2", "--access-log", "json"]  # fmt: skip
    replicas = [
        start_server([*common, "--listen", f"127.0.0.1:{xff}"]),
        start_server([*common, "--listen", f"127.0.0.1:{pp}", "--proxy-protocol"]),
    ]
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(CLIENT_ADDRESS_CFG.format(http_front=http_front, tcp_front=tcp_front, xff=xff, pp=pp))
    lb = subprocess.Popen(
        [haproxy, "-db", "-f", str(cfg)], cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        _wait_listening(http_front)
        _wait_listening(tcp_front)

        async def status(url: str, source: str) -> tuple[int, WsClient | None]:
            try:
                c = await WsClient.open(url, local_addr=(source, 0))
            except Exception as exc:  # websockets' InvalidStatus
                return exc.response.status_code, None  # type: ignore[attr-defined]
            await c.initialize()
            return 101, c

        async def walk(url: str) -> list[tuple[str, int]]:
            seen: list[tuple[str, int]] = []
            held: list[WsClient] = []
            for source, tries in (("127.0.0.2", 3), ("127.0.0.3", 3), ("127.0.0.4", 1)):
                for _ in range(tries):
                    code, c = await status(url, source)
                    seen.append((source, code))
                    if c is not None:
                        held.append(c)
            for c in held:
                await c.close()
            return seen

        want = [("127.0.0.2", 101), ("127.0.0.2", 101), ("127.0.0.2", 503),
                ("127.0.0.3", 101), ("127.0.0.3", 101), ("127.0.0.3", 503), ("127.0.0.4", 101)]  # fmt: skip
        for front in (http_front, tcp_front):
            assert asyncio.run(asyncio.wait_for(walk(f"ws://127.0.0.1:{front}/acp"), 60)) == want, front
        for _proc, lines in replicas:
            for _ in range(200):  # the stderr reader thread catches up with the refusals' lines
                refused = [json.loads(x)["remote"] for x in list(lines) if b'"status": 503' in x]
                if len(refused) == 2:
                    break
                time.sleep(0.05)
            assert refused == ["127.0.0.2", "127.0.0.3"]
    finally:
        os.killpg(lb.pid, signal.SIGKILL)
        lb.wait()
        for proc, _lines in replicas:
            stop_server(proc)
