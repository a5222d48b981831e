"""Lines typed to ``acp-fast client``, read off the event loop.

At a terminal, with the standard library's ``readline`` present, the prompt line is edited by
readline (arrows, history, Ctrl-R), one ``input()`` call per prompt in a thread of its own, so
the loop never blocks. Readline is chosen over a library such as prompt_toolkit: it is part of
Python wherever a terminal is, costs no dependency, and gives editing and history; the console
needs nothing more of its prompt. While a turn runs, nobody edits: the loop itself reads the
terminal, in its usual line mode, so that Ctrl-D (the end of input) ends the console at once and a
permission answer is an ordinary line. Anything else (a pipe, a file, no readline) is read as raw
lines by a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import threading
from collections.abc import Iterator
from types import ModuleType

#: What the readline binding of Ctrl-C returns: the line typed so far is dropped, the prompt starts afresh.
DROPPED = "\x03"


def _readline() -> ModuleType | None:
    """GNU readline, when stdin and stdout are a terminal (libedit binds keys differently: not used)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None
    try:
        import readline
    except ImportError:
        return None
    if "libedit" in (readline.__doc__ or ""):
        return None
    # Ctrl-C at the prompt: clear the line, show ^C (a quoted literal) and accept it, so that
    # input() returns DROPPED; the tty does not turn it into SIGINT while the prompt is read.
    readline.parse_and_bind(r'"\C-c": "\C-e\C-u\C-v\C-c\C-m"')
    return readline


class LineSource:
    """Prompt lines (edited at a terminal), permission answers and the end of input."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._started = False
        self.eof = False
        #: Set once the input has ended (Ctrl-D at a terminal): the console ends, a running turn first.
        self.ended = asyncio.Event()
        self._readline = _readline()
        self._saved = termios.tcgetattr(0) if self._readline is not None else None
        self._editing: asyncio.Future[str | None] | None = None
        self._watching = False
        self._partial = b""

    @property
    def edits(self) -> bool:
        """True when the prompt line is edited by readline (which then draws the prompt itself)."""
        return self._readline is not None

    # -- raw lines (a pipe, or no readline) ---------------------------------------------------------
    def _read(self) -> None:
        # os.read, not sys.stdin: a thread blocked inside the buffered reader holds its lock, and
        # the interpreter's exit would then abort on it.
        pending = b""
        while True:
            try:
                chunk = os.read(0, 65536)
            except OSError:
                chunk = b""
            try:
                if not chunk:
                    if pending:
                        self._put(pending)
                    self._loop.call_soon_threadsafe(self._end)
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._put(line)
            except RuntimeError:  # the console ended (its loop is closed) while we read
                return

    def _put(self, raw: bytes) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, raw.decode("utf-8", "replace").rstrip("\r"))

    def _end(self) -> None:
        self._queue.put_nowait(None)
        self.ended.set()

    # -- the edited prompt --------------------------------------------------------------------------
    def _edit(self, prompt: str, done: asyncio.Future[str | None]) -> None:
        readline = self._readline
        assert readline is not None
        line: str | None
        try:
            with _no_interrupt_key():
                line = input(prompt)
        except EOFError:
            line = None
        except Exception:  # the terminal went away
            line = None
        if line == DROPPED:
            readline.remove_history_item(readline.get_current_history_length() - 1)
            line = ""
        with contextlib.suppress(RuntimeError):  # the loop closed while we read
            self._loop.call_soon_threadsafe(_settle, done, line)

    # -- the terminal while a turn runs ---------------------------------------------------------------
    def watch(self) -> None:
        """While a turn runs: read the terminal on the loop (line mode, Ctrl-C a signal, Ctrl-D the end)."""
        if self._readline is None or self._watching or self.eof or self._editing is not None:
            return
        self._watching = True
        self._loop.add_reader(0, self._readable)

    def unwatch(self) -> None:
        """The turn ended: the next prompt is edited again, starting with what was typed meanwhile."""
        if not self._watching:
            return
        self._watching = False
        self._loop.remove_reader(0)
        if self._partial and self._readline is not None:
            text, self._partial = self._partial.decode("utf-8", "replace"), b""
            readline = self._readline

            def prefill() -> None:
                readline.insert_text(text)
                readline.redisplay()
                readline.set_pre_input_hook(None)

            readline.set_pre_input_hook(prefill)

    def _readable(self) -> None:
        try:
            chunk = os.read(0, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.unwatch()
            self._end()
            return
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        for line in lines:
            self._queue.put_nowait(line.decode("utf-8", "replace").rstrip("\r"))

    # -- the console's side ---------------------------------------------------------------------------
    async def get(self, prompt: str = "") -> str | None:
        """The next line, or None at end of input; ``prompt`` is drawn by readline when it edits."""
        if self.eof:
            return None
        if self._readline is not None and self._queue.empty() and not self._watching:
            if self._editing is None:
                self._editing = self._loop.create_future()
                threading.Thread(
                    target=self._edit, args=(prompt, self._editing), name="acp-fast-client-prompt", daemon=True
                ).start()
            line = await asyncio.shield(self._editing)
            self._editing = None
            if line is None:
                self._end()
                self._queue.get_nowait()
        else:
            if self._readline is None and not self._started:
                self._started = True
                threading.Thread(target=self._read, name="acp-fast-client-stdin", daemon=True).start()
            line = await self._queue.get()
        if line is None:
            self.eof = True
        return line

    def close(self) -> None:
        """Give the terminal back as it was (an edit still in progress leaves it raw)."""
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(0, termios.TCSANOW, self._saved)


def _settle(done: asyncio.Future[str | None], line: str | None) -> None:
    if not done.done():
        done.set_result(line)


@contextlib.contextmanager
def _no_interrupt_key() -> Iterator[None]:
    """Ctrl-C reaches readline as a key (bound above) while the prompt is edited, and is SIGINT again after."""
    saved = termios.tcgetattr(0)
    edited = list(saved)
    edited[6] = list(saved[6])
    edited[6][termios.VINTR] = b"\x00"  # _POSIX_VDISABLE on Linux
    termios.tcsetattr(0, termios.TCSANOW, edited)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(0, termios.TCSANOW, saved)


__all__ = ["DROPPED", "LineSource"]
