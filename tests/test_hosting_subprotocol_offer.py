"""Reading a ``Sec-WebSocket-Protocol`` offer, sans-IO: header values in, the ACP name to select and the token out.

One table row per form a browser ACP client sends (``acp`` or ``acp.v1``;
``acp.bearer.<base64url>`` or ``bearer.<token>``), per order, per repeated
header line, and one per refusal. The sockets, the 101 and Chromium are in
tests/test_hosting_ws_token.py and tests/test_hosting_ws_subprotocols_browser.py.
"""

from __future__ import annotations

import pytest

from acp_fast.hosting.subprotocol import AuthHeaders, Offer, OfferError, bearer_entry, hook_headers, read_offer

TOKEN = "s3cret/+=~token?>"  # '/', '=', '?' and '>' are no subprotocol characters: only acp.bearer. carries it
RAW = "eyJhbGciOi.J9-_~!#$%&'*+^`|"  # every character a subprotocol name may hold besides letters and digits
ENTRY = bearer_entry(TOKEN)


@pytest.mark.parametrize(
    ("values", "offer"),
    [
        ([], Offer()),  # no header at all: nothing to select, as before
        (["other"], Offer()),  # no ACP name: a 101 that selects nothing, as before
        ([""], Offer()),
        (["acp"], Offer("acp")),
        (["acp.v1"], Offer("acp.v1")),
        (["acp, acp.v1"], Offer("acp")),  # the first ACP name offered is selected
        (["acp.v1, acp"], Offer("acp.v1")),
        (["other, acp.v1"], Offer("acp.v1")),
        (["acp,acp"], Offer("acp")),
        ([" acp.v1 ,, other"], Offer("acp.v1")),  # blanks and empty items are no names
        (["ACP", "Acp.V1"], Offer()),  # subprotocol names are compared exactly
        ([f"acp, {ENTRY}"], Offer("acp", TOKEN)),
        ([f"{ENTRY}, acp"], Offer("acp", TOKEN)),  # a token may come first; it is never selected
        ([f"acp.v1, {ENTRY}"], Offer("acp.v1", TOKEN)),
        ([f"acp.v1, bearer.{RAW}"], Offer("acp.v1", RAW)),
        ([f"bearer.{RAW} ,acp.v1"], Offer("acp.v1", RAW)),
        ([f"acp, bearer.{RAW}"], Offer("acp", RAW)),
        (["acp.v1", f"bearer.{RAW}"], Offer("acp.v1", RAW)),  # repeated header lines are one list, in order
        ([f"bearer.{RAW}", "acp.v1, acp"], Offer("acp.v1", RAW)),
        ([f"acp, bearer.{ENTRY}"], Offer("acp", ENTRY)),  # bearer. takes what follows as it is
    ],
)
def test_an_offer_reads_as_the_acp_name_to_select_and_the_token(values: list[str], offer: Offer) -> None:
    assert read_offer(values) == offer


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ([ENTRY], "beside the subprotocol acp or acp.v1"),  # selecting nothing fails a browser; the token never
        ([f"bearer.{RAW}"], "beside the subprotocol acp or acp.v1"),
        ([f"other, bearer.{RAW}"], "beside the subprotocol acp or acp.v1"),
        ([f"acp, {ENTRY}, {ENTRY}"], "more than one"),
        ([f"acp.v1, bearer.{RAW}", f"bearer.{RAW}"], "more than one"),
        ([f"acp, {ENTRY}, bearer.{RAW}"], "more than one"),  # a token in both forms: which one counts?
        (["acp, bearer."], "may not"),
        (["acp, bearer.a/b"], "may not"),
        (["acp, bearer.abc="], "may not"),  # base64's padding is no subprotocol character
        (["acp, bearer.a b"], "may not"),
        (["acp, bearer.tök"], "may not"),
        (["acp, bearer.a\x7fb"], "may not"),
        (["acp, acp.bearer.!!!"], "unpadded base64url"),
        (["acp, acp.bearer."], "unpadded base64url"),
    ],
)
def test_an_unreadable_offer_is_refused_without_the_token(values: list[str], why: str) -> None:
    with pytest.raises(OfferError) as refused:
        read_offer(values)
    assert why in str(refused.value)
    assert RAW not in str(refused.value) and ENTRY not in str(refused.value)


def test_the_hook_sees_the_token_as_authorization_and_only_the_selected_name() -> None:
    offer = read_offer([f"bearer.{RAW}, acp.v1"])
    seen = hook_headers({"Sec-WebSocket-Protocol": f"bearer.{RAW}, acp.v1", "Origin": "o"}, offer)
    assert isinstance(seen, AuthHeaders)
    assert dict(seen) == {"sec-websocket-protocol": "acp.v1", "origin": "o", "authorization": f"Bearer {RAW}"}
    with pytest.raises(OfferError, match="send one"):
        hook_headers({"Authorization": f"Bearer {RAW}"}, offer)
    plain = {"Sec-WebSocket-Protocol": "acp.v1"}
    assert hook_headers(plain, read_offer(["acp.v1"])) is plain
