"""Newline framing: picks the Cython framer, or its pure-Python twin.

``ACP_FAST_NO_EXTENSIONS=1`` or a failed import of the extension selects the
pure-Python framer (``extensions.load``); ``IMPLEMENTATION`` says which one is live ("c" or "python").
Both have the same API and produce the same lines and events:

- ``LineFramer(max_line_bytes, head_bytes).feed(data)`` returns a list of
  complete lines (``\\n`` and a preceding ``\\r`` stripped, empty and
  whitespace-only lines skipped) and :class:`Oversized` events. A line that lies wholly inside
  ``data`` is a memoryview into it (valid until ``data`` is reused); only a
  line spanning chunks is assembled into new bytes.
- ``close()`` ends the stream and returns a :class:`Truncated` for a final
  line without ``\\n``, else None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import extensions
from .frames import Oversized, Truncated
from .limits import Limits

if TYPE_CHECKING:
    from ._framing_py import LineFramer as LineFramer

    IMPLEMENTATION: str
else:
    _compiled = extensions.load("acp_fast.wire._framing")
    if _compiled is None:
        from ._framing_py import LineFramer
    else:
        LineFramer = _compiled.LineFramer
    IMPLEMENTATION = extensions.implementation(_compiled)

#: Why the pure-Python framer is live although nobody asked for it (None: compiled, or asked for).
FALLBACK_REASON: str | None = None
if "acp_fast.wire._framing" in extensions.MISSING:
    FALLBACK_REASON = f"the compiled framer is not installed ({extensions.MISSING['acp_fast.wire._framing']})"

Frame = bytes | memoryview | Oversized


def new_framer(limits: Limits) -> LineFramer:
    """A framer of the live implementation, configured from ``limits``."""
    return LineFramer(limits.max_line_bytes, limits.overlimit_head_bytes)


__all__ = ["FALLBACK_REASON", "IMPLEMENTATION", "Frame", "LineFramer", "Oversized", "Truncated", "new_framer"]
