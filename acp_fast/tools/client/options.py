"""The command line of ``acp-fast client``: its flags, the checks on them, its help and its exit statuses."""

from __future__ import annotations

import argparse
import os
from urllib.parse import urlsplit

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3
EXIT_REFUSAL = 4
EXIT_MAX_TOKENS = 5
EXIT_MAX_TURN_REQUESTS = 6
EXIT_DISCONNECTED = 7

#: The last turn's stop reason -> exit status of a ``--prompt`` run.
STOP_EXIT = {
    "end_turn": EXIT_OK,
    "cancelled": EXIT_CANCELLED,
    "refusal": EXIT_REFUSAL,
    "max_tokens": EXIT_MAX_TOKENS,
    "max_turn_requests": EXIT_MAX_TURN_REQUESTS,
}

EXIT_CODES = f"""exit status:
  {EXIT_OK}  the last turn ended with end_turn (interactive: Ctrl-D)
  {EXIT_ERROR}  the agent answered a request with an error, or an unknown stop reason
  {EXIT_USAGE}  usage error: bad arguments, bad URL, unset --token-env, missing extra
  {EXIT_CANCELLED}  the last turn was cancelled (Ctrl-C), or Ctrl-C before the session opened
  {EXIT_REFUSAL}  the last turn ended with refusal
  {EXIT_MAX_TOKENS}  the last turn ended with max_tokens
  {EXIT_MAX_TURN_REQUESTS}  the last turn ended with max_turn_requests
  {EXIT_DISCONNECTED}  the agent could not be reached, died, or closed the connection
"""

HELP = """commands (anything else, including other /words, is a prompt for the agent):
  /sessions    list the agent's sessions (session/list)
  /load ID     load session ID (session/load) and make it current
  /mode ID     set the session's mode (session/set_mode)
  /help        this text
  Ctrl-C       during a turn: cancel it (session/cancel; again: stop waiting); at the prompt: clear the line
  Ctrl-D       end
"""

INSTALL_HINT = "install with pip install '.[server]' (from a clone or an sdist)"


class Usage(Exception):
    """A usage error: one line, exit 2."""


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(
        prog="acp-fast client",
        usage="acp-fast client [options] (-- CMD [ARGS...] | ws://HOST:PORT/acp | http://HOST:PORT/acp)",
        description="Talk to an ACP agent: spawn one (after --) or connect to a hosted one. Each line you "
        "type is a prompt; updates print as they stream. Try: acp-fast client -- acp-fast demo",
        epilog=HELP + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    out.add_argument("url", nargs="?", help="ws://, wss://, http:// or https:// address of a hosted agent")
    out.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="extra request header (repeatable)"
    )
    out.add_argument("--token-env", metavar="VAR", help="send 'Authorization: Bearer $VAR'")
    out.add_argument(
        "--root", metavar="DIR", help="session cwd; fs requests are served under it only (default: cwd)"
    )
    policy = out.add_mutually_exclusive_group()
    policy.add_argument("--allow-all", action="store_true", help="grant every permission request without asking")
    policy.add_argument("--deny-all", action="store_true", help="refuse every permission request without asking")
    out.add_argument(
        "--prompt", action="append", default=[], metavar="TEXT", help="run this prompt and exit (repeatable, in order)"
    )
    out.add_argument("--json", action="store_true", help="print every message, both directions, as a JSON line")
    out.add_argument("--verbose", action="store_true", help="log acp_fast's debug output to stderr")
    return out


class Options:
    """What the flags and the command after ``--`` ask for, checked: a problem is a :class:`Usage` error."""

    def __init__(self, args: argparse.Namespace, command: list[str]) -> None:
        self.url: str | None = args.url
        self.command = command
        self.headers: list[tuple[str, str]] = []
        self.root = os.path.realpath(args.root or os.getcwd())
        self.policy = "allow" if args.allow_all else "deny" if args.deny_all else "ask"
        self.prompts: list[str] = args.prompt
        self.json: bool = args.json
        self.verbose: bool = args.verbose
        if bool(self.url) == bool(command):
            raise Usage("give an agent to run after -- or a ws:// / http:// URL (one of them)")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("ws", "wss", "http", "https") or not parts.hostname:
                raise Usage(f"bad URL {self.url!r}: expected ws://HOST:PORT/PATH or http://HOST:PORT/PATH")
            try:
                parts.port  # noqa: B018  # a non-numeric port raises here
            except ValueError:
                raise Usage(f"bad URL {self.url!r}: the port is not a number") from None
        elif args.header or args.token_env:
            raise Usage("--header and --token-env apply to a URL, not to a spawned agent")
        for header in args.header:
            name, sep, value = header.partition(":")
            if not sep or not name.strip():
                raise Usage(f"--header {header!r}: expected NAME:VALUE")
            self.headers.append((name.strip(), value.strip()))
        if args.token_env:
            token = os.environ.get(args.token_env, "")
            if not token:
                raise Usage(f"--token-env {args.token_env}: the variable is empty or unset")
            self.headers.append(("Authorization", f"Bearer {token}"))
        if not os.path.isdir(self.root):
            raise Usage(f"--root {args.root!r} is not a directory")


__all__ = [
    "EXIT_CANCELLED",
    "EXIT_CODES",
    "EXIT_DISCONNECTED",
    "EXIT_ERROR",
    "EXIT_MAX_TOKENS",
    "EXIT_MAX_TURN_REQUESTS",
    "EXIT_OK",
    "EXIT_REFUSAL",
    "EXIT_USAGE",
    "HELP",
    "INSTALL_HINT",
    "STOP_EXIT",
    "Options",
    "Usage",
    "parser",
]
