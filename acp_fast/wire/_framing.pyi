"""Types of the compiled framer; behaviour is specified by ``acp_fast.wire._framing_py``."""

from typing import TypeAlias

from .frames import Oversized, Truncated

Frame: TypeAlias = bytes | memoryview | Oversized

class LineFramer:
    """Split a byte stream into lines, bounded by ``max_line_bytes``."""

    def __init__(self, max_line_bytes: int = ..., head_bytes: int = ...) -> None: ...
    @property
    def max_line_bytes(self) -> int: ...
    @property
    def buffered(self) -> int: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]: ...
    def close(self) -> Truncated | None: ...
