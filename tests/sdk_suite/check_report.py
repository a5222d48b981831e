"""Fail the SDK-suite run when an agent-driving test fails that is not a documented exception.

The exceptions are SDK behaviours acp_fast deliberately does not copy (see
docs/MIGRATION.md, "The SDK's own test suite"); each maps a test id to why,
for every release or for the releases whose suite has that test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: test id -> the reason it is allowed to fail on acp_fast, for every release.
EXCEPTIONS: dict[str, str] = {
    "tests/test_rpc.py::test_ignore_invalid_messages": (
        "pins silence for an object that is neither request, notification nor response; JSON-RPC 2.0 "
        "requires an Invalid Request error with id null, which acp_fast sends (-32600) and keeps serving"
    ),
}

_PROMPT_CANCELLED = (
    "pins -32800 for a session/prompt cancelled by $/cancel_request; acp_fast answers a cancelled prompt "
    'with {"stopReason": "cancelled"} however it was cancelled (R10, R12), as ACP asks of a cancelled turn'
)
_CLOSE_ANSWERS = (
    "pins that close() leaves an in-flight request unanswered; acp_fast answers every request exactly once "
    "(R04), also the ones shutdown cancels (R13, R14)"
)

#: Release prefix -> more exceptions, for the tests only that release's suite has.
RELEASE_EXCEPTIONS: dict[str, dict[str, str]] = {
    "1.": {
        **{
            f"tests/test_request_cancellation.py::{test}[{rid}]": _PROMPT_CANCELLED
            for test, ids in (
                ("test_cancel_request_cancels_handler_and_replies_request_cancelled", ("7", "req-7")),
                ("test_cancel_request_before_the_handler_starts_still_replies", ("0", "req-0")),
            )
            for rid in ids
        },
        "tests/test_request_cancellation.py::test_cancel_request_before_the_handler_starts_still_replies[None]": (
            "sends a request with id null; acp_fast answers it -32600 (an id must be a string or a number to be "
            "paired with its answer) and keeps serving"
        ),
        "tests/test_request_cancellation.py::test_internally_cancelled_handler_replies_request_cancelled": (
            "pins -32800 for a handler whose own inner task was cancelled; no cancel was asked for, so acp_fast "
            "reports the handler's failure as -32603 (R24)"
        ),
        "tests/test_request_cancellation.py::test_close_does_not_reply_to_in_flight_requests": _CLOSE_ANSWERS,
        "tests/http/test_fixes.py::test_interrupted_initialize_cleans_up_agent[True]": _CLOSE_ANSWERS,
        **dict.fromkeys(
            (
                "tests/test_protocol_negotiation.py::test_agent_protocol_router_selects_v1",
                "tests/test_protocol_negotiation.py::test_agent_protocol_router_normalizes_v2_initialize_for_v1",
                "tests/http/test_v2_loopback.py::test_dual_stack_http_serves_v1_and_v2",
            ),
            "acp.experimental's v1/v2 negotiation router attaches the v1 agent to the SDK's own Connection "
            "(AgentSideConnection.attach); compat serves on acp_fast's connection and has no attach",
        ),
        "tests/http/test_websocket.py::test_asgi_websocket_cleans_up_running_prompt[False]": (
            "cancels the task running listen() and expects it to return; the SDK's receive loop swallows the "
            "cancellation, compat's listen() lets it propagate as asyncio code expects (the prompt is still "
            "cancelled and its cleanup runs)"
        ),
    },
}


#: Tests whose only failure seen on compat is a wall-clock budget of the SDK's own: reported by name
#: when they miss it twice, never counted as a behaviour difference (docs/MIGRATION.md says why).
TIMING: dict[str, str] = {
    "tests/real_user/test_stdio_limits.py::test_run_agent_stdio_buffer_limit": (
        "gives a spawned agent 2 s for its whole start-up; the SDK's own imports take 1.1-2.1 s on a loaded "
        "2-core machine and compat adds about 0.25 s of acp_fast's; acp_fast's long-line handling is R25's tests"
    ),
}


def exceptions_for(release: str) -> dict[str, str]:
    """The documented exceptions of one SDK release's suite."""
    found = dict(EXCEPTIONS)
    for prefix, more in RELEASE_EXCEPTIONS.items():
        if release.startswith(prefix):
            found.update(more)
    return found


def main(report_path: str, suite_dir: str, release: str) -> int:
    """Re-run each undocumented failure once, alone: some of the SDK's tests give a spawned agent
    a 2 s budget, which a loaded CI machine can miss; a test that fails twice fails the run."""
    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    if report["mode"] != "compat":
        return 0
    documented = exceptions_for(release)
    unexpected = sorted(t for t in report["failed"] if t not in documented)
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
        elif test in TIMING:
            print(f"missed its time budget twice, not counted: {test} ({TIMING[test]})")
        else:
            print(f"unexpected failure on acp_fast (twice): {test}")
            still_failing.append(test)
    return 1 if still_failing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
