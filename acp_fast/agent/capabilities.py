"""What an agent advertises in ``initialize``, and the refusal of what it did not advertise.

Never advertise what would answer -32601: a capability is set only when the
agent implements every method behind it, and removed otherwise, also from
what an agent that states its own capabilities (``decides_capabilities``,
the SDK adapter) returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..wire.errors import InvalidParams
from .base import CAPABILITY_OF
from .methods import _is_content_list


def _set_path(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        node = obj.get(key)
        if not isinstance(node, dict):
            node = obj[key] = {}
        obj = node
    obj[path[-1]] = value


def _del_path(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        node = obj.get(key)
        if not isinstance(node, dict):
            return
        obj = node
    obj.pop(path[-1], None)


def agent_capabilities(
    stated: dict[str, Any] | None,
    implemented: Iterable[str],
    system_prompt_modes: frozenset[str],
    decides: bool,
    mcp_over_acp: bool,
) -> dict[str, Any]:
    """``stated`` (the agent's own ``agentCapabilities``, copied at its top level) completed and pruned.

    ``implemented``: the Agent methods the class overrides; ``decides``: the
    agent states its capabilities itself, so only those it cannot serve are
    removed; ``mcp_over_acp``: the connection serves MCP over ACP in a role.
    """
    caps: dict[str, Any] = dict(stated or {})
    implemented = frozenset(implemented)
    served: dict[tuple[str, ...], bool] = {}
    for attr, path in CAPABILITY_OF.items():  # a path several methods share needs all of them
        served[path] = served.get(path, True) and attr in implemented
    for path, on in served.items():
        if not on:
            _del_path(caps, path)
        elif not decides:
            _set_path(caps, path, True if len(path) == 1 and path[0] == "loadSession" else {})
    if "append" in system_prompt_modes:
        _set_path(
            caps,
            ("sessionCapabilities", "systemPrompt"),
            {"mode": {"override": {}}} if "override" in system_prompt_modes else {},
        )
    elif not decides:
        _del_path(caps, ("sessionCapabilities", "systemPrompt"))
    if mcp_over_acp:
        _set_path(caps, ("mcpCapabilities", "acp"), True)
    else:
        _del_path(caps, ("mcpCapabilities", "acp"))
    return caps


def check_system_prompt(kw: dict[str, Any], modes: frozenset[str]) -> None:
    """Refuse a ``systemPrompt`` the agent cannot apply (schema 1.30: it MUST return an error);
    ``kw`` holds ``system_prompt`` only when the client sent one, ``modes`` are the agent's."""
    if "system_prompt" not in kw:
        return
    prompt = kw["system_prompt"]
    if not modes:
        raise InvalidParams(
            "Invalid params: this agent does not accept a systemPrompt "
            "(it does not advertise sessionCapabilities.systemPrompt)",
            {"field": "systemPrompt"},
        )
    mode = prompt.get("mode")
    if mode not in modes:
        raise InvalidParams(
            f"Invalid params: systemPrompt mode {mode!r} is not supported by this agent "
            f"(supported: {', '.join(sorted(modes))})",
            {"field": "systemPrompt.mode"},
        )
    if not _is_content_list(prompt.get("content")):
        raise InvalidParams(
            "Invalid params: systemPrompt.content must be an array of content blocks",
            {"field": "systemPrompt.content"},
        )
