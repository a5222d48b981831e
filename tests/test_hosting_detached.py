"""Hosted sessions outlive a dropped socket for ``detached_session_timeout_s``.

The socket's close is still EOF for its connection (R13-R15: the running
prompt is cancelled and every slot released); only the idle sessions are
parked, counted against ``max_sessions_total``, and re-attached by
``session/load`` or ``session/resume`` on a later connection of the same
principal. Waits are on host counters, bounded; the one expiry test waits for
a real timer, by polling its outcome (never asserting a duration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from acp_fast.agent.base import Agent
from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host
from tests.ws_helpers import WsClient

LONG = "stream 100000 5"  # only a cancel or the socket's end stops it
INVALID_PARAMS = -32602
SERVER_BUSY = -32000


def _url(host: AcpHost) -> str:
    return f"ws://127.0.0.1:{host.port}/acp"


async def _with_host(
    body: Callable[[AcpHost], Awaitable[Any]],
    factory: Callable[[], Agent] = lambda: DemoAgent(pace_ms=0, unique_ids=True),
    **kwargs: Any,
) -> AcpHost:
    return await with_host(body, factory, **kwargs)


async def _until(host: AcpHost, **want: int) -> None:
    """Wait (bounded, by loop turns then short sleeps) until the host's counts match ``want``."""
    for i in range(20_000):
        counts = host.counts
        if all(counts[k] == v for k, v in want.items()):
            return
        await asyncio.sleep(0 if i < 10_000 else 0.001)
    raise AssertionError(f"counts never reached {want}: {host.counts}")


def _load(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}


async def _session_with_history(c: WsClient) -> str:
    await c.initialize()
    sid = await c.new_session()
    done = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "remember me"}]})
    assert done["result"]["stopReason"] == "end_turn"
    return sid


def test_reconnect_and_session_load_resumes_a_session_whose_socket_dropped_mid_prompt(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        long_prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": LONG}]}
        running = await c1.request_nowait("session/prompt", long_prompt)
        await c1.wait_for(lambda: len(c1.updates(sid)) > 10)
        await c1.ws.close()  # the socket ends with a prompt running: EOF for this connection
        await _until(host, connections=0, running_prompts=0, sessions=0, detached_sessions=1)
        assert c1.find(running) is None or c1.find(running)["result"]["stopReason"] == "cancelled"

        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        loaded = await c2.request("session/load", _load(sid))
        assert "result" in loaded, loaded
        replayed = [u["content"]["text"] for u in c2.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
        assert replayed[0] == "remember me"
        assert host.counts["sessions"] == 1 and host.counts["detached_sessions"] == 0
        again = await c2.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]})
        assert again["result"]["stopReason"] == "end_turn"
        await c2.close()
        await _until(host, connections=0, sessions=0, detached_sessions=1)

    host = run(_with_host(body))
    assert host.counts["detached_sessions"] == 0 and host.counts["sessions"] == 0  # the drain dropped it


def test_session_resume_also_reattaches(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, detached_sessions=1)
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        resumed = await c2.request("session/resume", _load(sid))
        assert "result" in resumed, resumed
        assert host.counts["sessions"] == 1 and host.counts["detached_sessions"] == 0
        await c2.close()

    run(_with_host(body))


def test_after_the_timeout_session_load_is_an_error_and_counters_are_zero(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, sessions=0, detached_sessions=0, detached_expired=1)
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        loaded = await c2.request("session/load", _load(sid))
        assert loaded["error"]["code"] == INVALID_PARAMS
        assert host.counts["sessions"] == 0 and host.counts["detached_sessions"] == 0
        await c2.close()

    run(_with_host(body, limits=Limits(detached_session_timeout_s=0.05)))


def test_timeout_zero_ends_sessions_with_their_socket(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, sessions=0)
        assert host.counts["detached_sessions"] == 0
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        assert (await c2.request("session/load", _load(sid)))["error"]["code"] == INVALID_PARAMS
        await c2.close()

    run(_with_host(body, limits=Limits(detached_session_timeout_s=0)))


def _by_token(headers: Mapping[str, str]) -> bool | str:
    return {"Bearer a": "alice", "Bearer b": "bob"}.get(headers.get("Authorization", ""), False)


def test_only_the_principal_that_owned_a_session_may_reattach_it(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        alice = {"Authorization": "Bearer a"}
        c1 = await WsClient.open(_url(host), additional_headers=alice)
        sid = await _session_with_history(c1)
        owner_connection = c1.connection_id
        await c1.close()
        await _until(host, connections=0, detached_sessions=1)

        # another principal, even presenting the owner's connection id, is told the session is unknown
        bob = await WsClient.open(
            _url(host), additional_headers={"Authorization": "Bearer b", "Acp-Connection-Id": str(owner_connection)}
        )
        await bob.initialize()
        refused = await bob.request("session/load", _load(sid))
        assert refused["error"]["code"] == INVALID_PARAMS
        assert sid in refused["error"]["message"]
        assert host.counts["detached_sessions"] == 1 and host.counts["sessions"] == 0
        await bob.close()

        c2 = await WsClient.open(_url(host), additional_headers=alice)
        await c2.initialize()
        assert "result" in await c2.request("session/load", _load(sid))
        assert host.counts["detached_sessions"] == 0 and host.counts["sessions"] == 1
        await c2.close()

    run(_with_host(body, authorize=_by_token))


def test_a_parked_session_counts_against_the_process_session_limit(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, sessions=0, detached_sessions=1)
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        busy = await c2.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert busy["error"]["code"] == SERVER_BUSY
        assert "result" in await c2.request("session/load", _load(sid))  # the parked one fits: it is the same one
        assert host.counts["sessions"] == 1 and host.counts["detached_sessions"] == 0
        await c2.close()
        await _until(host, connections=0, sessions=0, detached_sessions=1)

    host = run(_with_host(body, limits=Limits(max_sessions_total=1)))
    assert host.counts["detached_sessions"] == 0


class NoLoad(Agent):
    async def prompt(self, session_id: str, prompt: list[dict[str, Any]], **kwargs: Any) -> str:
        return "end_turn"


def test_an_agent_that_cannot_load_sessions_has_nothing_parked(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        await c1.initialize()
        await c1.new_session()
        await c1.close()
        await _until(host, connections=0, sessions=0)
        assert host.counts["detached_sessions"] == 0

    run(_with_host(body, factory=NoLoad))


def test_a_reattach_refused_by_the_connection_limit_leaves_the_session_parked(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, detached_sessions=1)
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        await c2.new_session()  # this connection's one session slot is taken
        busy = await c2.request("session/load", _load(sid))
        assert busy["error"]["code"] == SERVER_BUSY
        assert host.counts["detached_sessions"] == 1 and host.counts["sessions"] == 1
        await c2.close()
        c3 = await WsClient.open(_url(host))
        await c3.initialize()
        assert "result" in await c3.request("session/load", _load(sid))
        await c3.close()

    run(_with_host(body, limits=Limits(max_sessions=1)))


def test_a_hook_returning_true_makes_the_authorization_header_the_principal(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host), additional_headers={"Authorization": "Bearer x"})
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, detached_sessions=1)
        other = await WsClient.open(_url(host), additional_headers={"Authorization": "Bearer y"})
        await other.initialize()
        assert (await other.request("session/load", _load(sid)))["error"]["code"] == INVALID_PARAMS
        await other.close()
        same = await WsClient.open(_url(host), additional_headers={"Authorization": "Bearer x"})
        await same.initialize()
        assert "result" in await same.request("session/load", _load(sid))
        await same.close()

    run(_with_host(body, authorize=lambda h: h.get("Authorization") in ("Bearer x", "Bearer y")))


def test_a_reattached_session_is_idle_from_the_reattach_not_from_its_last_prompt(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c1 = await WsClient.open(_url(host))
        sid = await _session_with_history(c1)
        await c1.close()
        await _until(host, connections=0, detached_sessions=1)
        parked = host.detached.get(sid)
        assert parked is not None
        parked_since = parked.session.last_active
        c2 = await WsClient.open(_url(host))
        await c2.initialize()
        assert "result" in await c2.request("session/load", _load(sid))
        await c2.close()
        await _until(host, connections=0, detached_sessions=1)
        again = host.detached.get(sid)
        assert again is not None and again.session.last_active > parked_since

    run(_with_host(body))
