"""What a target can do, found out before it is measured, with a short timeout on every step.

The bench needs four pieces of an agent (benchmarks/README.md, "Test
protocol"): a session (``initialize`` then ``session/new``), a cheap request
(``session/set_mode`` with a mode from the ``session/new`` result, else an
``_echo`` extension request), a streaming prompt (``stream N DELAY_MS``) and
``session/cancel`` of a running prompt. One throwaway process tries each; a
piece that errors, answers wrongly or stays silent past the probe timeout
is recorded with the reason, and every scenario that needs it is reported
"unsupported" instead of run, so no agent can crash or hang the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .process import EXIT_TIMEOUT_S, AgentProcess, BenchError, describe, log, prompt_params
from .targets import Target

#: Seconds each probe step may take (``--probe-timeout``).
PROBE_TIMEOUT_S = 10.0
#: Updates asked of the probing prompt (``stream 3 0``).
PROBE_CHUNKS = 3
#: Effectively endless prompt length; such prompts always end by cancel.
ENDLESS = 1_000_000_000
#: Chunk period of the "long prompt" that the cancel and control rounds run beside.
LONG_PROMPT_DELAY_MS = 5

INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}
NEW_SESSION = {"cwd": "/tmp", "mcpServers": []}
ECHO_METHOD = "_echo"
SET_MODE = "session/set_mode"

SESSION, CHEAP, STREAM, CANCEL = "session", "cheap request", "streaming prompt", "cancel"
#: The pieces each scenario needs; a scenario runs only when its target has all of them.
NEEDS: dict[str, tuple[str, ...]] = {
    "handshake": (SESSION,),
    "cancel_idle": (SESSION, STREAM, CANCEL),
    "control_idle": (SESSION, CHEAP, STREAM, CANCEL),
    "requests_per_s": (SESSION, CHEAP),
    "sessions_per_s": (SESSION,),
    "updates_per_s_1": (SESSION, STREAM),
    "updates_per_s_32": (SESSION, STREAM),
    "cancel_busy": (SESSION, STREAM, CANCEL),
    "control_busy": (SESSION, CHEAP, STREAM, CANCEL),
    "memory": (SESSION, STREAM, CANCEL),
}


@dataclass
class Support:
    """The pieces a target lacks (piece -> reason) and the modes its cheap request switches between."""

    lacking: dict[str, str] = field(default_factory=dict)
    modes: tuple[str, ...] = ()

    def lack(self, piece: str, reason: str) -> None:
        self.lacking.setdefault(piece, reason)

    def has(self, piece: str) -> bool:
        return piece not in self.lacking

    def why_not(self, scenario: str) -> str | None:
        """None when ``scenario`` can run, else the first missing piece and why."""
        for piece in NEEDS[scenario]:
            if piece in self.lacking:
                return f"no {piece}: {self.lacking[piece]}"
        return None

    @property
    def cheap_method(self) -> str:
        return SET_MODE if self.modes else ECHO_METHOD

    def cheap_params(self, session_id: str, i: int) -> dict[str, Any]:
        if self.modes:
            return {"sessionId": session_id, "modeId": self.modes[i % len(self.modes)]}
        return {"sessionId": session_id}


def modes_of(new_session_result: dict[str, Any]) -> tuple[str, ...]:
    """Up to two mode ids offered by a ``session/new`` result, the current one last."""
    modes = new_session_result.get("modes")
    if not isinstance(modes, dict):
        return ()
    ids = [m["id"] for m in modes.get("availableModes") or () if isinstance(m, dict) and isinstance(m.get("id"), str)]
    current = modes.get("currentModeId")
    others = [i for i in ids if i != current]
    return tuple(others[:1] + ([current] if current in ids else others[1:2]))


def _short(exc: BenchError, name: str) -> str:
    """The first line of a failure, without the target's name (the report shows it) or the stderr tail."""
    text = str(exc).split("; stderr tail:")[0].splitlines()[0]
    return text.removeprefix(f"{name}: ")


async def probe(target: Target, step_s: float = PROBE_TIMEOUT_S) -> Support:
    """Try each piece once in a fresh process of ``target``, each wait at most ``step_s`` seconds."""
    sup = Support()
    a = AgentProcess(target, step_s)
    try:
        await a.start()
    except BenchError as exc:
        for piece in (SESSION, CHEAP, STREAM, CANCEL):
            sup.lack(piece, _short(exc, target.name))
    else:
        stuck = True
        try:
            stuck = await _probe_pieces(a, sup)
        finally:
            await a.close(grace=0.0 if stuck else EXIT_TIMEOUT_S)
    reasons: dict[str, list[str]] = {}
    for piece, why in sup.lacking.items():
        reasons.setdefault(why, []).append(piece)
    for why, pieces in reasons.items():
        log(f"{target.name}: no {', no '.join(pieces)}: {why}")
    return sup


async def _probe_pieces(a: AgentProcess, sup: Support) -> bool:
    """Fill ``sup``; True when the agent was left with a request unanswered (kill it, do not wait)."""
    try:
        await a.result("initialize", INITIALIZE)
        new = await a.result("session/new", NEW_SESSION)
        if not isinstance(new, dict) or not isinstance(new.get("sessionId"), str):
            raise BenchError(f"session/new answered without a sessionId: {new!r}"[:200])
    except BenchError as exc:
        for piece in (SESSION, CHEAP, STREAM, CANCEL):
            sup.lack(piece, _short(exc, a.target.name))
        return True
    sid: str = new["sessionId"]
    sup.modes = modes_of(new)
    stuck = False
    try:
        _, msg = await a.request(sup.cheap_method, sup.cheap_params(sid, 0))
        if "result" not in msg:
            sup.lack(CHEAP, f"{sup.cheap_method} answered {describe(msg)}")
    except BenchError as exc:
        sup.lack(CHEAP, _short(exc, a.target.name))
        stuck = True
    try:
        base = a.updates
        text = f"stream {PROBE_CHUNKS} 0"
        _, fut = a.start_request("session/prompt", prompt_params(sid, text))
        _, msg = await a.wait(fut, f"session/prompt {text!r}")
        got = a.updates - base
        stop = msg.get("result", {}).get("stopReason") if isinstance(msg.get("result"), dict) else None
        if stop != "end_turn" or got < PROBE_CHUNKS:
            sup.lack(STREAM, f"{text!r} answered {describe(msg)} after {got} session/update")
    except BenchError as exc:
        sup.lack(STREAM, _short(exc, a.target.name))
        stuck = True
    if not sup.has(STREAM):
        sup.lack(CANCEL, "needs a streaming prompt to cancel")
        return stuck
    try:
        seen = a.watch(sid)
        _, fut = a.start_request("session/prompt", prompt_params(sid, f"stream {ENDLESS} {LONG_PROMPT_DELAY_MS}"))
        await a.streaming(seen, fut)
        a.notify("session/cancel", {"sessionId": sid})
        _, msg = await a.wait(fut, "the cancelled prompt's response")
        stop = msg.get("result", {}).get("stopReason") if isinstance(msg.get("result"), dict) else None
        if stop != "cancelled":
            sup.lack(CANCEL, f"the cancelled prompt answered {describe(msg)}")
    except BenchError as exc:
        sup.lack(CANCEL, _short(exc, a.target.name))
        stuck = True
    return stuck
