"""What ``acp-fast client`` prints of a turn: text as it streams, every other update as one short line."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ...client.connection import Params


class Renderer:
    """Prints updates as they stream: text as text, everything else as one short line."""

    def __init__(self, out: TextIO, quiet: bool, on_gone: Callable[[], None] | None = None) -> None:
        self.out = out
        #: Called when ``out`` was closed by its reader (``| head``); by default the error propagates.
        self.on_gone = on_gone
        self.quiet = quiet
        self.dim = out.isatty() and os.environ.get("NO_COLOR") is None
        self._open: str | None = None  # "text" or "thought" while a stream of chunks is mid-line
        self._message: object = None  # the messageId of the user message being printed
        #: A question waiting for its answer on the terminal ("choose 1-2: "), its cursor mid-line:
        #: whatever prints first meanwhile starts on a line of its own. It is not asked again below:
        #: the answer may already be typed (and echoed) while the update arrives.
        self.question: str | None = None
        self._question_shown = True

    def _write(self, text: str) -> None:
        if self.quiet:
            return
        if self.question is not None and self._question_shown:
            self._question_shown = False
            text = "\n" + text
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            if self.on_gone is None:
                raise
            self.on_gone()

    def end_line(self) -> None:
        if self._open is not None:
            self._open = None
            self._write("\n")

    def line(self, text: str) -> None:
        if self.quiet:
            return
        self.end_line()
        self._write(text + "\n")

    def ask(self, question: str) -> None:
        """Show ``question`` (on stderr, left mid-line for the answer) until :meth:`answered`."""
        self.end_line()
        self.question, self._question_shown = question, True
        sys.stderr.write(question)
        sys.stderr.flush()

    def answered(self) -> None:
        self.question = None

    def update(self, update: Params) -> None:
        if self.quiet:
            return
        kind = update.get("sessionUpdate")
        content = update.get("content")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            text = _block_text(content)
            mode = {"agent_message_chunk": "text", "agent_thought_chunk": "thought"}.get(str(kind), "user")
            if mode == "user" and self._open == "user" and self._new_user_message(update.get("messageId")):
                self.end_line()  # another past prompt: a turn of its own, not glued to the last
            if mode != self._open:
                self.end_line()
                self._open = mode
                if mode == "thought" and not self.dim:
                    self._write("(thinking) ")
                elif mode == "user":
                    self._write("> ")
            if mode == "thought" and self.dim:
                text = f"\x1b[2m{text}\x1b[0m"
            self._write(text)
            if mode == "user":
                self._message = update.get("messageId")
        elif kind == "tool_call":
            status = update.get("status") or "pending"
            self.line(f"[tool] {update.get('title', '?')} ({update.get('kind') or 'other'}, {status})")
        elif kind == "tool_call_update":
            extra = f" {update['title']}" if isinstance(update.get("title"), str) else ""
            status = update.get("status") or "updated"
            self.line(f"[tool] {update.get('toolCallId', '?')}{extra}: {status}")
        elif kind == "plan":
            entries = update.get("entries") or []
            done = sum(1 for e in entries if isinstance(e, dict) and e.get("status") == "completed")
            steps = "; ".join(
                f"{e.get('content', '?')} ({e.get('status', '?')})" for e in entries if isinstance(e, dict)
            )
            self.line(f"[plan] {done}/{len(entries)} done: {steps}")
        elif kind == "available_commands_update":
            names = [c.get("name", "?") for c in update.get("availableCommands") or [] if isinstance(c, dict)]
            self.line(f"[commands] {', '.join(names) or '(none)'}")
        elif kind == "current_mode_update":
            self.line(f"[mode] {update.get('currentModeId')}")
        elif kind == "session_info_update" and update.get("title"):
            self.line(f"[session] title: {update.get('title')}")
        else:
            self.line(f"[{kind}]")


    def _new_user_message(self, message_id: object) -> bool:
        """Chunks of one message share a messageId; without one, each user chunk is a prompt of its own
        (a prompt is sent whole, so the chunks in a replay are the past prompts)."""
        return message_id is None or message_id != self._message


def _block_text(content: Any) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        return f"[{content.get('type', '?')}]"
    return ""


__all__ = ["Renderer"]
