"""The web console's HTTP side over real sockets: off by default, its files, headers, caching and origin.

The page in a browser is tests/test_web_console_browser.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from acp_fast import __version__
from acp_fast.cli import main
from acp_fast.hosting import AcpHost
from acp_fast.hosting.web_console import content_security_policy, loopback_origins
from tests.host_helpers import with_host
from tests.http_helpers import Reply, request

CONSOLE = Path(__file__).resolve().parent.parent / "acp_fast" / "hosting" / "console"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
JSON = {"Content-Type": "application/json"}
#: A URL with a scheme in the page's files: nothing is fetched from elsewhere (the WebSocket URL is built at run time).
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.IGNORECASE)
SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'  # a name, never fetched


async def _raw_get(port: int, head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    try:
        return await reader.read()  # Connection: close
    finally:
        writer.close()


def test_without_the_flag_the_console_is_404(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        for path in ("/", "/console.js", "/console.css", "/index.html"):
            assert (await request(host.port, "GET", path=path)).status == 404
        origin = {"Origin": f"http://127.0.0.1:{host.port}"}  # no console: no loopback origin either
        assert (await request(host.port, "POST", {**JSON, **origin}, json.dumps(INIT).encode())).status == 403

    run(with_host(body))


def test_the_console_page_its_assets_and_their_headers(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        page = await request(host.port, "GET", path="/")
        assert page.status == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["x-content-type-options"] == "nosniff"
        policy = page.headers["content-security-policy"]
        assert policy.startswith("default-src 'self';")
        assert "connect-src 'self' ws://127.0.0.1 wss://127.0.0.1" in policy
        assert "frame-ancestors 'none'" in policy
        assert page.headers["etag"].startswith(f'"{__version__}-')
        assert page.headers["cache-control"] == "no-cache"
        html = page.body.decode()
        assert f"acp_fast {__version__}" in html and "@VERSION@" not in html and "@ASSET_VERSION@" not in html
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sorted(a.split("?")[0] for a in assets) == ["/console.css", "/console.js", "/favicon.svg"]
        assert "<script>" not in html and "<style" not in html and " style=" not in html  # CSP: no inline code
        version = {a.split("?v=")[1] for a in assets}
        assert len(version) == 1 and version.pop().startswith(f"{__version__}-")
        types = {"/console.js": "text/javascript", "/console.css": "text/css", "/favicon.svg": "image/svg+xml"}
        for asset in assets:
            path = asset.split("?")[0]
            reply = await request(host.port, "GET", path=asset)
            assert reply.status == 200, reply
            assert reply.headers["content-type"].startswith(types[path])
            assert reply.headers["x-content-type-options"] == "nosniff"
            assert "immutable" in reply.headers["cache-control"]  # the versioned name may be cached for good
            assert reply.body == (CONSOLE / {"/favicon.svg": "icon.svg"}.get(path, path[1:])).read_bytes()
            unversioned = await request(host.port, "GET", path=path)
            assert unversioned.headers["cache-control"] == "no-cache"
            again = await request(host.port, "GET", {"If-None-Match": reply.headers["etag"]}, path=asset)
            assert (again.status, again.body) == (304, b"")
        js = (await request(host.port, "GET", path="/console.js")).body.decode()
        assert "new WebSocket(url, protocols)" in js and "acp.bearer." in js and "TODO" not in js
        for method in ("POST", "HEAD", "DELETE"):
            reply = await request(host.port, method, path="/")
            assert (reply.status, reply.headers["allow"]) == (405, "GET"), reply
        assert (await request(host.port, "GET", path="/nothing-here")).status == 404

    run(with_host(body, web_console=True))


def test_the_console_files_name_no_other_origin() -> None:
    files = sorted(p for p in CONSOLE.iterdir() if p.is_file())
    assert [p.name for p in files] == ["console.css", "console.js", "icon.svg", "index.html.in"]
    for path in files:
        text = path.read_text().replace(SVG_NAMESPACE, "")
        assert URL.findall(text) == [], path
        assert "@import" not in text and re.search(r"\burl\(", text) is None, path  # CSS fetches nothing
        assert "innerHTML" not in text and "eval(" not in text, path  # agent text is shown with textContent


@pytest.mark.parametrize(
    ("host", "connect"),
    [
        ("127.0.0.1:8765", "connect-src 'self' ws://127.0.0.1:8765 wss://127.0.0.1:8765"),
        ("[::1]:8765", "connect-src 'self' ws://[::1]:8765 wss://[::1]:8765"),
        ("Console.Example:443", "connect-src 'self' ws://console.example:443 wss://console.example:443"),
        ("x; script-src *", "connect-src 'self'"),
        ("evil.example 'unsafe-inline'", "connect-src 'self'"),
        ("", "connect-src 'self'"),
        (None, "connect-src 'self'"),
    ],
)
def test_the_policy_repeats_only_a_plain_host_header(host: str | None, connect: str) -> None:
    assert content_security_policy(host).endswith("; " + connect)


def test_a_host_header_that_could_smuggle_a_directive_is_left_out(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        raw = await _raw_get(host.port, b"GET / HTTP/1.1\r\nHost: a; script-src *\r\nConnection: close\r\n\r\n")
        head = raw.split(b"\r\n\r\n", 1)[0].decode()
        assert head.startswith("HTTP/1.1 200")
        assert "content-security-policy: default-src 'self'" in head.lower()
        assert "script-src" not in head

    run(with_host(body, web_console=True))


def test_the_console_origin_may_use_acp_and_others_may_not(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        port = host.port
        assert loopback_origins(port) <= host.allowed_origins
        init = json.dumps(INIT).encode()
        for name in ("127.0.0.1", "localhost", "[::1]"):
            reply: Reply = await request(port, "POST", {**JSON, "Origin": f"http://{name}:{port}"}, init)
            assert reply.status == 200, reply
            assert reply.headers["acp-connection-id"]
        for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}"):
            assert (await request(port, "POST", {**JSON, "Origin": origin}, init)).status == 403

    run(with_host(body, web_console=True, allowed_origins=["http://app.example"]))


def test_the_console_keeps_the_auth_hook(run: Any) -> None:
    async def body(host: AcpHost) -> None:
        origin = {"Origin": f"http://127.0.0.1:{host.port}"}
        assert (await request(host.port, "GET", path="/")).status == 200  # the page itself holds no secret
        assert (await request(host.port, "POST", {**JSON, **origin}, json.dumps(INIT).encode())).status == 401
        assert (await request(host.port, "GET", origin)).status == 401  # the page's probe

    run(with_host(body, web_console=True, authorize=lambda headers: headers.get("Authorization") == "Bearer t"))


def test_cli_flag_reaches_run_host_and_needs_listen(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr("acp_fast.hosting.run_host", lambda _factory, config: seen.append(config.web_console))
    main(["demo", "--listen", "127.0.0.1:0"])
    main(["demo", "--listen", "127.0.0.1:0", "--web-console"])
    assert seen == [False, True]
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--web-console"])
    assert exc.value.code == 2
    assert "--web-console needs --listen" in capsys.readouterr().err
