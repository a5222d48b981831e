"""A bearer token on a WebSocket as a browser can send it: the ``acp.bearer.<base64url>`` and ``bearer.<token>``
subprotocols, beside ``acp`` or ``acp.v1``.

Over real loopback sockets: the ``websockets`` client offers subprotocols as
a browser does; malformed offers go over a raw socket so the exact bytes and
the whole answer are visible.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from collections.abc import Mapping
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from acp_fast.hosting import AcpHost, bearer_token
from acp_fast.hosting.subprotocol import AuthHeaders, Offer, bearer_entry
from tests.host_helpers import with_host
from tests.ws_helpers import WsClient

TOKEN = "s3cret/+=~token?>"  # base64's own symbols in the token
UNICODE_TOKEN = "Tök€n?>~"  # encodes to '-' and '_': base64url, not base64, must carry it intact
ENTRY = bearer_entry(TOKEN)
B64 = ENTRY.removeprefix("acp.bearer.")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _url(host: AcpHost) -> str:
    return f"ws://127.0.0.1:{host.port}/acp"


async def _raw_upgrade(host: AcpHost, protocols: str | None, extra: str = "") -> tuple[int, bytes]:
    """One upgrade request over a raw socket; returns the status and the whole answer head and body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
    head = (
        f"GET /acp HTTP/1.1\r\nHost: 127.0.0.1:{host.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    )
    if protocols is not None:
        head += f"Sec-WebSocket-Protocol: {protocols}\r\n"
    writer.write((head + extra + "\r\n").encode())
    data = b""
    for _ in range(1000):  # until the head, and the body its Content-Length announces, are in
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", data[:head_end])
            if len(data) >= head_end + 4 + (int(length.group(1)) if length else 0):
                break
        chunk = await reader.read(65536)
        if not chunk:
            break
        data += chunk
    writer.close()
    return int(data.split(b" ", 2)[1]), data


def test_a_token_offered_as_subprotocol_is_accepted_and_acp_selected(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host), subprotocols=["acp", ENTRY])  # type: ignore[list-item]
        assert c.ws.subprotocol == "acp"
        assert c.ws.response is not None
        assert c.ws.response.headers.get_all("Sec-WebSocket-Protocol") == ["acp"]  # the bearer entry never echoed
        init = await c.initialize()
        assert init["protocolVersion"] == 1
        await c.close()
        unicode_entry = bearer_entry(UNICODE_TOKEN)
        assert "-" in unicode_entry and "_" in unicode_entry
        u = await WsClient.open(_url(host), subprotocols=["acp", unicode_entry])  # type: ignore[list-item]
        await u.initialize()
        await u.close()

    run(with_host(body, authorize=lambda h: h.get("Authorization") in (f"Bearer {TOKEN}", f"Bearer {UNICODE_TOKEN}")))


def test_a_wrong_token_in_the_subprotocol_is_401(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        with pytest.raises(InvalidStatus) as refused:
            await WsClient.open(_url(host), subprotocols=["acp", bearer_entry("wrong")])  # type: ignore[list-item]
        assert refused.value.response.status_code == 401

    run(with_host(body, authorize=bearer_token(TOKEN)))


def test_the_hook_sees_authorization_and_no_secret_subprotocol(run: Any) -> None:
    seen: list[dict[str, Any]] = []

    def hook(headers: Mapping[str, str]) -> bool:
        seen.append({k: headers.get(k) for k in ("Authorization", "authorization", "Sec-WebSocket-Protocol")})
        return headers.get("Authorization") == f"Bearer {TOKEN}"

    async def body(host: AcpHost) -> None:
        by_protocol = await WsClient.open(_url(host), subprotocols=["acp", ENTRY])  # type: ignore[list-item]
        await by_protocol.initialize()
        # the same token in the header: the same view, the same principal
        by_header = await WsClient.open(_url(host), additional_headers={"Authorization": f"Bearer {TOKEN}"})
        await by_header.initialize()
        await by_protocol.close()
        await by_header.close()
        principals = {
            host.admission.principal(AuthHeaders([], Offer("acp", TOKEN))),
            host.admission.principal({"Authorization": f"Bearer {TOKEN}"}),
        }
        assert len(principals) == 1 and None not in principals

    run(with_host(body, authorize=hook))
    assert seen[0] == {
        "Authorization": f"Bearer {TOKEN}",
        "authorization": f"Bearer {TOKEN}",
        "Sec-WebSocket-Protocol": "acp",
    }
    assert seen[1]["Authorization"] == f"Bearer {TOKEN}" and seen[1]["Sec-WebSocket-Protocol"] is None


@pytest.mark.parametrize(
    ("offer", "extra", "why"),
    [
        ("acp, acp.bearer.!!!", "", b"unpadded base64url"),
        (f"acp, acp.bearer.{B64}==", "", b"unpadded base64url"),  # padding is no token character
        ("acp, acp.bearer.A", "", b"unpadded base64url"),  # 6 bits: no whole byte
        ("acp, acp.bearer.", "", b"unpadded base64url"),
        ("acp, acp.bearer." + _b64(b"\xff\xfe"), "", b"UTF-8"),
        ("acp, acp.bearer." + _b64(b"a\nb"), "", b"control"),
        (ENTRY, "", b"beside the subprotocol acp"),
        (f"acp, {ENTRY}, {ENTRY}", "", b"more than one"),
        (f"acp, {ENTRY}", f"Authorization: Bearer {TOKEN}\r\n", b"send one"),
    ],
    ids=["alphabet", "padding", "length", "empty", "not-utf8", "control", "no-acp", "two", "and-header"],
)
def test_a_malformed_offer_is_400_and_the_answer_never_holds_it(run: Any, offer: str, extra: str, why: bytes) -> None:
    async def body(host: AcpHost) -> None:
        status, answer = await _raw_upgrade(host, offer, extra)
        assert status == 400, answer
        assert why in answer
        assert B64.encode() not in answer and TOKEN.encode() not in answer
        assert host.counts["connections"] == 0

    run(with_host(body, authorize=bearer_token(TOKEN)))


def test_the_header_form_keeps_working_and_acp_alone_is_selected(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        auth = f"Authorization: Bearer {TOKEN}\r\n"
        status, answer = await _raw_upgrade(host, None, auth)
        assert status == 101 and b"sec-websocket-protocol" not in answer.lower()  # nothing offered, none selected
        status, answer = await _raw_upgrade(host, "acp", auth)
        assert status == 101 and b"\r\nSec-WebSocket-Protocol: acp\r\n" in answer
        status, answer = await _raw_upgrade(host, "other", auth)
        assert status == 101 and b"sec-websocket-protocol" not in answer.lower()
        status, answer = await _raw_upgrade(host, f"acp, {ENTRY}")
        assert status == 101 and b"\r\nSec-WebSocket-Protocol: acp\r\n" in answer and B64.encode() not in answer

    run(with_host(body, authorize=bearer_token(TOKEN)))


def test_the_token_never_reaches_a_log_record(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(1)  # everything, picows' wire dumps (level 9) included

    async def body(host: AcpHost) -> None:
        c = await WsClient.open(_url(host), subprotocols=["acp", ENTRY])  # type: ignore[list-item]
        await c.initialize()
        await c.close()
        with pytest.raises(InvalidStatus):
            await WsClient.open(_url(host), subprotocols=["acp", bearer_entry("wrong-" + TOKEN)])  # type: ignore[list-item]
        await _raw_upgrade(host, f"acp, {ENTRY}, {ENTRY}")

    run(with_host(body, authorize=bearer_token(TOKEN)))
    server_side = [r for r in caplog.records if not r.name.startswith("websockets")]  # the client logs what it sends
    assert any(r.name.startswith("acp_fast.hosting.ws") for r in server_side)  # the capture saw the connections' logs
    for record in server_side:
        text = record.getMessage()
        assert B64 not in text and TOKEN not in text, (record.name, text[:300])
    assert logging.getLogger("acp_fast.hosting.ws").isEnabledFor(9)  # the capture did ask for the dumps
    assert "acp.bearer" not in repr(AuthHeaders([("Sec-WebSocket-Protocol", f"acp, {ENTRY}")], Offer("acp", TOKEN)))


# -- the forms other browser ACP clients offer: acp.v1 and bearer.<token> -------------------------------------------
RAW = "eyJhbGciOi.J9-_~!#$%&'*+^`|"  # a token that is a subprotocol name: it may go as bearer.<token>


def _selected(answer: bytes) -> list[bytes]:
    """The Sec-WebSocket-Protocol values of an answer's head."""
    head = answer.split(b"\r\n\r\n", 1)[0]
    return [
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-protocol:")
    ]


@pytest.mark.parametrize(
    ("lines", "selected"),
    [
        (["acp.v1, bearer." + RAW], b"acp.v1"),
        (["bearer." + RAW + ", acp.v1"], b"acp.v1"),
        (["acp, bearer." + RAW], b"acp"),
        (["acp.v1, " + bearer_entry(RAW)], b"acp.v1"),
        (["acp.v1, acp, bearer." + RAW], b"acp.v1"),
        (["acp, acp.v1, bearer." + RAW], b"acp"),
        (["bearer." + RAW, "acp.v1"], b"acp.v1"),  # two header lines: one list
    ],
)
def test_each_token_form_gets_a_101_selecting_the_first_acp_name_offered(
    run: Any, lines: list[str], selected: bytes
) -> None:
    async def body(host: AcpHost) -> None:
        first, *more = lines
        status, answer = await _raw_upgrade(host, first, "".join(f"Sec-WebSocket-Protocol: {v}\r\n" for v in more))
        assert status == 101, answer
        assert _selected(answer) == [selected]
        assert RAW.encode() not in answer and bearer_entry(RAW).encode() not in answer

    run(with_host(body, authorize=bearer_token(RAW)))


def test_a_wrong_raw_token_is_401_and_a_header_token_with_acp_v1_is_served(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        status, _ = await _raw_upgrade(host, "acp.v1, bearer.wrong")
        assert status == 401
        status, answer = await _raw_upgrade(host, "acp.v1, acp", f"Authorization: Bearer {RAW}\r\n")
        assert status == 101 and _selected(answer) == [b"acp.v1"]

    run(with_host(body, authorize=bearer_token(RAW)))


@pytest.mark.parametrize("authorize", [None, bearer_token(RAW)], ids=["no-auth", "auth"])
def test_without_a_token_acp_v1_is_selected_and_no_acp_name_selects_nothing(run: Any, authorize: Any) -> None:
    auth = "" if authorize is None else f"Authorization: Bearer {RAW}\r\n"

    async def body(host: AcpHost) -> None:
        status, answer = await _raw_upgrade(host, "acp.v1", auth)
        assert status == 101 and _selected(answer) == [b"acp.v1"]
        status, answer = await _raw_upgrade(host, "acp.v1, acp", auth)
        assert status == 101 and _selected(answer) == [b"acp.v1"]
        status, answer = await _raw_upgrade(host, None, auth)  # clients that offer nothing keep working
        assert status == 101 and _selected(answer) == []
        status, answer = await _raw_upgrade(host, "other", auth)
        assert status == 101 and _selected(answer) == []

    run(with_host(body, authorize=authorize))


@pytest.mark.parametrize("authorize", [None, bearer_token(RAW)], ids=["no-auth", "auth"])
@pytest.mark.parametrize(
    ("offer", "why"),
    [
        ("bearer." + RAW, b"beside the subprotocol acp or acp.v1"),  # never a 101 selecting the token, or nothing
        ("other, bearer." + RAW, b"beside the subprotocol acp or acp.v1"),
        (f"acp.v1, bearer.{RAW}, {bearer_entry(RAW)}", b"more than one"),
        (f"acp.v1, bearer.{RAW}, bearer.{RAW}", b"more than one"),
        ("acp.v1, bearer.a/b=", b"may not"),
    ],
    ids=["alone", "beside-other", "both-forms", "twice", "not-a-token"],
)
def test_an_unreadable_raw_token_offer_is_400_and_never_repeated(
    run: Any, authorize: Any, offer: str, why: bytes
) -> None:
    async def body(host: AcpHost) -> None:
        status, answer = await _raw_upgrade(host, offer)
        assert status == 400, answer
        assert why in answer and RAW.encode() not in answer and b"a/b=" not in answer
        assert host.counts["connections"] == 0

    run(with_host(body, authorize=authorize))
