"""The start-up rule's argument half: flags checked before anything is imported, bound or forked.

A mistake at start-up is one line on stderr naming what is wrong and what to
do, and exit status 2; nothing is served. Each check here raises
:class:`StartupMistake`, which ``acp_fast.cli.main`` turns into that line.
The checks need no network and no agent: values, ranges and flag
combinations (what answers from outside, a port or a store, is in ``probes``).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import fields

from ..wire.limits import Limits

#: The highest TCP port; 0 asks the kernel for a free one.
MAX_PORT = 65535

#: Flags that only mean something with ``--listen``, and their ``argparse`` default (given = differs from it).
_NEEDS_LISTEN: dict[str, object] = {
    "workers": 1,
    "session_store": None,
    "access_log": None,
    "allow_origin": [],
    "forwarded_allow_ips": [],
    "proxy_protocol": False,
    "auth_token_env": None,
    "web_console": False,
    "metrics": False,
}


class StartupMistake(Exception):
    """A start-up mistake: the message is the whole story, one line, said before anything is served."""


def one_line(text: object) -> str:
    """``text`` on one line (an exception's message may span several)."""
    return " ".join(str(text).split())


def flag(name: str) -> str:
    """The command-line flag of a ``Limits`` field or an ``args`` attribute."""
    return "--" + name.replace("_", "-")


def checked_limits(args: argparse.Namespace) -> Limits:
    """The ``Limits`` the flags describe; a value ``Limits`` refuses is a mistake naming the flag(s).

    ``Limits`` itself owns the rules (ranges and cross-field); its message names
    fields, rewritten here into the flags a person typed.
    """
    try:
        return Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})
    except ValueError as exc:
        names = "|".join(sorted((f.name for f in fields(Limits)), key=len, reverse=True))
        text = re.sub(rf"\b(?:Limits\.)?({names})\b", lambda m: flag(m.group(1)), one_line(exc))
        raise StartupMistake(text) from None


def check_needs_listen(args: argparse.Namespace) -> None:
    """Refuse the hosting flags without ``--listen``, and a worker count below one."""
    if args.workers < 1:
        raise StartupMistake(f"--workers must be at least 1, got {args.workers}")
    if args.listen:
        return
    given = [flag(name) for name, default in _NEEDS_LISTEN.items() if getattr(args, name) != default]
    if "--metrics" in given:
        raise StartupMistake("--metrics needs --listen (over stdio use --metrics-listen HOST:PORT)")
    if given:
        verb = "needs" if len(given) == 1 else "need"
        raise StartupMistake(f"{', '.join(given)} {verb} --listen HOST:PORT (without it the agent is served "
                             "over stdio, which does not use them)")


def check_address(option: str, text: str, *, unix: bool = True) -> None:
    """``text`` is ``HOST:PORT`` with a port in 0..65535, or (given ``unix``) ``unix:PATH`` in an existing directory."""
    if "://" in text:
        scheme, _, rest = text.partition("://")
        raise StartupMistake(f"{option} takes HOST:PORT, not a URL: drop the {scheme}:// "
                             f"(e.g. {option} {rest.split('/')[0] or '127.0.0.1:8767'})")
    if text.startswith("unix:"):
        if not unix:
            raise StartupMistake(f"{option}: a unix socket is not served here; give HOST:PORT")
        path = text[len("unix:") :]
        directory = os.path.dirname(path) or "."
        if path and not os.path.isdir(directory):
            raise StartupMistake(f"{option} {text}: the directory {directory} does not exist; create it first")
        return
    _, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        forms = "HOST:PORT or unix:PATH" if unix else "HOST:PORT"
        raise StartupMistake(f"{option}: expected {forms}, got {text!r} (e.g. 127.0.0.1:8767)")
    if int(port) > MAX_PORT:
        raise StartupMistake(f"{option} {text}: port {port} is out of range; give 1-{MAX_PORT} (0: any free port)")


__all__ = ["MAX_PORT", "StartupMistake", "check_address", "check_needs_listen", "checked_limits", "flag", "one_line"]
