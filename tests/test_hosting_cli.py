"""``acp-fast ... --listen``: the arguments that are refused before anything listens, with a message that says why."""

from __future__ import annotations

import pytest

from acp_fast.cli import main
from acp_fast.demo import DemoAgent

INSTANCE = DemoAgent()  # an instance, not a class: --listen needs one agent per connection


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--listen", "unix:"], "unix: needs a path"),
        (["demo", "--listen", "localhost"], "expected HOST:PORT or unix:PATH"),
        (["demo", "--listen", "127.0.0.1:0", "--workers", "2"], "--workers needs an explicit port"),
        (["serve", "tests.test_hosting_cli:INSTANCE", "--listen", "127.0.0.1:0"], "needs a class"),
        (["demo", "--listen", "127.0.0.1:0", "--auth-token-env", "ACP_FAST_TEST_UNSET_VAR"], "empty or unset"),
    ],
)
def test_listen_arguments_refused_with_a_reason(argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACP_FAST_TEST_UNSET_VAR", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert message in str(exc.value.code)
