"""One HostConfig for a host: every rule checked when it is built, and every entry point takes it.

The keyword signatures of ``AcpHost``, ``serve_ws`` and ``run_host`` still
work and build the same config. Over real sockets: a config's ``path`` is the
endpoint ``serve_ws`` and ``run_host`` serve (``run_host`` could not be given
a path before).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from acp_fast.demo import DemoAgent
from acp_fast.hosting import AcpHost, HostConfig, ListenAddress, TrustedProxies, bearer_token, serve_ws
from acp_fast.wire.errors import ConfigError
from acp_fast.wire.limits import Limits
from tests.http_helpers import request

BOUND_S = 60.0
INITIALIZE = json.dumps(
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
).encode()
JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"allowed_origins": ["*"], "authorize": bearer_token("t")}, "allowed_origins"),
        ({"allowed_origins": ["null"]}, "allowed_origins"),
        ({"metrics_listen": "unix:/tmp/m.sock"}, "metrics_listen"),
        ({"metrics_listen": "nowhere"}, "metrics_listen"),
        ({"session_store": "postgres://x"}, "session_store"),
        ({"access_log": "xml"}, "access_log"),
    ],
)
def test_every_rule_raises_one_config_error_naming_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        HostConfig(**options)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert isinstance(caught.value, ValueError)  # what the keyword forms raised before
    with pytest.raises(ConfigError):
        AcpHost(DemoAgent, **options)  # the keyword form checks the same rules


def test_the_keyword_forms_build_the_config_they_describe() -> None:
    limits = Limits(max_connections=7)
    hook = bearer_token("t")
    proxies = TrustedProxies.parse(["127.0.0.1"])
    by_keywords = AcpHost(DemoAgent, limits, path="/agent", authorize=hook, allowed_origins=["https://app.example"],
                          proxies=proxies)  # fmt: skip
    expected = HostConfig(limits=limits, path="/agent", authorize=hook, allowed_origins=["https://app.example"],
                          proxies=proxies)  # fmt: skip
    assert by_keywords.config == expected
    assert by_keywords.config.allowed_origins == frozenset({"https://app.example"})
    assert AcpHost(DemoAgent).config == HostConfig()
    assert AcpHost(DemoAgent, expected).config is expected
    with pytest.raises(TypeError):
        AcpHost(DemoAgent, expected, path="/other")  # a config and keywords: which one counts is unclear
    with pytest.raises(TypeError, match="pathh"):
        AcpHost(DemoAgent, pathh="/agent")
    with pytest.raises(AttributeError):
        expected.path = "/x"  # type: ignore[misc]  # frozen


def test_serve_ws_takes_a_config_and_serves_its_path(run: Any) -> None:
    async def main() -> None:
        config = HostConfig(path="/agent", listen=ListenAddress(host="127.0.0.1", port=0))
        host = await serve_ws(DemoAgent, config)
        try:
            assert host.config is config
            answer = await request(host.port, "POST", JSON, INITIALIZE, path="/agent")
            assert answer.status == 200, answer
            assert answer.headers["acp-connection-id"]
            missing = await request(host.port, "POST", JSON, INITIALIZE, path="/acp")
            assert missing.status == 404, missing
        finally:
            await host.drain()
        with pytest.raises(TypeError):
            await serve_ws(DemoAgent, config, limits=Limits())

    run(main())


RUN_HOST = textwrap.dedent(
    """
    from acp_fast.demo import DemoAgent
    from acp_fast.hosting import HostConfig, ListenAddress, run_host
    config = HostConfig(path="/agent", listen=ListenAddress(host="127.0.0.1", port=0), use_uvloop=False)
    print(f"status={run_host(DemoAgent, config)!r}", flush=True)
    """
)


def test_run_host_takes_a_config_and_serves_its_path(run: Any) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", RUN_HOST], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert child.stderr is not None
    try:
        banner = ""
        for _ in range(100):  # the banner names the port and the path once the host listens
            banner = child.stderr.readline()
            if "serving ACP" in banner or not banner:
                break
        found = re.search(r"127\.0\.0\.1:(\d+) at (\S+) ", banner)
        assert found is not None, banner
        port, path = int(found.group(1)), found.group(2)
        assert path == "/agent"
        answer = run(request(port, "POST", JSON, INITIALIZE, path="/agent"))
        assert answer.status == 200, answer
        assert run(request(port, "POST", JSON, INITIALIZE, path="/acp")).status == 404
    finally:
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=BOUND_S)
    assert child.returncode == 0, err
    assert out.strip() == "status=0", (out, err)
