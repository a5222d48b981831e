"""The web console in a real browser: headless Chromium, driven by selenium, against ``acp-fast demo --listen``.

Each test starts ``acp-fast demo --listen 127.0.0.1:0 --web-console`` as a
subprocess (the port comes from its start-up line), opens the console at
``http://127.0.0.1:PORT/`` and, over WebSocket and over Streamable HTTP: runs a
prompt and sees its streamed text, starts a long prompt and presses Cancel
and sees ``cancelled`` and a time in ms, answers a permission prompt, and
loads an earlier session from the session list. A screenshot of the console
after a turn is saved under the test's ``tmp_path`` and its path printed;
``ACP_FAST_DOCS_SCREENSHOT=1`` also writes one after four turns (a prompt,
a cancel, a permission, a plan) over WebSocket to ``docs/web-console.png``. The browser's log must hold no error (a CSP
violation is one).

With auth on, the console asks for the token after a 401 and sends it (over
WebSocket as the subprotocol ``acp.bearer.<base64url>``); and a page of a
second loopback origin, allowed by ``--allow-origin``, runs a Streamable
HTTP session (CORS) and a WebSocket session with the token by script, while
the same page under another name is refused both ways.

Debian's ``chromium`` and ``chromium-driver`` with ``selenium`` from PyPI;
Selenium Manager is never asked for anything (the driver and the browser are
given by path). Missing, the tests skip saying what is missing, except under
``CI=true``, where they fail: ``.ci/run`` installs them.
"""

from __future__ import annotations

import base64
import http.server
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"
WAIT_S = 30.0  # every wait is bounded; a healthy run needs well under a second per step
BANNER = re.compile(r"serving ACP over WebSocket and Streamable HTTP on 127\.0\.0\.1:(\d+)")
CANCEL_TIME = re.compile(r"cancelled in (\d+(?:\.\d+)?) ms")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; CI=true, so the browser tests must run (.ci/run installs chromium, chromium-driver)")
    pytest.skip(reason)


try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the test extra installs it
    webdriver = None  # type: ignore[assignment]


@pytest.fixture(scope="module")
def browser_paths() -> tuple[str, str]:
    if webdriver is None:
        _unavailable("selenium is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or next((p for p in ("/usr/bin/chromedriver",) if os.path.exists(p)), None)
    if chromium is None:
        _unavailable("chromium is not installed (apt-get install chromium chromium-driver)")
    if driver is None:
        _unavailable("chromedriver is not installed (apt-get install chromium-driver)")
    assert chromium is not None and driver is not None
    return chromium, driver


@pytest.fixture
def browser(browser_paths: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    chromium, chromedriver = browser_paths
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not download anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1100,720", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


class ConsoleServer:
    """``acp-fast demo --listen 127.0.0.1:0 --web-console`` in a subprocess; stderr is drained by a thread."""

    def __init__(self, *extra: str, env: dict[str, str] | None = None) -> None:
        cmd = [sys.executable, "-m", "acp_fast", "demo", "--listen", "127.0.0.1:0", "--web-console",
               "--pace-ms", "2", *extra]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self.lines: list[str] = []
        self.port = 0
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        if not self._ready.wait(WAIT_S) or not self.port:
            self.stop()
            raise AssertionError(f"the server never said where it listens: {self.lines}")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for text in self.proc.stderr:
            self.lines.append(text.rstrip("\n"))
            found = BANNER.search(text)
            if found:
                self.port = int(found.group(1))
                self._ready.set()
        self._ready.set()  # EOF: the process ended

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait(WAIT_S)
        self._reader.join(WAIT_S)  # the pipe reached EOF with the process
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return status


@pytest.fixture
def server() -> Iterator[ConsoleServer]:
    srv = ConsoleServer()
    try:
        yield srv
    finally:
        assert srv.stop() == 0, srv.lines


# -- driving the page -------------------------------------------------------------------------------------
def _wait(driver: WebDriver, what: str, condition: Any) -> Any:
    try:
        return WebDriverWait(driver, WAIT_S).until(condition)
    except TimeoutException:
        status = driver.find_element(By.ID, "status").text
        stream = driver.find_element(By.ID, "stream").text[-600:]
        raise AssertionError(f"waited {WAIT_S} s for {what}; status: {status!r}; stream ends: {stream!r}") from None


def _text_in(element_id: str, needle: str) -> Any:
    return ec.text_to_be_present_in_element((By.ID, element_id), needle)


def _connect(driver: WebDriver, url: str, transport: str) -> None:
    driver.get(url)
    _wait(driver, "the page", ec.element_to_be_clickable((By.ID, "connect")))
    Select(driver.find_element(By.ID, "transport")).select_by_value(transport)
    driver.find_element(By.ID, "connect").click()
    _wait(driver, "a session", _text_in("stream", "new session "))
    _wait(driver, "the prompt box", ec.element_to_be_clickable((By.ID, "prompt")))


def _prompt(driver: WebDriver, text: str) -> None:
    _wait(driver, "an idle prompt box", ec.element_to_be_clickable((By.ID, "send")))
    box = driver.find_element(By.ID, "prompt")
    box.send_keys(text)
    driver.find_element(By.ID, "send").click()


def _turns_ended(driver: WebDriver, n: int) -> Any:
    return lambda d: len(d.find_elements(By.CSS_SELECTOR, "#stream .stop")) >= n


def _browser_errors(driver: WebDriver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


@pytest.mark.parametrize("transport", ["ws", "http"])
def test_console_prompt_cancel_permission_and_load(
    transport: str, server: ConsoleServer, browser: WebDriver, tmp_path: Path
) -> None:
    label = {"ws": "WebSocket", "http": "Streamable HTTP"}[transport]
    _connect(browser, server.url, transport)
    assert f"connected · {label} · acp_fast demo agent" in browser.find_element(By.ID, "status").text

    # A prompt: its answer streams in, word by word, then the turn's end.
    _prompt(browser, "hello")
    _wait(browser, "streamed text", _text_in("stream", "acp_fast streams this answer one word at a time"))
    _wait(browser, "the end of the turn", _text_in("stream", "■ end_turn"))
    shot = tmp_path / f"web-console-{transport}.png"
    assert browser.save_screenshot(str(shot))
    print(f"\nscreenshot of the console after a turn ({label}): {shot}")

    # A long prompt, cancelled: the answer is `cancelled`, with the time from the click.
    _prompt(browser, "stream 5000 10")
    _wait(browser, "the long prompt's chunks", _text_in("stream", "chunk 3 "))
    browser.find_element(By.ID, "cancel").click()
    _wait(browser, "the cancel's answer", ec.text_to_be_present_in_element((By.ID, "cancel-time"), "cancelled in"))
    found = CANCEL_TIME.search(browser.find_element(By.ID, "cancel-time").text)
    assert found, browser.find_element(By.ID, "cancel-time").text
    assert 0 <= float(found.group(1)) < WAIT_S * 1000
    assert "chunk 4999" not in browser.find_element(By.ID, "stream").text
    _wait(browser, "the cancelled turn's line", _text_in("stream", "■ cancelled · answered"))

    # A permission prompt: one button per option; Allow lets the pretend tool run.
    _prompt(browser, "tool")
    allow = _wait(browser, "the permission prompt", ec.element_to_be_clickable(
        (By.CSS_SELECTOR, "#permissions button[data-option-id='allow']")))
    assert [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#permissions button")] == ["Allow", "Reject"]
    allow.click()
    _wait(browser, "the tool's result", _text_in("stream", "the tool listed 2 files"))
    stream = browser.find_element(By.ID, "stream").text
    assert "tool: Pretend to list files (read) · pending" in stream
    assert "permission: Allow" in stream and "· completed: a.txt b.txt" in stream
    _wait(browser, "three turns", _turns_ended(browser, 3))
    assert not browser.find_elements(By.CSS_SELECTOR, "#permissions .permission")

    # A plan, as short lines.
    _prompt(browser, "plan")
    _wait(browser, "the plan", _text_in("stream", "plan: [x] Read the question  [x] Answer it"))
    _wait(browser, "four turns", _turns_ended(browser, 4))
    if transport == "ws" and os.environ.get("ACP_FAST_DOCS_SCREENSHOT") == "1":  # the one in docs/HOSTING.md
        browser.save_screenshot(str(ROOT / "docs" / "web-console.png"))

    # The session list: a new session, then load the first one back (its history replays).
    first = browser.execute_script("return document.querySelector('#sessions li.current').dataset.sessionId")
    browser.find_element(By.ID, "new-session").click()
    load = f"#sessions li[data-session-id='{first}'] button.load"
    _wait(browser, "the first session's Load button", ec.element_to_be_clickable((By.CSS_SELECTOR, load)))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#sessions li")) == 2
    browser.find_element(By.CSS_SELECTOR, load).click()
    _wait(browser, "the loaded session", _text_in("stream", f"loaded {first}"))
    replayed = browser.find_element(By.ID, "stream").text
    assert "acp_fast streams this answer" in replayed and "hello" in replayed
    assert first in browser.find_element(By.ID, "status").text

    # Still usable after the load.
    _prompt(browser, "plan")
    _wait(browser, "a turn in the loaded session", _text_in("stream", "planned 2 steps"))

    assert _browser_errors(browser) == []
    browser.find_element(By.ID, "disconnect").click()
    _wait(browser, "the disconnect", _text_in("status", "disconnected"))


@pytest.mark.parametrize("transport", ["ws", "http"])
def test_console_asks_for_the_token_and_uses_it(transport: str, browser: WebDriver) -> None:
    """Auth on: the console asks for the token after a 401 and sends it, over WebSocket as the subprotocol."""
    secret = "s3cret-token"
    srv = ConsoleServer(
        "--auth-token-env", "ACP_FAST_CONSOLE_TOKEN", "--log-level", "debug", env={"ACP_FAST_CONSOLE_TOKEN": secret}
    )
    try:
        browser.get(srv.url)
        _wait(browser, "the page", ec.element_to_be_clickable((By.ID, "connect")))
        Select(browser.find_element(By.ID, "transport")).select_by_value(transport)
        browser.find_element(By.ID, "connect").click()
        _wait(browser, "the token box", ec.visibility_of_element_located((By.ID, "token")))
        assert "the server asks for a token (401)" in browser.find_element(By.ID, "status").text
        # A wrong token is refused; the right one connects.
        browser.find_element(By.ID, "token").send_keys("wrong-token\n")
        _wait(browser, "the refusal", _text_in("status", "refused this token (401)"))
        browser.find_element(By.ID, "token").send_keys(secret + "\n")
        _wait(browser, "a session", _text_in("stream", "new session "))
        label = {"ws": "WebSocket", "http": "Streamable HTTP"}[transport]
        assert f"connected · {label}" in browser.find_element(By.ID, "status").text
        assert not browser.find_element(By.ID, "token-form").is_displayed()
        _prompt(browser, "tool")
        _wait(browser, "the permission prompt", ec.element_to_be_clickable(
            (By.CSS_SELECTOR, "#permissions button[data-option-id='reject']"))).click()
        _wait(browser, "the refusal", _text_in("stream", "permission refused"))
        assert browser.execute_script("return window.localStorage.length + window.sessionStorage.length") == 0
        assert secret not in browser.execute_script("return document.cookie")
        # The refusals (401 on the upgrade, the probe and the wrong token) are the only errors the browser logs.
        errors = _browser_errors(browser)
        refusals = ("status of 401 (Unauthorized)", "failed: HTTP Authentication failed", "response code: 401")
        assert errors and all(any(r in m for r in refusals) for m in errors), errors
    finally:
        assert srv.stop() == 0, srv.lines
    encoded = base64.urlsafe_b64encode(secret.encode()).rstrip(b"=").decode()
    assert not any(secret in line or encoded in line for line in srv.lines)


# -- a page of another origin: CORS for Streamable HTTP, the subprotocol token for WebSocket -------------------------
_APP_PAGE = b"<!doctype html><meta charset=utf-8><title>an app on another origin</title><p>app</p>"

_HTTP_SESSION_JS = """
const [base, token, done] = arguments;
(async () => {
  const out = {};
  const auth = {"Authorization": "Bearer " + token};
  const json = {...auth, "Content-Type": "application/json"};
  const init = await fetch(base + "/acp", {method: "POST", headers: json, body: JSON.stringify(
    {jsonrpc: "2.0", id: 0, method: "initialize", params: {protocolVersion: 1, clientCapabilities: {}}})});
  out.initStatus = init.status;
  out.connectionId = init.headers.get("Acp-Connection-Id");  // readable only if exposed
  out.agent = (await init.json()).result.agentInfo.name;
  const id = {"Acp-Connection-Id": out.connectionId};
  const stream = await fetch(base + "/acp", {headers: {...auth, ...id, "Accept": "text/event-stream"}});
  out.streamStatus = stream.status;
  const reader = stream.body.getReader();
  const post = await fetch(base + "/acp", {method: "POST", headers: {...json, ...id}, body: JSON.stringify(
    {jsonrpc: "2.0", id: 1, method: "session/new", params: {cwd: "/tmp", mcpServers: []}})});
  out.postStatus = post.status;
  const decoder = new TextDecoder();
  let text = "";
  for (let i = 0; i < 1000 && !out.sessionId; i++) {
    const {value, done: ended} = await reader.read();
    if (ended) break;
    text += decoder.decode(value, {stream: true});
    for (const line of text.split("\\n")) {
      if (!line.startsWith("data: ")) continue;
      const message = JSON.parse(line.slice(6));
      if (message.id === 1 && message.result) out.sessionId = message.result.sessionId;
    }
  }
  await reader.cancel();
  out.deleteStatus = (await fetch(base + "/acp", {method: "DELETE", headers: {...auth, ...id}})).status;
  done(out);
})().catch((err) => done({error: String(err)}));
"""

# Opens a WebSocket to ``url`` offering ``protocols``, sends initialize and calls ``done`` with the protocol
# selected and the agent's name, or {refused: true} when the handshake fails ({thrown: name} when the browser
# will not even try). Preceded by a line that binds url, protocols and done.
WS_OPEN_JS = """
let ws;
try {
  ws = new WebSocket(url, protocols);
} catch (err) {
  done({thrown: err.name});
  return;
}
let opened = false;
ws.onopen = () => {
  opened = true;
  ws.send(JSON.stringify({jsonrpc: "2.0", id: 0, method: "initialize",
                          params: {protocolVersion: 1, clientCapabilities: {}}}));
};
ws.onmessage = (event) => {
  const message = JSON.parse(event.data);
  ws.close();
  done({protocol: ws.protocol, agent: message.result.agentInfo.name});
};
ws.onclose = () => { if (!opened) done({refused: true}); };
"""

_WS_SESSION_JS = """
const [base, token, done] = arguments;
const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(token)))
  .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
const url = base.replace(/^http/, "ws") + "/acp", protocols = ["acp", "acp.bearer." + b64];
""" + WS_OPEN_JS


class _AppOrigin:
    """A second origin on loopback serving one blank page, from which scripts reach the ACP host."""

    def __init__(self) -> None:
        page = _APP_PAGE

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(WAIT_S)


def test_a_page_of_another_origin_uses_http_with_cors_and_websocket_with_the_token(browser: WebDriver) -> None:
    secret = "s3cret/+token"  # base64 would put '/' and '+' in it: base64url must be what goes out
    app = _AppOrigin()
    srv = ConsoleServer(
        "--allow-origin",
        f"http://127.0.0.1:{app.port}",
        "--auth-token-env",
        "ACP_FAST_APP_TOKEN",
        env={"ACP_FAST_APP_TOKEN": secret},
    )
    browser.set_script_timeout(WAIT_S)
    base = f"http://127.0.0.1:{srv.port}"
    try:
        browser.get(f"http://127.0.0.1:{app.port}/")
        http_run = browser.execute_async_script(_HTTP_SESSION_JS, base, secret)
        assert "error" not in http_run, http_run  # "Failed to fetch" without CORS
        assert http_run["initStatus"] == 200 and http_run["connectionId"], http_run
        assert http_run["agent"] == "acp-fast-demo" and http_run["streamStatus"] == 200
        assert http_run["postStatus"] == 202 and http_run["sessionId"] and http_run["deleteStatus"] == 202
        ws_run = browser.execute_async_script(_WS_SESSION_JS, base, secret)
        assert ws_run == {"protocol": "acp", "agent": "acp-fast-demo"}, ws_run
        # The same page under another name is another origin, not allowed: both ways are refused.
        browser.get(f"http://localhost:{app.port}/")
        refused = browser.execute_async_script(_HTTP_SESSION_JS, base, secret)
        assert refused == {"error": "TypeError: Failed to fetch"}, refused
        assert browser.execute_async_script(_WS_SESSION_JS, base, secret) == {"refused": True}
    finally:
        app.close()
        assert srv.stop() == 0, srv.lines
