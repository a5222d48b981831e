"""``acp-fast ... --listen``: the arguments that are refused before anything listens, with a message that says why."""

from __future__ import annotations

import pytest

from acp_fast.cli import main
from acp_fast.demo import DemoAgent
from acp_fast.wire.limits import Limits

INSTANCE = DemoAgent()  # an instance, not a class: --listen needs one agent per connection


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--listen", "unix:"], "unix: needs a path"),
        (["demo", "--listen", "localhost"], "expected HOST:PORT or unix:PATH"),
        (["demo", "--listen", "127.0.0.1:0", "--workers", "2"], "--workers needs an explicit port"),
        (["serve", "tests.test_hosting_cli:INSTANCE", "--listen", "127.0.0.1:0"], "needs a class"),
        (["demo", "--listen", "127.0.0.1:0", "--auth-token-env", "ACP_FAST_TEST_UNSET_VAR"], "empty or unset"),
        (["demo", "--listen", "127.0.0.1:0", "--proxy-protocol"], "read only from trusted proxies"),
        (["demo", "--listen", "127.0.0.1:0", "--forwarded-allow-ips", "10.0.0.0/33"], "is not an address, a CIDR"),
    ],
)
def test_listen_arguments_refused_with_a_reason(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ACP_FAST_TEST_UNSET_VAR", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"), [([], False), (["--ws-deflate"], True), (["--ws-deflate", "--no-ws-deflate"], False)]
)
def test_ws_deflate_is_off_unless_the_flag_turns_it_on(
    flags: list[str], expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Limits] = []
    monkeypatch.setattr("acp_fast.hosting.run_host", lambda _factory, config: seen.append(config.limits))
    main(["demo", "--listen", "127.0.0.1:0", *flags])
    assert [limits.ws_deflate for limits in seen] == [expected]
