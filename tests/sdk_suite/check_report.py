"""Fail the SDK-suite run when an agent-driving test fails that is not a documented exception.

The exceptions are SDK behaviours acp_fast deliberately does not copy (see
docs/MIGRATION.md, "The SDK's own test suite"); each maps a test id to why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: test id -> the reason it is allowed to fail on acp_fast (empty: none).
EXCEPTIONS: dict[str, str] = {
    "tests/test_rpc.py::test_ignore_invalid_messages": (
        "pins silence for an object that is neither request, notification nor response; JSON-RPC 2.0 "
        "requires an Invalid Request error with id null, which acp_fast sends (-32600) and keeps serving"
    ),
}


def main(report_path: str, suite_dir: str) -> int:
    """Re-run each undocumented failure once, alone: some of the SDK's tests give a spawned agent
    a 2 s budget, which a loaded CI machine can miss; a test that fails twice fails the run."""
    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    if report["mode"] != "compat":
        return 0
    unexpected = sorted(t for t in report["failed"] if t not in EXCEPTIONS)
    still_failing = []
    for test in unexpected:
        again = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "30", test],
            cwd=suite_dir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if again.returncode == 0:
            print(f"passed when re-run alone (failed in the full run): {test}")
        else:
            print(f"unexpected failure on acp_fast (twice): {test}")
            still_failing.append(test)
    return 1 if still_failing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
