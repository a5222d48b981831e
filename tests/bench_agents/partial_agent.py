"""A deliberately partial ACP agent for testing ``acp-fast bench --agent``.

    python partial_agent.py reject          # initialize and session/new; -32601 for every other request
    python partial_agent.py silent-prompt   # also session/set_mode (two modes); never answers session/prompt
    python partial_agent.py tires           # like silent-prompt, but answers only the first 3 session/set_mode

Blocking stdlib I/O and nothing else, so it can stand for any agent the
bench knows nothing about. It exits at end of input.
"""

from __future__ import annotations

import json
import sys


def main(kind: str) -> None:
    sessions = 0
    set_modes = 0
    with_modes = kind in ("silent-prompt", "tires")
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue  # notifications (session/cancel) are ignored
        method = msg.get("method")
        result: object = None
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            sessions += 1
            result = {"sessionId": f"partial-{sessions}"}
            if with_modes:
                result["modes"] = {
                    "currentModeId": "a",
                    "availableModes": [{"id": "a", "name": "A"}, {"id": "b", "name": "B"}],
                }
        elif method == "session/set_mode" and with_modes:
            set_modes += 1
            if kind == "tires" and set_modes > 3:
                continue  # silent from now on
            result = {}
        elif method == "session/prompt" and with_modes:
            continue  # never answered
        if result is None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
