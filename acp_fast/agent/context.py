"""The authoritative connection context and the snapshots background work gets (R01, R02).

The context is immutable: a control request that changes it (initialize,
authenticate, logout) installs a new object on the dispatch loop before the
next message is admitted, so a background job holding a snapshot sees the
context as of its admission and nothing half-updated. What is shared rather
than snapshotted (the session table, application state, the transport) lives
beside it on the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Context:
    initialized: bool = False
    protocol_version: int | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    authenticated: bool = False
    auth_method: str | None = None

    def evolve(self, **changes: Any) -> Context:
        return replace(self, **changes)

    def client_supports(self, path: tuple[str, ...]) -> bool:
        """Whether the client advertised the capability at ``path`` (missing means no)."""
        node: Any = self.client_capabilities
        for key in path:
            if type(node) is not dict:
                return False
            node = node.get(key)
        return node is not None and node is not False
