"""``acp-fast client -- acp-fast demo`` at a real terminal (a pty): line editing and history, Ctrl-D during a
turn, a question and an update on lines of their own, ``/load`` showing past prompts one per line.

Every read is bounded (``Terminal.expect``); the console must end by itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from acp_fast.tools.client.options import EXIT_OK
from tests.test_client_console import ACP_FAST, DEMO, Terminal

UP = "\x1b[A"


def _at_prompt(term: Terminal, keys: str) -> None:
    """Wait for the prompt, then type ``keys``."""
    term.expect(r"> ")
    term.type(keys)


def _ctrl_d_at_prompt_ends(term: Terminal) -> None:
    _at_prompt(term, "\x04")
    assert term.wait() == EXIT_OK


def test_up_arrow_recalls_the_previous_prompt_and_ctrl_c_clears_the_line(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *DEMO], cwd=tmp_path)
    try:
        _at_prompt(term, "stream 2 1\r")
        term.expect(r"chunk 0 chunk 1 \n\[end_turn\]")
        _at_prompt(term, UP + "\r")  # without editing, the agent would get "\x1b[A" as a prompt
        term.expect(r"chunk 0 chunk 1 \n\[end_turn\]")
        _at_prompt(term, "stream 9")
        term.type(UP + UP)  # history: the same prompt, twice in it
        term.type("\r")
        term.expect(r"chunk 0 chunk 1 \n\[end_turn\]")
        _at_prompt(term, "half a line\x03")  # Ctrl-C at the prompt: the line is dropped, a fresh prompt
        term.expect(r"\^C\n> ")
        term.type("stream 1 1\r")
        term.expect(r"chunk 0 \n\[end_turn\]")
        _ctrl_d_at_prompt_ends(term)
        assert "^[[A" not in term.seen, term.seen
    finally:
        term.close()


def test_ctrl_d_during_a_turn_cancels_it_and_ends_at_once(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *DEMO[:-2], "--pace-ms", "50"], cwd=tmp_path)
    try:
        _at_prompt(term, "stream 100000 50\r")  # hours of chunks: only the cancel can end this turn
        term.expect(r"chunk 2 ")
        term.type("\x04")
        term.expect(r"\[end of input: session/cancel sent\]")
        term.expect(r"\[cancelled, answered \d+\.\d ms after the cancel\]")
        assert term.wait() == EXIT_OK
    finally:
        term.close()


def test_a_permission_question_and_an_update_print_on_lines_of_their_own(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *DEMO], cwd=tmp_path)
    try:
        _at_prompt(term, "tool\r")
        term.expect(r"choose 1-2: ")
        term.type("1\r")
        term.expect(r"\[end_turn\]")
        _ctrl_d_at_prompt_ends(term)
        for line in term.seen.splitlines():
            assert not re.search(r"choose 1-2: \S*\[", line), term.seen  # a [tool] or [commands] line glued on
    finally:
        term.close()


def test_load_shows_each_past_prompt_on_a_line_of_its_own(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *DEMO], cwd=tmp_path)
    try:
        for prompt in ("stream 1 1", "stream 2 1"):
            _at_prompt(term, prompt + "\r")
            term.expect(r"\[end_turn\]")
        _at_prompt(term, "/load demo-1\r")
        term.expect(r"> stream 1 1\n> stream 2 1\n")
        term.expect(r"\[session demo-1 loaded\]")
        _ctrl_d_at_prompt_ends(term)
    finally:
        term.close()
