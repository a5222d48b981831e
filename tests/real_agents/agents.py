"""The real agents: where their venvs live, how each is started, and how its temp HOME points it at
the offline fake model and away from every other host.

The venvs are built by ``.ci/real-agents`` (pinned versions below) under
``$ACP_FAST_CI_CACHE/real-agents/<name>`` (default ``.ci-cache/real-agents``), each with the agent,
the SDK release it pins, and this checkout of acp_fast installed editable.

Offline: besides the config each agent reads, every process gets ``HTTP(S)_PROXY``/``ALL_PROXY``
pointing at a closed loopback port with ``NO_PROXY`` for 127.0.0.1 only, so a request to any other
host that honours the proxy variables fails at once instead of leaving the machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ACP_FAST_CI_CACHE", ROOT / ".ci-cache")) / "real-agents"
SHIM_SITE = ROOT / "tests" / "sdk_suite" / "site"  # its sitecustomize swaps in compat's run_agent


@dataclass(frozen=True)
class RealAgent:
    name: str  # the distribution, also the venv's folder name
    version: str
    sdk: str  # the agent-client-protocol release it pins
    python: str  # the interpreter its venv is built with
    argv: tuple[str, ...]  # relative to the venv's bin/
    tool_name: str  # the fake model asks for this tool: a file write the agent gets permission for
    tool_args: Callable[[Path], dict[str, Any]]
    configure: Callable[[Path, int], dict[str, str]]  # (home, model port) -> extra env
    written: Callable[[Path], Path]  # (project dir) -> the file the tool call writes
    model: str = "fake-model"
    content_key: str = "content"  # the tool argument holding what the file must contain
    # session/update kinds the agent sends from tasks it detaches (see transcript.detach)
    detached_updates: frozenset[str] = frozenset()
    # Updates it sends from such a task after opening a session (method -> kinds): the session
    # waits for them before going on, so each run has them whatever the timing.
    sent_after_open: tuple[tuple[str, str], ...] = ()

    @property
    def venv(self) -> Path:
        return CACHE / self.name

    @property
    def installed(self) -> bool:
        stamp = self.venv / ".real-agent-stamp"
        return stamp.is_file() and stamp.read_text().strip() == f"{self.name}=={self.version}"

    def command(self) -> list[str]:
        return [str(self.venv / "bin" / self.argv[0]), *self.argv[1:]]


def _kimi_home(home: Path, port: int) -> dict[str, str]:
    share = home / ".kimi"
    (share / "credentials").mkdir(parents=True, exist_ok=True)
    # kimi's ACP server refuses session/new until a Kimi Code login token is on disk; nothing
    # ever sends it (the model provider below has its own key and no OAuth), so a placeholder with
    # no expiry satisfies the check offline.
    (share / "credentials" / "kimi-code.json").write_text(json.dumps({
        "access_token": "offline-placeholder", "refresh_token": "", "expires_at": 0,
        "scope": "", "token_type": "Bearer"}))
    (share / "config.toml").write_text(f"""\
default_model = "fake"
telemetry = false

[providers.fake]
type = "openai_legacy"
base_url = "http://127.0.0.1:{port}/v1"
api_key = "offline"

[models.fake]
provider = "fake"
model = "fake-model"
max_context_size = 200000

[loop_control]
max_retries_per_step = 1
""")
    return {"KIMI_SHARE_DIR": str(share), "KIMI_DISABLE_TELEMETRY": "1"}


KIMI = RealAgent(
    # 1.52.0, the last release, is a tombstone: every entry point prints "no longer maintained"
    # and exits. 1.51.0 is the last one that runs; it pins the same SDK 0.8.0.
    # Python 3.13: on 3.12.1 its import dies in a generic slotted dataclass's __setattr__
    # ("super(type, obj): obj must be an instance or subtype of type"), an interpreter bug.
    name="kimi-cli", version="1.51.0", sdk="0.8.0", python="3.13",
    argv=("kimi", "acp"),
    tool_name="WriteFile",
    tool_args=lambda project: {"path": str(project / "notes.txt"), "content": "written by the agent\n"},
    configure=_kimi_home,
    written=lambda project: project / "notes.txt",
    # new_session sends the command list from asyncio.create_task: it lands before or after the
    # client's next request, as the two tasks happen to run.
    detached_updates=frozenset({"available_commands_update"}),
    sent_after_open=(("session/new", "available_commands_update"),),
)


def _vibe_home(home: Path, port: int) -> dict[str, str]:
    vibe = home / ".vibe"
    vibe.mkdir(parents=True, exist_ok=True)
    (vibe / "config.toml").write_text(f"""\
active_model = "fake"
default_agent = "ask"
enable_telemetry = false
enable_update_checks = false
enable_auto_update = false
enable_notifications = false
enable_mcp = false
enable_connectors = false

[[providers]]
name = "fake"
api_base = "http://127.0.0.1:{port}/v1"
api_key_env_var = "FAKE_MODEL_API_KEY"
backend = "generic"

[[models]]
name = "fake-model"
provider = "fake"
alias = "fake"
""")
    # The automatic session title is one more model request from a background task; off, so
    # the model sees the same requests in the same order on both runtimes.
    return {"VIBE_HOME": str(vibe), "FAKE_MODEL_API_KEY": "offline", "VIBE_TEST_DISABLE_AUTO_TITLE": "1"}


VIBE = RealAgent(
    name="mistral-vibe", version="3.0.2", sdk="0.11.0", python="3.13",
    argv=("vibe-acp",),
    tool_name="write_file",
    tool_args=lambda project: {"path": str(project / "notes.txt"), "content": "written by the agent\n"},
    configure=_vibe_home,
    written=lambda project: project / "notes.txt",
    # _send_usage_update spawns a task per update (session.spawn): on the SDK's own runtime two
    # runs of this session differ in how many usage_update lines follow a cancel and whether they
    # come before or after the answer. The command list is sent from a spawned task after a
    # 0.1 s sleep, before or after the session/new answer as the clock falls.
    detached_updates=frozenset({"usage_update", "available_commands_update"}),
    sent_after_open=(("session/new", "available_commands_update"), ("session/load", "available_commands_update")),
)

AGENTS = [KIMI, VIBE]
