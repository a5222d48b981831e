"""What ``acp-fast bench`` runs: the built-in targets and any ``--agent`` command.

The floor and the SDK peer agent ship next to this module and are started as
scripts with ``python -P``, so they import nothing of acp_fast (the floor
stays the least a Python process can do) and the modules of this directory
cannot shadow the names they import.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...extras import install_hint

#: Directory of the floor agent and the SDK peer agent, inside the installed package.
AGENTS_DIR = Path(__file__).resolve().parent
FLOOR_SCRIPT = AGENTS_DIR / "echo_floor.py"
SDK_SCRIPT = AGENTS_DIR / "sdk_demo_agent.py"
BUILTIN = ("acp_fast", "sdk", "floor")
#: The name of the handshake row for a bare interpreter start; no target may take it.
BARE = "bare"
BARE_IMPORTS = "import asyncio, uvloop, orjson"
SDK_EXTRA_HINT = install_hint("bench")
#: The row of acp_fast's framework-only session/new: the demo without its start announcement (quiet_demo.py).
NO_HOOK_SCENARIO = "sessions_per_s_no_hook"
QUIET_DEMO_AGENT = "acp_fast.tools.bench.quiet_demo:QuietDemoAgent"


@dataclass(frozen=True)
class Target:
    name: str
    argv: tuple[str, ...]
    description: str
    external: bool = False


def builtin_targets(python: str, sdk_uvloop: bool = False) -> dict[str, Target]:
    sdk = (python, "-P", str(SDK_SCRIPT), *(["--uvloop"] if sdk_uvloop else []))
    return {
        "acp_fast": Target(
            "acp_fast", (python, "-m", "acp_fast", "demo"), "acp_fast demo agent (python -m acp_fast demo)"
        ),
        "sdk": Target("sdk", sdk, "same logic on the official SDK (acp_fast/tools/bench/sdk_demo_agent.py)"),
        "floor": Target(
            "floor", (python, "-P", str(FLOOR_SCRIPT)), "uvloop+orjson echo (acp_fast/tools/bench/echo_floor.py)"
        ),
    }


def quiet_demo_target(python: str) -> Target:
    """The demo agent without its session-start announcement, started the way ``acp-fast demo`` is."""
    return Target(
        "acp_fast_quiet",
        (python, "-m", "acp_fast", "serve", QUIET_DEMO_AGENT),
        f"acp_fast demo without its start hook (python -m acp_fast serve {QUIET_DEMO_AGENT})",
    )


def sdk_missing() -> str | None:
    """Why the SDK target cannot run here, or None when it can."""
    if importlib.util.find_spec("acp") is None:
        return f"the official SDK (agent-client-protocol) is not installed; {SDK_EXTRA_HINT}"
    return None


class TargetError(ValueError):
    """The command line names targets that cannot be built."""


def select_targets(
    wanted: Sequence[str],
    agents: Sequence[tuple[str, str | None]],
    *,
    python: str = sys.executable,
    sdk_uvloop: bool = False,
    skipped: list[str] | None = None,
) -> list[Target]:
    """Built-in targets named in ``wanted``, then one per ``--agent`` (command, label or None).

    A built-in target that cannot run here (the SDK without its extra) is left
    out and its reason appended to ``skipped``, so the caller prints it once.
    """
    known = builtin_targets(python, sdk_uvloop)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise TargetError(f"unknown target(s) {unknown}; choose from {sorted(known)}")
    out: list[Target] = []
    for name in dict.fromkeys(wanted):
        why = sdk_missing() if name == "sdk" else None
        if why is not None:
            if skipped is not None:
                skipped.append(f"sdk target skipped: {why}")
            continue
        out.append(known[name])
    for i, (command, given) in enumerate(agents):
        argv = tuple(shlex.split(command))
        if not argv:
            raise TargetError(f"--agent {command!r} is an empty command")
        label = given if given is not None else f"agent{i + 1}"
        if label in {t.name for t in out} or label == BARE or not label.strip() or "|" in label:
            raise TargetError(f"--label {label!r} is taken or not usable as a column name")
        out.append(Target(label, argv, command, external=True))
    return out
