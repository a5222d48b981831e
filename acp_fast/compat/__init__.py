"""Serve an agent written on the official Python SDK (``agent-client-protocol``, import ``acp``).

Change one import (``from acp_fast.compat import run_agent`` for ``from acp
import run_agent``, or ``AgentSideConnection`` likewise) or run
``acp-fast serve module:Class``; the agent's code stays as it is. Every SDK
release from 0.8.0 on is supported: what the installed one routes, names and
accepts is read from it at import (``release``), not assumed.

- ``agent``: ``wrap_sdk_agent`` builds an ``acp_fast.Agent`` that calls the
  SDK agent with that release's arguments and serialises its results as
  that release does, without the SDK's ``_meta`` shadowing;
- ``client``: ``SdkClient``, the SDK's client calls over acp_fast's peer;
- ``connection``: ``AgentSideConnection`` and ``run_agent`` with the SDK's
  signatures, over stdio, asyncio streams or a message transport.

Needs the optional extra ``acp_fast[compat]``; ``import acp_fast`` never
imports this package. See docs/MIGRATION.md.
"""

from __future__ import annotations

from ..extras import require

require("compat", "serving an agent written on the official SDK (acp_fast.compat)")

from .agent import (  # noqa: E402
    UNSTABLE_METHODS,
    SdkAgent,
    dump_defaults,
    dump_unset,
    sdk_defines,
    wrap_sdk_agent,
)
from .client import SdkClient  # noqa: E402
from .connection import DEFAULT_STDIO_BUFFER_LIMIT_BYTES, AgentSideConnection, run_agent, use_in_sdk_http_server  # noqa: E402
from .release import NOTIFICATION_ROUTES, REQUEST_ROUTES, SDK_VERSION, SDK_VERSION_TEXT  # noqa: E402

#: Every agent attribute the adapter can forward with the installed release.
SDK_AGENT_METHODS: frozenset[str] = frozenset(
    {r.attr for r in (*REQUEST_ROUTES.values(), *NOTIFICATION_ROUTES.values())} | {"ext_method", "ext_notification"}
)

__all__ = [
    "DEFAULT_STDIO_BUFFER_LIMIT_BYTES",
    "SDK_AGENT_METHODS",
    "SDK_VERSION",
    "SDK_VERSION_TEXT",
    "UNSTABLE_METHODS",
    "AgentSideConnection",
    "SdkAgent",
    "SdkClient",
    "dump_defaults",
    "dump_unset",
    "run_agent",
    "sdk_defines",
    "use_in_sdk_http_server",
    "wrap_sdk_agent",
]
