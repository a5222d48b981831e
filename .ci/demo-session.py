"""Drive ``acp-fast demo`` over stdio as a client would: initialize, session/new, prompt.

Stdlib only, so it runs in any fresh venv. Exits non-zero with the reason when an
answer is missing or wrong.
Usage: python demo-session.py [command ...]   (default: acp-fast demo --pace-ms 0)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import IO, Any


def _call(stdin: IO[bytes], stdout: IO[bytes], rid: int, method: str, params: Any) -> tuple[list[Any], Any]:
    """Send one request; return the messages before its answer, and the answer."""
    stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
    stdin.flush()
    before = []
    for raw in stdout:
        msg = json.loads(raw)
        if msg.get("id") == rid and "method" not in msg:
            if "result" not in msg:
                raise SystemExit(f"{method} failed: {msg}")
            return before, msg["result"]
        before.append(msg)
    raise SystemExit(f"the agent closed stdout before answering {method}")


def main() -> int:
    command = sys.argv[1:] or ["acp-fast", "demo", "--pace-ms", "0"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    _, init = _call(stdin, stdout, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    if init.get("protocolVersion") != 1:
        raise SystemExit(f"initialize: {init}")
    _, new = _call(stdin, stdout, 2, "session/new", {"cwd": "/", "mcpServers": []})
    sid = new["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello there"}]}
    before, result = _call(stdin, stdout, 3, "session/prompt", prompt)
    updates = [m for m in before if m.get("method") == "session/update"]
    if result.get("stopReason") != "end_turn" or not updates:
        raise SystemExit(f"prompt: {result} after {len(updates)} update(s)")
    stdin.close()
    rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"{' '.join(command)} exited {rc}")
    print(f"demo: initialize, session/new {sid}, prompt -> end_turn after {len(updates)} update(s), exit 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
