"""How ``acp-fast client`` reaches an agent: a spawned process, a WebSocket, or Streamable HTTP.

Each opener returns a :class:`Link` whose ``client`` is a running
:class:`ClientSideConnection`; the transports differ only in how one JSON
line leaves and arrives. Every message can be shown to a ``tap`` (both
directions, as raw JSON bytes) for ``--json``; the tap sits at the Writer and
at the line sink, so it sees exactly what crossed the wire, in order.

The WebSocket and HTTP links (``ws_link.py``, ``http_link.py``) import their
libraries (the ``server`` extra) and the console imports them only for such a
URL, so the stdio console works on a plain install.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence

from ...client.connection import ClientHandler, ClientSideConnection
from ...peer.connection import Connection
from ...peer.flow import ReadControl
from ...peer.reader import ReadProtocol
from ...peer.writer import Writer
from ...transports.stdio import connect_stdio
from ...wire.frames import Oversized, Truncated
from ...wire.framing import new_framer
from ...wire.limits import Limits

#: ``tap(direction, message)``: direction is "send" (to the agent) or "recv" (from it).
Tap = Callable[[str, bytes], None]


class LinkError(Exception):
    """An expected failure to reach the agent (refused, bad handshake): one line for the user."""


class TapWriter(Writer):
    """A Writer that shows each outgoing message to the tap as it is queued."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits, tap: Tap | None) -> None:
        super().__init__(loop, limits)
        self.tap = tap

    def write(self, data: bytes) -> None:
        if self.tap is not None:
            for line in bytes(data).splitlines():
                if line:
                    self.tap("send", line)
        super().write(data)


class TapSink:
    """The Connection's line sink with the tap in front (stdio: the framer feeds this)."""

    def __init__(self, conn: Connection, tap: Tap) -> None:
        self._conn = conn
        self._tap = tap

    def feed_line(self, line: bytes | memoryview) -> None:
        self._tap("recv", bytes(line))
        self._conn.feed_line(line)

    def feed_oversized(self, event: Oversized) -> None:
        self._conn.feed_oversized(event)

    def feed_truncated(self, event: Truncated) -> None:
        self._conn.feed_truncated(event)

    def feed_eof(self, exc: BaseException | None) -> None:
        self._conn.feed_eof(exc)

    def feed_end(self) -> None:
        self._conn.feed_end()

    def reader_attached(self, reader: ReadControl) -> None:
        self._conn.reader_attached(reader)


class Link:
    """A running client connection and what ends it."""

    def __init__(self, client: ClientSideConnection) -> None:
        self.client = client

    def end_reason(self) -> str:
        """Why the connection ended, once it has: a phrase for the one-line error."""
        return "the connection closed"

    async def settle(self) -> None:
        """Give the far end a moment to finish ending, so ``end_reason`` can say how (bounded)."""

    async def close(self) -> None:
        """End the connection politely (EOF, close frame, DELETE), bounded."""
        try:
            async with asyncio.timeout(5):
                await self.client.close()
        except (TimeoutError, OSError):
            pass


class StdioLink(Link):
    """An agent subprocess, in its own session so a terminal's Ctrl-C reaches only the console."""

    def __init__(self, client: ClientSideConnection, process: asyncio.subprocess.Process) -> None:
        super().__init__(client)
        self.process = process

    def end_reason(self) -> str:
        code = self.process.returncode
        if code is None:
            return "the agent closed its output"
        if code < 0:
            try:
                return f"the agent was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"the agent was killed by signal {-code}"
        return f"the agent exited with status {code}"

    async def settle(self) -> None:
        """EOF usually comes a moment before the exit status: wait for it, briefly."""
        try:
            async with asyncio.timeout(2):
                await self.process.wait()
        except TimeoutError:
            pass

    async def close(self) -> None:
        await super().close()
        try:
            async with asyncio.timeout(5):
                await self.process.wait()
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


async def open_stdio(
    argv: Sequence[str], handler: ClientHandler, limits: Limits, tap: Tap | None = None
) -> StdioLink:
    """Spawn ``argv`` and speak ACP over its stdin/stdout (stderr stays the terminal's)."""
    loop = asyncio.get_running_loop()
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    try:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=to_agent_r, stdout=from_agent_w, start_new_session=True
            )
        except OSError as exc:
            raise LinkError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    finally:
        os.close(to_agent_r)
        os.close(from_agent_w)
    try:
        writer = TapWriter(loop, limits, tap)
        conn = Connection(loop, writer, limits, name="acp.client")
        client = ClientSideConnection(conn, handler)
        sink = conn if tap is None else TapSink(conn, tap)
        reader = ReadProtocol(sink, new_framer(limits), limits.read_buffer_bytes)
        await connect_stdio(loop, reader, writer, stdin_fd=from_agent_r, stdout_fd=to_agent_w)
    finally:
        os.close(from_agent_r)  # connect_stdio works on duplicates
        os.close(to_agent_w)
    client.run()
    return StdioLink(client, process)


# -- message transports (WebSocket, Streamable HTTP) ---------------------------------------


class MessageTransport(asyncio.WriteTransport):
    """The Writer's transport for a message-oriented link: each JSON line goes out on its own."""

    def __init__(self, send: Callable[[bytes], None], close: Callable[[], None]) -> None:
        super().__init__()
        self._send = send
        self._close = close
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        for line in bytes(data).split(b"\n"):
            if line:
                self._send(line)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._close()

    def abort(self) -> None:
        self.close()


class MessageReadControl:
    """What the Connection pauses, resumes and closes on a message link (a ``ReadControl``)."""

    def __init__(self, pause: Callable[[], None], resume: Callable[[], None], close: Callable[[], None]) -> None:
        self.pause_reading = pause
        self.resume_reading = resume
        self.close = close


def message_connection(
    limits: Limits,
    handler: ClientHandler,
    tap: Tap | None,
    send: Callable[[bytes], None],
    close: Callable[[], None],
    control: MessageReadControl,
) -> tuple[ClientSideConnection, Callable[[bytes], None]]:
    """A client connection over ``send``; returns it and the function each incoming message goes to."""
    loop = asyncio.get_running_loop()
    writer = TapWriter(loop, limits, tap)
    writer.attach(MessageTransport(send, close))
    conn = Connection(loop, writer, limits, name="acp.client")
    conn.reader_attached(control)
    client = ClientSideConnection(conn, handler)

    def deliver(message: bytes) -> None:
        if tap is not None:
            tap("recv", message)
        conn.feed_line(message)
        conn.feed_end()

    return client, deliver


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _os_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return _first_line(exc)
