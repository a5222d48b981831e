"""``acp-fast client``: talk to any ACP agent by hand, or from a script.

The console is a thin layer on :class:`ClientSideConnection`: it opens a
link (a spawned process, WebSocket or Streamable HTTP), initializes, opens a
session, then reads prompts. It serves what an agent may ask of a client:
permission (asked on the terminal, or answered by a policy flag), files under
``--root`` only (symlinks and ``..`` resolved before the check), and refuses
terminals (not advertised). Output: the conversation on stdout, the
console's own lines (banner, stop reasons, questions, errors) on stderr; with
``--json`` stdout carries every message instead, one tagged JSON line each.

Expected failures are one line on stderr and an exit status from
:data:`EXIT_CODES`; a traceback means a bug.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

from ..._version import __version__
from ...client.connection import ClientHandler, ClientSession, Params
from ...wire.errors import AcpError, ConnectionClosed, InvalidParams, MethodNotFound, ResourceNotFound
from ...wire.limits import Limits
from .line_source import LineSource
from .links import Link, LinkError, Tap
from .options import (
    EXIT_CANCELLED,
    EXIT_DISCONNECTED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    HELP,
    INSTALL_HINT,
    STOP_EXIT,
    Options,
    Usage,
    parser,
)

# -- output ---------------------------------------------------------------------------------


class Renderer:
    """Prints updates as they stream: text as text, everything else as one short line."""

    def __init__(self, out: TextIO, quiet: bool) -> None:
        self.out = out
        self.quiet = quiet
        self.dim = out.isatty() and os.environ.get("NO_COLOR") is None
        self._open: str | None = None  # "text" or "thought" while a stream of chunks is mid-line

    def _write(self, text: str) -> None:
        if self.quiet:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            _output_gone()

    def end_line(self) -> None:
        if self._open is not None:
            self._open = None
            self._write("\n")

    def line(self, text: str) -> None:
        if self.quiet:
            return
        self.end_line()
        self._write(text + "\n")

    def update(self, update: Params) -> None:
        if self.quiet:
            return
        kind = update.get("sessionUpdate")
        content = update.get("content")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            text = _block_text(content)
            mode = {"agent_message_chunk": "text", "agent_thought_chunk": "thought"}.get(str(kind), "user")
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


def _block_text(content: Any) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        return f"[{content.get('type', '?')}]"
    return ""


def _note(text: str) -> None:
    """A console line (not the agent's): stderr, so stdout stays the conversation."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


# -- what the console serves ----------------------------------------------------------------


class ConsoleHandler(ClientHandler):
    """Permission by policy or by asking; fs under the root only; terminals not served."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def capabilities(self) -> Params:
        caps = super().capabilities()
        caps["terminal"] = False  # create_terminal below only explains the refusal
        return caps

    async def create_terminal(self, params: Params) -> Params:
        _note(f"[terminal] refused {params.get('command', '?')!r}: acp-fast client does not serve terminals")
        raise MethodNotFound("terminal/create: acp-fast client does not serve terminals (not advertised)")

    async def request_permission(self, params: Params) -> Params:
        return await self.console.ask_permission(params)

    async def read_text_file(self, params: Params) -> Params:
        path = self.console.inside_root(params.get("path"), "read")
        try:
            lines = (await asyncio.to_thread(_read_file, path)).splitlines(keepends=True)
        except FileNotFoundError:
            raise ResourceNotFound(f"no such file: {path}", {"uri": path}) from None
        except OSError as exc:
            raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}") from None
        line, limit = params.get("line"), params.get("limit")
        start = max(int(line) - 1, 0) if isinstance(line, int) else 0
        end = start + int(limit) if isinstance(limit, int) and limit >= 0 else None
        content = "".join(lines[start:end])
        self.console.renderer.line(f"[fs] read {path} ({len(content)} characters)")
        return {"content": content}

    async def write_text_file(self, params: Params) -> Params:
        path = self.console.inside_root(params.get("path"), "write")
        content = params.get("content")
        if not isinstance(content, str):
            raise InvalidParams("fs/write_text_file needs a string content")
        try:
            await asyncio.to_thread(_write_file, path, content)
        except OSError as exc:
            raise InvalidParams(f"cannot write {path}: {exc.strerror or exc}") from None
        self.console.renderer.line(f"[fs] wrote {path} ({len(content)} characters)")
        return {}


def _read_file(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _write_file(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)


class Console:
    """One session of talking to an agent."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.renderer = Renderer(sys.stdout, quiet=options.json)
        self.lines: LineSource | None = None
        self.link: Link | None = None
        self.session: ClientSession | None = None
        self.interactive = False
        self.turn_running = False
        self.cancelled_at: float | None = None
        self.cancel_event = asyncio.Event()
        #: The read of a permission answer in progress: cancelled as soon as its turn is cancelled or
        #: ends, so that it cannot take the next line typed at the prompt.
        self._question: asyncio.Future[str | None] | None = None

    # -- served to the agent ------------------------------------------------------------------
    def inside_root(self, path: Any, what: str) -> str:
        """The resolved path, or a JSON-RPC error if it leaves the root (symlinks and .. resolved)."""
        root = self.options.root
        if not isinstance(path, str) or not path:
            raise InvalidParams(f"fs {what}: a path is required")
        try:
            resolved = os.path.realpath(os.path.join(root, path))
        except ValueError:  # an embedded NUL
            raise InvalidParams(f"fs {what}: not a usable path: {path!r}") from None
        if os.path.commonpath([root, resolved]) != root:
            _note(f"[fs] refused to {what} {path}: outside --root {root}")
            raise InvalidParams(f"refused: {path} is outside the client's root {root}", {"path": path})
        return resolved

    async def ask_permission(self, params: Params) -> Params:
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        title = str((call or {}).get("title") or (call or {}).get("toolCallId") or "a tool call")
        policy = self.options.policy
        if policy != "ask":
            wanted = "allow" if policy == "allow" else "reject"
            for option in options:
                if str(option.get("kind", "")).startswith(wanted):
                    _note(f"[permission] {title}: {option.get('name', option.get('optionId'))} (--{policy}-all)")
                    return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}
            _note(f"[permission] {title}: no {wanted} option offered; answered cancelled")
            return {"outcome": {"outcome": "cancelled"}}
        self.renderer.end_line()
        if not options:
            _note(f"[permission] {title}: no options offered; answered cancelled")
            return {"outcome": {"outcome": "cancelled"}}
        _note(f"[permission] {title}")
        for i, option in enumerate(options, 1):
            _note(f"  {i}) {option.get('name', option.get('optionId'))} ({option.get('kind', '?')})")
        if self.lines is None:
            self.lines = LineSource(asyncio.get_running_loop())
        while True:
            sys.stderr.write(f"choose 1-{len(options)}: ")
            sys.stderr.flush()
            line_task = self._question = asyncio.ensure_future(self.lines.get())
            cancel_task = asyncio.ensure_future(self.cancel_event.wait())
            try:
                await asyncio.wait({line_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._question = None
            cancel_task.cancel()
            if not line_task.done() or line_task.cancelled():  # the turn was cancelled or ended: the spec's
                line_task.cancel()  # answer for a pending question
                _note("")
                return {"outcome": {"outcome": "cancelled"}}
            line = line_task.result()
            if line is None:
                _note(f"[permission] {title}: no answer (end of input); answered cancelled")
                return {"outcome": {"outcome": "cancelled"}}
            choice = line.strip()
            if choice.isdigit() and 1 <= int(choice) <= len(options):
                option = options[int(choice) - 1]
                _note(f"[permission] {title}: {option.get('name', option.get('optionId'))}")
                return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}

    # -- the session ---------------------------------------------------------------------------
    def on_sigint(self) -> None:
        if self.turn_running and self.session is not None:
            if self.cancelled_at is not None:  # a second Ctrl-C: stop waiting
                _interrupt("gave up waiting for the cancelled turn")
                return
            self.cancelled_at = time.perf_counter()
            self.cancel_event.set()
            self._drop_question()
            self.renderer.end_line()
            _note("\n[cancelling: session/cancel sent]")
            self.session.cancel()
        elif self.interactive:
            self.renderer.end_line()
            sys.stderr.write("\n")  # the terminal echoed ^C and dropped what was typed: start afresh
            self._show_prompt()
        else:  # connecting, or between scripted turns
            _interrupt("interrupted")

    def _drop_question(self) -> None:
        """Stop reading a permission answer now: its stdin read must not outlive the question."""
        question = self._question
        if question is not None and not question.done():
            question.cancel()  # synchronously: a line typed from now on goes to the prompt

    def _show_prompt(self) -> None:
        if self.interactive and sys.stdin.isatty():
            sys.stderr.write("> ")
            sys.stderr.flush()

    async def turn(self, text: str) -> int:
        """One prompt turn: stream its updates, report its stop reason; returns its exit status."""
        assert self.session is not None
        self.turn_running, self.cancelled_at = True, None
        self.cancel_event.clear()
        try:
            result = await self.session.prompt(text, self.renderer.update)
        finally:
            self.turn_running = False
            self._drop_question()
            self.renderer.end_line()
        reason = result.stop_reason
        note = f"[{reason}]"
        if self.cancelled_at is not None:
            note = f"[{reason}, answered {(time.perf_counter() - self.cancelled_at) * 1000:.1f} ms after the cancel]"
        _note(note)
        return STOP_EXIT.get(reason, EXIT_ERROR)

    async def command(self, line: str) -> bool:
        """Run a console command; False if ``line`` is a prompt for the agent."""
        assert self.link is not None and self.session is not None
        word, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        conn = self.link.client.conn
        if word == "/help":
            _note(HELP.rstrip())
        elif word == "/sessions":
            result = await conn.send_request("session/list", {})
            sessions = result.get("sessions") or [] if isinstance(result, dict) else []
            for s in sessions:
                mark = "*" if s.get("sessionId") == self.session.id else " "
                _note(f"{mark} {s.get('sessionId')}  {s.get('title') or ''}  {s.get('cwd') or ''}".rstrip())
            if not sessions:
                _note("(no sessions)")
        elif word == "/load" and rest:
            client = self.link.client
            session = await client.load_session(rest, self.options.root)
            if session.id != self.session.id:
                client.forget_session(self.session.id)
            self.session = session
            for update in session.pending_updates():  # the replay
                self.renderer.update(update)
            self.renderer.end_line()
            _note(f"[session {rest} loaded]")
        elif word == "/mode" and rest:
            await self.session.request("session/set_mode", {"modeId": rest})
            _note(f"[mode {rest}]")
        elif word in ("/load", "/mode"):
            _note(f"usage: {word} ID")
        else:
            return False
        return True

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        try:
            return await self._run()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def _run(self) -> int:
        opts = self.options
        handler = ConsoleHandler(self)
        tap = _json_tap() if opts.json else None
        self.link = link = await _open_link(opts, handler, tap)
        client = link.client
        try:
            init = await client.initialize(client_info={"name": "acp-fast-client", "version": __version__})
            self.session = await client.build_session(opts.root).start()
        except AcpError as exc:
            return await self._failed(exc, "while opening the session")
        info = init.get("agentInfo") if isinstance(init.get("agentInfo"), dict) else {}
        name = f"{(info or {}).get('name', 'agent')} {(info or {}).get('version', '')}".strip()
        _note(f"[{name}: session {self.session.id}, root {opts.root}]")
        for update in self.session.pending_updates():
            self.renderer.update(update)
        self.renderer.end_line()
        try:
            if opts.prompts:
                status = EXIT_OK
                for text in opts.prompts:
                    status = await self.turn(text)
                return status
            return await self._interactive()
        except AcpError as exc:
            return await self._failed(exc, "during the turn")

    async def _interactive(self) -> int:
        assert self.link is not None
        self.interactive = True
        if self.lines is None:
            self.lines = LineSource(asyncio.get_running_loop())
        if sys.stdin.isatty():
            _note("type a prompt; /help for commands, Ctrl-D to end")
        run_task = self.link.client._run_task
        while True:
            self._show_prompt()
            line_task = asyncio.ensure_future(self.lines.get())
            waiting: set[asyncio.Future[Any]] = {line_task}
            if run_task is not None:
                waiting.add(run_task)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not line_task.done():  # the connection ended while we waited for a line
                line_task.cancel()
                await self.link.settle()
                _note(f"acp-fast client: {self.link.end_reason()}")
                return EXIT_DISCONNECTED
            line = line_task.result()
            if line is None:
                if sys.stdin.isatty():
                    _note("")
                return EXIT_OK
            if not line.strip():
                continue
            try:
                if not await self.command(line):
                    await self.turn(line)
            except AcpError as exc:
                if self._link_ended():
                    raise
                _note(f"error {exc.code}: {exc}")

    def _link_ended(self) -> bool:
        task = self.link.client._run_task if self.link is not None else None
        return task is not None and task.done()

    async def _failed(self, exc: AcpError, during: str) -> int:
        if isinstance(exc, ConnectionClosed) or self._link_ended():
            if self.link is not None:
                await self.link.settle()
            reason = self.link.end_reason() if self.link is not None else "the connection closed"
            _note(f"acp-fast client: {reason} ({during})")
            return EXIT_DISCONNECTED
        _note(f"acp-fast client: the agent answered with error {exc.code}: {exc} ({during})")
        return EXIT_ERROR


class OutputGone(Exception):
    """stdout was closed by its reader (``| head``): the console ends quietly."""


def _output_gone() -> None:
    """Stop writing to a closed stdout; the main task ends the session (status 0, like Ctrl-D)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more fails, not even at interpreter exit
        os.close(devnull)
    _interrupt(None)


def _interrupt(why: str | None) -> None:
    """End the console from a callback: ``why`` is its one line (None: end quietly, status 0)."""
    task = _MAIN.get("task")
    if task is not None and not task.done() and "why" not in _MAIN:
        _MAIN["why"] = why
        task.cancel()


#: The console's main task, for what must end it from a callback (a closed stdout).
_MAIN: dict[str, Any] = {}


def _json_tap() -> Tap:
    out = sys.stdout.buffer

    def tap(direction: str, message: bytes) -> None:
        try:
            record: dict[str, Any] = {"dir": direction, "msg": orjson.loads(message)}
        except orjson.JSONDecodeError:
            record = {"dir": direction, "raw": message.decode("utf-8", "replace")}
        try:
            out.write(orjson.dumps(record) + b"\n")
            out.flush()
        except BrokenPipeError:
            _output_gone()

    return tap


async def _open_link(opts: Options, handler: ClientHandler, tap: Tap | None) -> Link:
    limits = Limits()
    if opts.url is None:
        from .links import open_stdio

        return await open_stdio(opts.command, handler, limits, tap)
    scheme = urlsplit(opts.url).scheme
    try:
        if scheme in ("ws", "wss"):
            from .ws_link import open_ws

            return await open_ws(opts.url, opts.headers, handler, limits, tap)
        from .http_link import open_http
    except ImportError as exc:
        raise Usage(f"{scheme}:// needs the server extra ({exc.name} is missing): {INSTALL_HINT}") from None
    return await open_http(opts.url, opts.headers, handler, limits, tap)


async def _main(opts: Options) -> int:
    console = Console(opts)
    _MAIN["task"] = asyncio.current_task()
    try:
        return await console.run()
    except asyncio.CancelledError:  # _interrupt: Ctrl-C outside a turn or twice in one, or stdout closed
        if "why" not in _MAIN:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # handled: the close below may wait again
        why = _MAIN["why"]
        if why is None:
            return EXIT_OK
        _note(f"acp-fast client: {why}")
        return EXIT_CANCELLED
    finally:
        if console.link is not None:
            await console.link.close()


def main(argv: Sequence[str]) -> int:
    """``acp-fast client ARGS``: the exit status."""
    argv = list(argv)
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    args = parser().parse_args(argv)  # usage errors exit 2 with argparse's message
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.CRITICAL,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        opts = Options(args, command)
        return asyncio.run(_main(opts))
    except Usage as exc:
        sys.stderr.write(f"acp-fast client: {exc}\n")
        return EXIT_USAGE
    except LinkError as exc:
        sys.stderr.write(f"acp-fast client: {exc}\n")
        return EXIT_DISCONNECTED
    except KeyboardInterrupt:  # before the loop's own handler was installed
        sys.stderr.write("acp-fast client: interrupted\n")
        return EXIT_CANCELLED


__all__ = ["main"]
