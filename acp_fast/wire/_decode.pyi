"""Types of the compiled decoder; behaviour is specified by ``acp_fast.wire.jsonrpc`` (decode_py)."""

from collections.abc import Callable
from typing import Any

class Request:
    id: str | int
    method: str
    params: Any
    def __init__(self, id: str | int, method: str, params: Any) -> None: ...

class Notification:
    method: str
    params: Any
    def __init__(self, method: str, params: Any) -> None: ...

def bind(
    loads: Callable[[Any], Any],
    decode_error: type[Exception],
    parse_error: type[Exception],
    slow: Callable[[Any], Any],
) -> None: ...
def decode(line: bytes | bytearray | memoryview | str) -> Any: ...

_Step = tuple[str, str, type | None, Callable[[Any], bool], bool | None]

def walk_fields(
    params: dict[str, Any],
    steps: tuple[_Step, ...],
    undeclared: Callable[[dict[str, Any], tuple[_Step, ...], dict[str, Any]], None],
) -> dict[str, Any] | int: ...
