"""Normalising and diffing two transcripts of the same scripted session.

What must differ between two runs of the same agent is replaced by placeholders, and only that:
ids the agent generates (UUIDs, ``assistant-<uuid>`` message ids, tool call ids) numbered in
order of first appearance, wall-clock times and durations, the run's temp paths. Everything else,
including the order of every line the client read, is compared as is; a difference the runtime
is allowed to make is one of ``ALLOWED`` (each a row of docs/MIGRATION.md's table of real-agent
differences).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
_HEX_ID = re.compile(r"\b(tool|call|toolu|chatcmpl)[-_][0-9a-zA-Z]{6,}\b")
# The fake model's story words: how many reach the client before a cancel stops them varies.
_STORY = re.compile(r"(?:\bw\d+ )+")
STORY = "<story> "
# Keys whose values are clocks or rates, different on every run of the same agent.
CLOCK_KEYS = frozenset({"tokensPerSecond", "lastTurnDuration", "updatedAt", "createdAt", "timestamp", "duration",
                        "durationMs", "elapsed", "startedAt", "endedAt"})


class Normaliser:
    def __init__(self, paths: dict[str, str]) -> None:
        # Longest first, so a path inside another is replaced by its own name.
        self.paths = sorted(paths.items(), key=lambda kv: -len(kv[0]))
        self.ids: dict[str, str] = {}

    def _id(self, raw: str) -> str:
        return self.ids.setdefault(raw, f"<id{len(self.ids) + 1}>")

    def text(self, s: str) -> str:
        for path, name in self.paths:
            s = s.replace(path, name)
        s = _UUID.sub(lambda m: self._id(m.group(0).lower()), s)
        s = _HEX_ID.sub(lambda m: self._id(m.group(0)), s)
        s = _STORY.sub(STORY, s)
        return _TIME.sub("<time>", s)

    def value(self, v: Any, key: str | None = None) -> Any:
        if key in CLOCK_KEYS and v is not None:
            return "<clock>"
        if isinstance(v, dict):
            return {k: self.value(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        return v


Entry = tuple[str, Any]  # (">" written by the client | "<" read | "<text" a non-JSON line read, message)


def normalise(result: dict[str, Any]) -> list[list[Entry]]:
    """Per agent process, every message in order with placeholders for what must differ."""
    n = Normaliser({result["project"]: "<project>", result["home"]: "<home>", result["work"]: "<work>"})
    marks = {"out": ">", "in": "<", "text": "<text"}
    return [[(marks[direction], n.value(msg)) for direction, msg in log] for log in result["processes"]]


def update_kind(entry: Entry) -> str | None:
    mark, msg = entry
    if mark != "<" or msg.get("method") != "session/update":
        return None
    kind = msg["params"]["update"].get("sessionUpdate")
    return kind if isinstance(kind, str) else None


def detach(entries: list[Entry], kinds: frozenset[str]) -> list[Entry]:
    """``session/update`` kinds the agent sends from tasks it detaches (fire-and-forget): how many
    it sends and where they land among the other lines varies between two runs on the SDK's own
    runtime, so they leave the ordered comparison and only the last of each kind is compared, at
    the end."""
    kept = [e for e in entries if update_kind(e) not in kinds]
    last = {}
    for e in entries:
        kind = update_kind(e)
        if kind in kinds:
            last[kind] = e
    return kept + [("<last", last[k][1]) for k in sorted(last)]


def _is_story_chunk(entry: Entry) -> bool:
    msg = entry[1]
    if update_kind(entry) != "agent_message_chunk":
        return False
    content = msg["params"]["update"].get("content")
    return isinstance(content, dict) and content.get("text") == STORY


def _is_cancel(entry: Entry) -> bool:
    mark, msg = entry
    return mark == ">" and msg.get("method") == "session/cancel"


def collapse_story(entries: list[Entry]) -> list[Entry]:
    """A run of story chunks, equal once normalised, as one line: the words are compared, their
    number is not, nor whether some were still on their way when the client sent its cancel.
    A chunk with another message id (a new message) starts a line of its own."""
    out: list[Entry] = []
    for e in entries:
        if _is_story_chunk(e):
            before = [x for x in out[-2:] if not _is_cancel(x)]
            if before and before[-1] == e:
                continue
        out.append(e)
    return out


@dataclass(frozen=True)
class Allowed:
    """A difference the runtime may make: ``apply`` rewrites a normalised transcript (of either
    runtime) so that this difference, and only it, disappears. ``row`` names its row in
    docs/MIGRATION.md's table of real-agent differences."""

    row: str
    apply: Callable[[list[Entry]], list[Entry]]


def _renumber_agent_requests(entries: list[Entry]) -> list[Entry]:
    ids: dict[Any, str] = {}
    out: list[Entry] = []
    for mark, msg in entries:
        agent_request = mark == "<" and "method" in msg
        client_answer = mark == ">" and "method" not in msg
        if isinstance(msg, dict) and "id" in msg and (agent_request or client_answer):
            msg = {**msg, "id": ids.setdefault(msg["id"], f"<agent-request-{len(ids) + 1}>")}
        out.append((mark, msg))
    return out


ALLOWED: list[Allowed] = [
    Allowed("The ids of the agent's requests to the client", _renumber_agent_requests),
]


def diff(sdk: dict[str, Any], compat: dict[str, Any], detached: frozenset[str] = frozenset(),
         allowed: list[Allowed] | None = None) -> list[str]:
    """The unified diff of the two normalised transcripts, process by process (empty: the same)."""
    rules = ALLOWED if allowed is None else allowed
    a, b = normalise(sdk), normalise(compat)
    lines: list[str] = []
    if len(a) != len(b):
        lines.append(f"the SDK run started {len(a)} agent processes, the compat run {len(b)}")
    for i, (pa, pb) in enumerate(zip(a, b, strict=False)):
        pa, pb = collapse_story(detach(pa, detached)), collapse_story(detach(pb, detached))
        for rule in rules:
            pa, pb = rule.apply(pa), rule.apply(pb)
        la = [f"{m} {json.dumps(x, sort_keys=True)}" for m, x in pa]
        lb = [f"{m} {json.dumps(x, sort_keys=True)}" for m, x in pb]
        lines.extend(difflib.unified_diff(la, lb, f"sdk/process-{i + 1}", f"compat/process-{i + 1}", lineterm="", n=2))
    return lines
