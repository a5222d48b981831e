"""``acp-fast serve module:Class``: your agent, or one written on the official SDK, over stdio or ``--listen``.

A target ``serve`` cannot use is reported in one line with exit status 2: a
traceback into importlib tells a person less than what was tried and from where.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ..agent.base import Agent
from ..extras import MissingExtra, install_hint
from .launch import launch

#: Methods whose presence marks an object as an agent written on the official SDK.
_SDK_AGENT_MARKERS = ("initialize", "new_session", "prompt")


def register(sub: argparse._SubParsersAction[Any], common: argparse.ArgumentParser) -> None:
    serve = sub.add_parser("serve", parents=[common], help="run your agent: package.module:AgentClass")
    serve.add_argument("target", help="import path of an acp_fast.Agent subclass, module:Class")
    serve.add_argument(
        "--unstable",
        action="store_true",
        help="for agents written on the official SDK: serve its unstable methods "
        "(session/close, fork, resume), as its use_unstable_protocol=True does",
    )
    serve.add_argument(
        "--strict",
        action="store_true",
        help="for agents written on the official SDK: keep acp_fast's stricter answers (-32600 before "
        "initialize, -32602 for unknown sessions) instead of the SDK's leniency",
    )
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    launch(args, lambda: _one(args), lambda: _per_connection(args))


def _one(args: argparse.Namespace) -> Agent:
    sys.path.insert(0, "")  # the target is found from the current directory, as `python -m` would
    return load_agent(args.target, unstable=args.unstable, strict=args.strict)


def _per_connection(args: argparse.Namespace) -> Callable[[], Agent]:
    sys.path.insert(0, "")
    return agent_factory(args.target, args.unstable, args.strict)


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"acp-fast serve: {message}\n")
    raise SystemExit(2)


def _import_failure(module_name: str, exc: ImportError) -> str:
    path = os.environ.get("PYTHONPATH")
    where = f"cwd {os.getcwd()}, PYTHONPATH={path if path else '(unset)'}"
    if exc.name is not None and exc.name != module_name and not module_name.startswith(exc.name + "."):
        return f"importing {module_name!r} failed: it needs {exc.name!r}, which is not installed ({where})"
    return f"cannot import module {module_name!r}: {exc} ({where})"


def _is_sdk_agent(obj: object) -> bool:
    return any(callable(getattr(obj, name, None)) for name in _SDK_AGENT_MARKERS)


def load_agent(target: str, unstable: bool = False, strict: bool = False) -> Agent:
    """The agent ``target`` names: an acp_fast Agent (class or instance), or an SDK agent wrapped by compat."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        _fail(f"expected package.module:AgentClass, got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except MissingExtra as exc:  # the agent's module imports a part of acp_fast whose extra is missing
        _fail(str(exc))
    except ImportError as exc:
        _fail(_import_failure(module_name, exc))
    try:
        obj = getattr(module, attr)
    except AttributeError:
        _fail(f"module {module_name!r} ({getattr(module, '__file__', None) or 'no file'}) has no attribute {attr!r}")
    if isinstance(obj, type) and issubclass(obj, Agent):
        return obj()
    if isinstance(obj, Agent):
        return obj
    # An SDK agent: a class or instance with its methods, or a factory function ``conn -> agent``.
    if not (_is_sdk_agent(obj) or inspect.isfunction(obj)):
        _fail(
            f"{target} is not an acp_fast Agent or an SDK agent (it is {type(obj).__name__} {obj!r:.80}); "
            "name a subclass of acp_fast.Agent, or a class defining the official SDK's agent methods"
        )
    try:
        from ..compat import wrap_sdk_agent  # an agent written on the official SDK
    except ImportError:
        _fail(f"{target} looks like an agent written on the official SDK; serving it needs the 'compat' extra: "
              f"{install_hint('compat')}")
    sdk_agent = obj() if isinstance(obj, type) else obj
    wrapped: Agent = wrap_sdk_agent(sdk_agent, use_unstable_protocol=unstable, strict=strict)
    return wrapped


def agent_factory(target: str, unstable: bool, strict: bool) -> Callable[[], Agent]:
    """One agent instance per connection: ``target`` must name a class."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise SystemExit(f"acp-fast: expected module:Class, got {target!r}")
    if not isinstance(getattr(importlib.import_module(module_name), attr), type):
        raise SystemExit(f"acp-fast: --listen needs a class (one instance per connection); {target!r} is not one")
    return lambda: load_agent(target, unstable=unstable, strict=strict)


__all__ = ["agent_factory", "load_agent", "register", "run"]
