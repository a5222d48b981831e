"""Admission, sans-IO: one order of checks for both profiles, each refusal a value with its status and code.

The WebSocket upgrade and the Streamable HTTP head ask the same ``Admission``
(the socket-level behaviour of each is tested in test_r27_r29_hosting.py,
test_hosting_cors.py, test_hosting_ws_token.py and test_http_hardening.py).
"""

from __future__ import annotations

import pytest

from acp_fast.hosting import HostConfig, bearer_token
from acp_fast.hosting.admission import Admission, Admitted, Head, Refusal, Refused, admission_key
from acp_fast.hosting.registry import PeerRegistry
from acp_fast.hosting.subprotocol import bearer_entry
from acp_fast.transports.routing import StreamRefusal, StreamRouter
from acp_fast.wire.limits import Limits

APP = "https://app.example"
TOKEN = "s3cret"
GOOD = {"Origin": APP, "Authorization": f"Bearer {TOKEN}"}


def _admission(**limits: int) -> Admission:
    config = HostConfig(limits=Limits(**limits), authorize=bearer_token(TOKEN), allowed_origins=[APP])
    return Admission(config, PeerRegistry())


def _head(headers: dict[str, str], *, protocols: list[str] | None = None, pairs: list[tuple[str, str]] | None = None,
          preflight: bool = False) -> Head:  # fmt: skip
    return Head(pairs if pairs is not None else list(headers.items()), headers, "10.0.0.1", protocols, preflight)


@pytest.mark.parametrize("protocols", [None, ["acp"]], ids=["http", "websocket"])
def test_the_head_checks_come_in_one_order_for_both_profiles(protocols: list[str] | None) -> None:
    admission = _admission()
    twice = [("Origin", APP), ("Authorization", "Bearer a"), ("authorization", "Bearer b")]
    refused = admission.check(_head(GOOD, protocols=protocols, pairs=twice))  # before Origin and the hook
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (400, Refusal.DUPLICATE_AUTHORIZATION)
    assert not refused.origin_allowed
    refused = admission.check(_head({**GOOD, "Origin": "https://evil.example"}, protocols=protocols))
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (403, Refusal.ORIGIN)
    refused = admission.check(_head({"Origin": APP}, protocols=protocols))
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (401, Refusal.UNAUTHORIZED)
    assert refused.headers == (("WWW-Authenticate", "Bearer"),) and refused.origin_allowed
    admitted = admission.check(_head(GOOD, protocols=protocols))
    assert isinstance(admitted, Admitted) and admitted.principal is not None
    assert admission.refused == {}  # counted by whoever answers the refusal, once


def test_a_token_offered_as_a_subprotocol_passes_the_hook_and_a_bad_offer_is_400() -> None:
    admission = _admission()
    admitted = admission.check(_head({"Origin": APP}, protocols=["acp", bearer_entry(TOKEN)]))
    assert isinstance(admitted, Admitted) and admitted.offer is not None and admitted.offer.protocol == "acp"
    assert admitted.principal == admission.principal(GOOD)  # the same principal as the header's
    refused = admission.check(_head({"Origin": APP}, protocols=["acp.bearer.!!"]))
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (400, Refusal.OFFER)


def test_a_preflight_is_admitted_without_credentials_but_not_with_two_authorizations() -> None:
    admission = _admission()
    assert admission.check(_head({"Origin": APP}, preflight=True)) == Admitted()
    twice = [("Authorization", "a"), ("Authorization", "b")]
    refused = admission.check(_head({"Origin": APP}, pairs=twice, preflight=True))
    assert isinstance(refused, Refused) and refused.code is Refusal.DUPLICATE_AUTHORIZATION


def test_room_checks_the_drain_the_limit_the_socket_share_and_the_principal_in_that_order() -> None:
    admission = _admission(max_connections=2, max_connections_per_principal=1)
    registry = admission.registry
    assert admission.room("p", "10.0.0.1") == "p"
    assert admission.room(None, "10.0.0.1") == admission_key(None, "10.0.0.1") == "address:10.0.0.1"
    assert admission.room(None, "") is None  # a unix socket: not capped per principal
    registry.add(object(), None, "p")  # type: ignore[arg-type]  # a live connection of principal p (its task unused)
    refused = admission.room("p", "10.0.0.1")
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (503, Refusal.PRINCIPAL_LIMIT)
    assert admission.refused_per_principal == 1
    refused = admission.room("q", "10.0.0.1", socket_full=True)
    assert isinstance(refused, Refused) and refused.code is Refusal.SOCKET_SHARE and refused.close
    registry.add(object(), None, "q")  # type: ignore[arg-type]
    refused = admission.room("r", "10.0.0.1", socket_full=True)
    assert isinstance(refused, Refused) and refused.code is Refusal.CONNECTION_LIMIT
    assert refused.headers == (("Retry-After", "1"),)
    admission.draining = True
    refused = admission.room("r", "10.0.0.1")
    assert isinstance(refused, Refused) and (refused.status, refused.code) == (503, Refusal.DRAINING)


def test_stream_refusals_are_values_that_still_read_as_their_sentences() -> None:
    router = StreamRouter(max_streams=1, max_buffered=1024, max_routes=8)
    router.attach(None, object())  # type: ignore[arg-type]  # the connection stream has its reader
    assert router.refusal(None) is StreamRefusal.HAS_READER
    assert router.refusal(None) == "this stream already has a reader"
    assert router.refusal("s") is StreamRefusal.TOO_MANY
