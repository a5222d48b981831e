"""The non-line events both framers report (shared so both report the same objects)."""

from __future__ import annotations


class Oversized:
    """A line longer than the limit was discarded (R25).

    ``size`` is its length without the ``\\n``; ``head`` is its first bytes
    (at most the framer's ``head_bytes``), enough to recover a request id.
    """

    __slots__ = ("head", "size")

    def __init__(self, size: int, head: bytes) -> None:
        self.size = size
        self.head = head

    def __eq__(self, other: object) -> bool:
        return type(other) is Oversized and (self.size, self.head) == (other.size, other.head)

    def __hash__(self) -> int:
        return hash((Oversized, self.size, self.head))

    def __repr__(self) -> str:
        return f"Oversized(size={self.size}, head={self.head[:32]!r})"


class Truncated:
    """The stream ended inside a line: it is reported, never parsed as a message.

    ``oversized`` says the partial line had already passed the limit, in which
    case ``head`` holds only its first bytes.
    """

    __slots__ = ("head", "oversized", "size")

    def __init__(self, size: int, head: bytes, oversized: bool) -> None:
        self.size = size
        self.head = head
        self.oversized = oversized

    def __eq__(self, other: object) -> bool:
        return type(other) is Truncated and (self.size, self.head, self.oversized) == (
            other.size,
            other.head,
            other.oversized,
        )

    def __hash__(self) -> int:
        return hash((Truncated, self.size, self.head, self.oversized))

    def __repr__(self) -> str:
        return f"Truncated(size={self.size}, oversized={self.oversized}, head={self.head[:32]!r})"
