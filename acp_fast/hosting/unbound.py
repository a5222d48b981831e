"""Sockets that serve no ACP connection yet, counted in total and per client address.

Such a socket costs a descriptor and a buffer and proves nothing: it may be
reading its first head, or be an HTTP socket that never addressed a live
connection. ``max_unbound_sockets`` bounds them for the process, and
``max_unbound_per_address`` for one client address, so one client that opens
sockets and sends nothing cannot take the slots of every other client. The
address is the client's (hosting/forwarded.py): a trusted proxy's socket
counts under no address until it names its client, since one proxy carries
many clients; a unix socket counts under none.

Past ``max_unbound_sockets`` a socket is refused before anything is read,
so a health probe could not be told from the rest: ``health_reserve_sockets``
more are accepted only to answer ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import enum
from typing import Protocol

from ..wire.limits import Limits


class Front(Protocol):
    """A socket reading its first head (hosting/front.py), as the counts see it."""

    @property
    def address(self) -> str: ...

    def drain(self) -> None: ...

#: The paths a socket of the health reserve may ask for.
HEALTH_PATHS = (b"/healthz", b"/readyz")


class SocketAdmission(enum.Enum):
    """What a newly counted socket may do."""

    SERVE = "serve"
    HEALTH_ONLY = "health-only"  # accepted from the health reserve
    REFUSE = "refuse"


class UnboundSockets:
    """The counts behind ``AcpHost.unbound_sockets``; '' is the address of sockets no share applies to."""

    __slots__ = ("_by_address", "_limits", "fronts", "refused_per_address", "total")

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._by_address: dict[str, int] = {}
        self.total = 0
        self.refused_per_address = 0  # sockets refused because their address held its share
        self.fronts: set[Front] = set()  # sockets reading their first head (the rest are HTTP channels)

    def front_opened(self, front: Front, address: str) -> SocketAdmission:
        """A socket was accepted: count it under ``address``, from the health reserve past the cap, or refuse it."""
        limits = self._limits
        if not self._has_room(address):
            return SocketAdmission.REFUSE
        if self.total >= limits.max_unbound_sockets + limits.health_reserve_sockets:
            return SocketAdmission.REFUSE
        self._add(address)
        self.fronts.add(front)
        return SocketAdmission.SERVE if self.total <= limits.max_unbound_sockets else SocketAdmission.HEALTH_ONLY

    def front_moved(self, front: Front, address: str) -> bool:
        """The socket's client is ``address`` (a proxy named it): count it there, or release it (False) if full."""
        self.close(front.address)
        if not self._has_room(address):
            self.fronts.discard(front)
            return False
        self._add(address)
        return True

    def front_closed(self, front: Front) -> None:
        """The front is done with a socket: it was lost, or handed over (an HTTP channel counts it anew)."""
        if front in self.fronts:
            self.fronts.discard(front)
            self.close(front.address)

    def add(self, address: str) -> None:
        """Count a socket handed over by a counted one (released just before), whatever the caps say."""
        self._add(address)

    def close(self, address: str) -> None:
        """A counted socket serves a connection now, or is gone."""
        self.total -= 1
        if address:
            left = self._by_address[address] - 1
            if left:
                self._by_address[address] = left
            else:
                del self._by_address[address]

    def held(self, address: str) -> int:
        """Sockets counted under ``address``."""
        return self._by_address.get(address, 0)

    def _has_room(self, address: str) -> bool:
        if address and self._by_address.get(address, 0) >= self._limits.max_unbound_per_address:
            self.refused_per_address += 1
            return False
        return True

    def _add(self, address: str) -> None:
        self.total += 1
        if address:
            self._by_address[address] = self._by_address.get(address, 0) + 1


def is_health_probe(head: bytes | bytearray) -> bool:
    """Does the request line ask for ``/healthz`` or ``/readyz`` (GET or HEAD, any query)?"""
    line = bytes(head[: head.find(b"\r\n")])
    method, _, rest = line.partition(b" ")
    path = rest.partition(b" ")[0].partition(b"?")[0]
    return method in (b"GET", b"HEAD") and path in HEALTH_PATHS


__all__ = ["HEALTH_PATHS", "SocketAdmission", "UnboundSockets", "is_health_probe"]
