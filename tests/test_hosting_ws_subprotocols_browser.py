"""Every subprotocol form a browser ACP client offers, from real Chromium, against ``acp-fast demo --listen``.

Browser clients name ACP ``acp`` or ``acp.v1`` and send a token as
``acp.bearer.<base64url>`` or ``bearer.<token>``; a browser fails a handshake
whose ``101`` selects none of its offers. A script on the host's own page
opens ``new WebSocket(url, protocols)`` for each form, with the host's auth
off and on (``--auth-token-env``), and reports the protocol selected and the
``initialize`` answer, or the refusal. One more test asks Chromium which
characters it lets through in a subprotocol name and checks that the host
reads ``bearer.<token>`` by the same rule.

The browser and its driver come from tests/test_web_console_browser.py
(Debian's ``chromium`` and ``chromium-driver``; skipped when missing, failed
under ``CI=true``).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from acp_fast.hosting.subprotocol import OfferError, read_offer
from tests.test_web_console_browser import WS_OPEN_JS, ConsoleServer, WebDriver, browser, browser_paths  # noqa: F401

pytestmark = pytest.mark.slow

SECRET = "Tok9-._~!#$%&'*+^`|"  # every non-alphanumeric character a subprotocol name may hold
B64 = base64.urlsafe_b64encode(SECRET.encode()).rstrip(b"=").decode()
CONNECTED = "acp-fast-demo"

_OPEN_JS = "const [url, protocols, done] = arguments;\n" + WS_OPEN_JS

_NAMES_JS = """
const [url, candidates] = arguments;
const accepted = [];
for (const c of candidates) {
  try {
    new WebSocket(url, ["bearer.a" + c + "b"]).close();  // the constructor checks the name before any I/O
    accepted.push(c);
  } catch (err) {
    if (err.name !== "SyntaxError") throw err;
  }
}
return accepted;
"""


def _open(driver: WebDriver, srv: ConsoleServer, protocols: list[str]) -> dict[str, Any]:
    driver.set_script_timeout(30)
    result: dict[str, Any] = driver.execute_async_script(_OPEN_JS, f"ws://127.0.0.1:{srv.port}/acp", protocols)
    return result


def _check(driver: WebDriver, srv: ConsoleServer, cases: list[tuple[list[str], str | None]]) -> None:
    """Each offer connects and selects ``expected`` (``None``: the browser sees the handshake refused)."""
    driver.get(srv.url)  # the host's own page: its origin is allowed
    for protocols, expected in cases:
        result = _open(driver, srv, protocols)
        want = {"refused": True} if expected is None else {"protocol": expected, "agent": CONNECTED}
        assert result == want, (protocols, result)


def test_every_acp_name_connects_without_auth(browser: WebDriver) -> None:  # noqa: F811
    srv = ConsoleServer()
    try:
        _check(
            browser,
            srv,
            [
                ([], ""),  # no header: nothing to select, as before
                (["acp"], "acp"),
                (["acp.v1"], "acp.v1"),
                (["acp.v1", "acp"], "acp.v1"),  # the first ACP name offered
                (["acp", "acp.v1"], "acp"),
                (["other", "acp.v1"], "acp.v1"),
                (["acp.v1", "bearer." + SECRET], "acp.v1"),  # a token nobody asked for changes nothing
                (["bearer." + SECRET], None),  # 400: never a 101 that selects the token, or nothing
                (["other"], None),  # a 101 selecting nothing: the browser itself fails it
            ],
        )
    finally:
        assert srv.stop() == 0, srv.lines


def test_every_token_form_connects_with_auth(browser: WebDriver) -> None:  # noqa: F811
    srv = ConsoleServer("--auth-token-env", "ACP_FAST_WS_TOKEN", env={"ACP_FAST_WS_TOKEN": SECRET})
    try:
        _check(
            browser,
            srv,
            [
                (["acp", "acp.bearer." + B64], "acp"),  # this project's own form (the web console's)
                (["acp.v1", "bearer." + SECRET], "acp.v1"),  # acp-ui's
                (["bearer." + SECRET, "acp.v1"], "acp.v1"),
                (["acp.v1", "acp.bearer." + B64], "acp.v1"),
                (["acp", "bearer." + SECRET], "acp"),
                (["acp.v1", "acp", "bearer." + SECRET], "acp.v1"),
                (["acp.v1", "bearer.wrong"], None),  # 401
                (["acp.v1"], None),  # 401: no token
                (["bearer." + SECRET], None),  # 400: no ACP name to select
                (["acp.v1", "bearer." + SECRET, "acp.bearer." + B64], None),  # 400: a token in two forms
            ],
        )
    finally:
        assert srv.stop() == 0, srv.lines
    assert not any(SECRET in line or B64 in line for line in srv.lines)


def test_the_host_reads_a_bearer_token_by_the_browser_rule(browser: WebDriver) -> None:  # noqa: F811
    """The characters Chromium lets through in ``bearer.<token>`` are exactly those the host accepts there."""
    candidates = [chr(c) for c in range(0x20, 0x7F)] + ["é", "€"]
    srv = ConsoleServer()
    try:
        browser.get(srv.url)
        in_browser = set(browser.execute_script(_NAMES_JS, f"ws://127.0.0.1:{srv.port}/acp", candidates))
    finally:
        assert srv.stop() == 0, srv.lines
    on_host = set()
    for c in candidates:
        try:
            offer = read_offer([f"acp.v1, bearer.a{c}b"])
        except OfferError:
            continue
        if offer.token == f"a{c}b":  # a comma splits the offer: no character of the token
            on_host.add(c)
    assert in_browser == on_host
    assert set(SECRET) - in_browser == set() and not {"/", "=", " ", ",", '"', "é"} & in_browser
