"""What the sender of an outgoing line knows about it, so a transport that sorts lines need not parse them.

Streamable HTTP puts each outgoing message on one of several event streams
(transports/routing.py), chosen by its kind, its id and its session. The code
that encodes a message knows all three; ``Writer.route`` passes them along
with the line (peer/writer.py ``RoutedWriter``) instead of the transport
reading them back out of the JSON.
"""

from __future__ import annotations

from typing import Any

#: The kind of message a line is.
ANSWER, ERROR, REQUEST, NOTIFICATION = 1, 2, 3, 4

#: ``(kind, JSON-RPC id or None, session id or None)``.
Route = tuple[int, Any, "str | None"]
