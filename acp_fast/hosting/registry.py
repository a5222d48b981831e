"""The live ACP connections of one host: their tasks, their Streamable HTTP ids, their count per principal."""

from __future__ import annotations

import asyncio

from ..transports.sse import SsePeer
from ..transports.ws import WsPeer

Peer = WsPeer | SsePeer


class PeerRegistry:
    """Every connection from its start to its end; the counts admission and the metrics read."""

    __slots__ = ("_keys", "_live", "binary_frames", "http", "peers")

    def __init__(self) -> None:
        self.peers: dict[Peer, asyncio.Task[None]] = {}
        self.http: dict[str, SsePeer] = {}  # Streamable HTTP connections by Acp-Connection-Id
        #: Live connections per admission key (the principal, or the peer address without auth hook).
        self._live: dict[str, int] = {}
        self._keys: dict[Peer, str] = {}
        self.binary_frames = 0  # of the connections that ended

    def __len__(self) -> int:
        return len(self.peers)

    def live(self, key: str) -> int:
        """Live connections held under admission key ``key``."""
        return self._live.get(key, 0)

    def add(self, peer: Peer, task: asyncio.Task[None], key: str | None) -> None:
        self.peers[peer] = task
        if key is not None:
            self._keys[peer] = key
            self._live[key] = self._live.get(key, 0) + 1

    def remove(self, peer: Peer) -> None:
        self.binary_frames += peer.binary_frames
        self.peers.pop(peer, None)
        key = self._keys.pop(peer, None)
        if key is not None:
            left = self._live[key] - 1
            if left:
                self._live[key] = left
            else:
                del self._live[key]
        if isinstance(peer, SsePeer):
            self.http.pop(peer.connection_id, None)

    def http_peer(self, connection_id: str, principal: str | None) -> SsePeer | None:
        """The connection, if it exists, has not ended and belongs to this principal (else: unknown, 404)."""
        peer = self.http.get(connection_id)
        if peer is None or peer.ended or peer.principal != principal:
            return None
        return peer

    def counts(self) -> dict[str, int]:
        """The connection counts of ``AcpHost.counts``."""
        peers = self.peers
        return {
            "connections": len(peers),
            "binary_frames": self.binary_frames + sum(p.binary_frames for p in peers),
            "reading_paused": sum(1 for p in peers if p.reading_paused),
            "max_buffered_output": max((p.buffered_output for p in peers), default=0),
            "http_connections": len(self.http),
            "http_streams": sum(p.stream_count for p in self.http.values()),
        }
