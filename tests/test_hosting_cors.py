"""CORS on ``/acp`` (hosting/cors.py): one test per rule of the Fetch standard, over real loopback sockets.

The host runs in the test's loop; requests are raw HTTP/1.1 (h11) so every
header of an answer is visible, as a browser's network layer sees it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from acp_fast.cli import main
from acp_fast.hosting import AcpHost, bearer_token
from acp_fast.hosting.cors import ALLOW_HEADERS, check_origins
from acp_fast.wire.limits import Limits
from tests.host_helpers import with_host
from tests.http_helpers import HttpAcpClient, request
from tests.ws_helpers import WsClient

APP = "http://app.example"
EVIL = "http://evil.example"
TOKEN = "s3cret"
PREFLIGHT = {
    "Origin": APP,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, acp-connection-id",
}
INITIALIZE = json.dumps(
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
).encode()


def _cors(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("access-control-")}


def _auth_host(body: Any, **kwargs: Any) -> Any:
    return with_host(body, authorize=bearer_token(TOKEN), allowed_origins=[APP], **kwargs)


@pytest.mark.parametrize("auth", [True, False], ids=["auth", "no-auth"])
def test_preflight_of_an_allowed_origin_is_answered_204_before_auth(run: Any, auth: bool) -> None:
    async def body(host: AcpHost) -> None:
        reply = await request(host.port, "OPTIONS", PREFLIGHT)
        assert reply.status == 204, reply  # was 401 with auth (a preflight carries no credentials), 405 without
        assert reply.body == b"" and "content-length" not in reply.headers  # a 204 has no body
        assert reply.headers["access-control-allow-origin"] == APP  # the origin itself, never *
        assert reply.headers["access-control-allow-methods"] == "GET, POST, DELETE"
        allowed = {h.strip() for h in reply.headers["access-control-allow-headers"].split(",")}
        assert allowed == {
            "authorization",
            "content-type",
            "accept",
            "acp-connection-id",
            "acp-session-id",
            "last-event-id",
        }
        assert reply.headers["access-control-max-age"] == "77"
        assert reply.headers["vary"] == "Origin"
        assert "access-control-allow-credentials" not in reply.headers

    kwargs: dict[str, Any] = {"authorize": bearer_token(TOKEN)} if auth else {}
    run(with_host(body, allowed_origins=[APP], limits=Limits(cors_max_age_s=77), **kwargs))


def test_preflight_of_another_origin_is_403_without_cors_headers(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reply = await request(host.port, "OPTIONS", {**PREFLIGHT, "Origin": EVIL})
        assert reply.status == 403, reply
        assert _cors(reply.headers) == {} and "vary" not in reply.headers
        assert host.refused.get(403) == 1

    run(_auth_host(body))


def test_options_that_is_no_preflight_goes_through_auth(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reply = await request(host.port, "OPTIONS", {"Origin": APP})  # no Access-Control-Request-Method
        assert reply.status == 401, reply

    run(_auth_host(body))


def test_actual_answers_to_an_allowed_origin_carry_allow_origin_and_expose_connection_id(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        headers = {"Origin": APP, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        reply = await request(host.port, "POST", headers, INITIALIZE)
        assert reply.status == 200, reply
        assert reply.headers["access-control-allow-origin"] == APP
        exposed = {h.strip().lower() for h in reply.headers["access-control-expose-headers"].split(",")}
        assert {"acp-connection-id", "acp-session-id", "retry-after", "www-authenticate"} <= exposed
        assert reply.headers["vary"] == "Origin"
        assert reply.headers["acp-connection-id"]
        assert "access-control-allow-credentials" not in reply.headers
        # A refusal is readable too: the page learns it was a 401, not a network error.
        refused = await request(host.port, "POST", {"Origin": APP, "Content-Type": "application/json"}, INITIALIZE)
        assert refused.status == 401
        assert refused.headers["access-control-allow-origin"] == APP
        assert "www-authenticate" in refused.headers["access-control-expose-headers"].lower()

    run(_auth_host(body))


def test_event_streams_of_an_allowed_origin_carry_allow_origin(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        client = HttpAcpClient(host.port, {"Origin": APP, "Authorization": f"Bearer {TOKEN}"})
        await client.initialize()
        sid = await client.new_session()
        for stream in (client.streams[None], client.streams[sid]):
            assert stream.status == 200
            assert stream.headers["access-control-allow-origin"] == APP
            assert stream.headers["content-type"] == "text/event-stream"
        deleted = await client.delete()
        assert deleted.status == 202 and deleted.headers["access-control-allow-origin"] == APP
        client.close()

    run(_auth_host(body))


def test_actual_request_of_another_origin_is_403_without_cors_headers(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        headers = {"Origin": EVIL, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        reply = await request(host.port, "POST", headers, INITIALIZE)
        assert reply.status == 403 and _cors(reply.headers) == {}

    run(_auth_host(body))


def test_requests_without_origin_get_no_cors_headers(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        reply = await request(host.port, "POST", headers, INITIALIZE)
        assert reply.status == 200 and _cors(reply.headers) == {}

    run(_auth_host(body))


def test_cors_headers_belong_to_one_request_of_a_keep_alive_socket(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
        first = f"OPTIONS /acp HTTP/1.1\r\nHost: x\r\nOrigin: {APP}\r\nAccess-Control-Request-Method: POST\r\n\r\n"
        post = (
            f"POST /acp HTTP/1.1\r\nHost: x\r\nOrigin: {APP}\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\n\r\n{}"
        )
        second = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        writer.write((first + post + second).encode())
        data = await reader.read()  # the server closes after the last answer
        writer.close()
        answers = data.split(b"HTTP/1.1 ")[1:]
        assert [a.split(b" ", 1)[0] for a in answers] == [b"204", b"400", b"200"], data
        assert b"access-control-allow-origin: " + APP.encode() in answers[1].lower()
        assert b"access-control" not in answers[2].lower()  # /healthz: nothing left over from /acp

    run(with_host(body, allowed_origins=[APP]))


def test_star_allows_every_origin_without_auth_and_still_names_it(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        reply = await request(host.port, "OPTIONS", {**PREFLIGHT, "Origin": EVIL})
        assert reply.status == 204 and reply.headers["access-control-allow-origin"] == EVIL
        ws = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", origin=EVIL)  # type: ignore[arg-type]
        await ws.initialize()
        await ws.close()

    run(with_host(body, allowed_origins=["*"]))


def test_websocket_upgrades_obey_the_same_origins(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        with pytest.raises(InvalidStatus) as refused:
            await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", origin=EVIL)  # type: ignore[arg-type]
        assert refused.value.response.status_code == 403
        ok = await WsClient.open(f"ws://127.0.0.1:{host.port}/acp", origin=APP)  # type: ignore[arg-type]
        await ok.initialize()
        await ok.close()

    run(with_host(body, allowed_origins=["HTTP://App.Example/"]))  # normalized to what a browser sends


def test_star_with_auth_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="cannot be combined with an auth hook"):
        AcpHost(lambda: None, authorize=bearer_token(TOKEN), allowed_origins=["*"])  # type: ignore[arg-type,return-value]


def test_cli_refuses_star_with_a_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ACP_FAST_TEST_TOKEN", TOKEN)
    monkeypatch.setattr("acp_fast.hosting.run_host", lambda *_a, **_kw: pytest.fail("must not start"))
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--listen", "127.0.0.1:0", "--auth-token-env", "ACP_FAST_TEST_TOKEN", "--allow-origin", "*"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--allow-origin" in err and "'*'" in err


@pytest.mark.parametrize("bad", ["app.example", "http://app.example/path", "null", "http://", "http://a b"])
def test_an_origin_that_is_no_origin_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        check_origins([bad], auth=False)


def test_allow_headers_cover_every_request_header_the_profile_uses() -> None:
    assert {"authorization", "content-type", "accept", "acp-connection-id", "acp-session-id", "last-event-id"} == {
        h.strip() for h in ALLOW_HEADERS.split(",")
    }
