"""The SDK's example agents, with only their ``run_agent`` import changed, against its example client.

``examples/echo_agent.py`` and ``examples/agent.py`` run once as shipped and once
with ``from acp_fast.compat import run_agent`` in place of the SDK's, each driven
by the SDK's ``examples/client.py`` with the same console input; the client's
output must be the same. The console prompt ("> ") is dropped before comparing,
since when it is printed relative to an update is up to the client's own tasks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CONSOLE_INPUT = "hello there\nsecond line\n"
EXAMPLES = ("echo_agent.py", "agent.py")


def with_compat_import(source: str) -> str:
    """Drop ``run_agent`` from the ``from acp import (...)`` block and import compat's instead."""
    block = re.search(r"^from acp import \((.*?)^\)\n", source, flags=re.M | re.S)
    assert block is not None and re.search(r"^\s*run_agent,\n", block.group(1), flags=re.M), "unexpected example"
    names = re.sub(r"^\s*run_agent,\n", "", block.group(1), count=1, flags=re.M)
    replacement = f"from acp import ({names})\nfrom acp_fast.compat import run_agent\n"
    return source[: block.start()] + replacement + source[block.end() :]


def client_output(src: Path, agent: Path, workdir: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_FAST_SDK_SUITE") and k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(src / "examples" / "client.py"), str(agent)],
        input=CONSOLE_INPUT,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workdir,
        env=env,
        check=False,
    )
    lines = [line.replace("> ", "").strip() for line in done.stdout.splitlines()]
    return [f"exit {done.returncode}", *(line for line in lines if line)]


def main(src_dir: str) -> int:
    src = Path(src_dir).resolve()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for name in EXAMPLES:
            shipped = src / "examples" / name
            changed = workdir / f"compat_{name}"
            changed.write_text(with_compat_import(shipped.read_text(encoding="utf-8")), encoding="utf-8")
            on_sdk = client_output(src, shipped, workdir)
            on_acp_fast = client_output(src, changed, workdir)
            same = on_sdk == on_acp_fast and len(on_sdk) > 1
            print(f"examples/{name}: {'same output' if same else 'DIFFERENT output'} ({len(on_sdk) - 1} lines)")
            if not same:
                failed += 1
                print("  SDK:      ", on_sdk, "\n  acp_fast: ", on_acp_fast)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
