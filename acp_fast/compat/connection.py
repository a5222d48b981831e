"""``AgentSideConnection`` and ``run_agent`` with the SDK's signatures, served by acp_fast.

The SDK's connection takes an ``asyncio.StreamWriter`` and ``StreamReader``
(its ``input_stream``/``output_stream``, named from the client's side), or
from 0.12 on one message ``Transport`` (``send``/``receive``/``close`` of
decoded dicts) as used by its HTTP and WebSocket serving. Both are bridged
onto acp_fast's own read protocol and Writer, so framing, ordering, limits
and backpressure are acp_fast's whatever the transport:

- a byte stream is read in chunks of ``Limits.read_buffer_bytes`` by one
  task that stops while the inbox is full, and written through the stream's
  own transport; ``drain()`` of the stream is what resumes a paused Writer;
- a message transport gets each outgoing line decoded and sent in order by
  one task; while more than the Writer's high-water mark waits for it,
  producers wait (R26).

``observers`` get the SDK's ``StreamEvent`` for every message in either
direction; ``receive_timeout`` ends the connection when the client stays
silent that long, and ``listen()`` then raises the SDK's -32603
``Agent timeout`` error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
from acp.exceptions import RequestError

from ..agent.server import AgentServer
from ..peer.connection import Connection
from ..peer.flow import ReadControl
from ..peer.reader import LineSink, ReadProtocol
from ..peer.writer import Writer
from ..transports.stdio import connect_stdio
from ..wire.frames import Oversized, Truncated
from ..wire.framing import new_framer
from ..wire.limits import Limits
from .agent import wrap_sdk_agent
from .client import SdkClient

log = logging.getLogger("acp_fast.compat")

#: The SDK's default for ``stdio_buffer_limit_bytes`` (50 MB): the size of a read, not a line cap.
DEFAULT_STDIO_BUFFER_LIMIT_BYTES = 50 * 1024 * 1024
#: A read never asks for more than this at once, whatever ``stdio_buffer_limit_bytes`` says.
MAX_READ_CHUNK = 4 * 1024 * 1024

Observer = Callable[[Any], Any]
_NO_HANDLER = repr("<none>")  # Connection.current_handler_name() while the dispatch loop is idle


def _stream_event(direction: str, message: dict[str, Any]) -> Any:
    from acp.connection import StreamDirection, StreamEvent

    return StreamEvent(StreamDirection(direction), message)


class _Observers:
    """Calls the SDK-style observers; a coroutine result runs as a task on the connection."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers = list(observers)
        self.peer: Connection | None = None

    def emit(self, direction: str, message: Any) -> None:
        if not isinstance(message, dict):
            return
        for observer in list(self.observers):
            try:
                result = observer(_stream_event(direction, message))
            except Exception:
                log.exception("stream observer failed")
                continue
            if inspect.isawaitable(result):
                peer = self.peer
                if peer is not None and peer.state.value == "open":
                    peer.spawn(_awaited(result), name=f"acp.compat.observer.{direction}")
                elif inspect.iscoroutine(result):
                    result.close()

    def emit_lines(self, direction: str, data: bytes | bytearray | memoryview) -> None:
        for line in bytes(data).split(b"\n"):
            if line.strip():
                try:
                    self.emit(direction, orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue


async def _awaited(result: Any) -> None:
    await result


_BLANK = frozenset(b" \t\r")


class _CompatSink:
    """Between the framer and the connection: skips whitespace-only lines as the SDK's reader
    does (acp_fast's own reader answers them -32700), and shows each line to the observers."""

    def __init__(self, conn: Connection, observers: _Observers | None) -> None:
        self._conn = conn
        self._observers = observers

    def feed_line(self, line: bytes | memoryview) -> None:
        if line[0] in _BLANK and not bytes(line).strip():
            return
        if self._observers is not None:
            with contextlib.suppress(orjson.JSONDecodeError):
                self._observers.emit("incoming", orjson.loads(line))
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


# -- read side ------------------------------------------------------------------------------------
class _PumpReadTransport(asyncio.ReadTransport):
    """What the read protocol pauses and resumes: the pump task waits while paused."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.closed = False

    def pause_reading(self) -> None:
        self.resumed.clear()

    def resume_reading(self) -> None:
        self.resumed.set()

    def is_reading(self) -> bool:
        return self.resumed.is_set()

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True
        self.resumed.set()


class _ReceiveTimeout(Exception):
    pass


async def _pump(
    protocol: ReadProtocol,
    control: _PumpReadTransport,
    read: Callable[[], Any],
    receive_timeout: float | None,
) -> None:
    """Feed ``protocol`` from ``read()`` (bytes, b"" at the end) until the end or close."""
    exc: Exception | None = None
    try:
        while not control.closed:
            await control.resumed.wait()
            if control.closed:
                break
            try:
                data = await asyncio.wait_for(read(), receive_timeout)
            except TimeoutError:
                raise _ReceiveTimeout from None
            if not data:
                protocol.eof_received()
                break
            protocol.data_received(data)
    except _ReceiveTimeout as err:
        exc = err
    except (OSError, asyncio.IncompleteReadError) as err:
        exc = err
    finally:
        protocol.connection_lost(exc if not isinstance(exc, _ReceiveTimeout) else None)
    if isinstance(exc, _ReceiveTimeout):
        raise exc


# -- write side -----------------------------------------------------------------------------------
class _StreamWriteTransport(asyncio.WriteTransport):
    """An ``asyncio.StreamWriter`` as the Writer's transport; its ``drain()`` resumes a paused Writer."""

    def __init__(self, stream: asyncio.StreamWriter, writer: Writer, observers: _Observers | None) -> None:
        super().__init__()
        self._stream = stream
        self._writer = writer
        self._observers = observers
        self._high = 64 * 1024
        self._low = 16 * 1024
        self._draining: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        self._stream.write(data)
        if self._observers is not None:
            self._observers.emit_lines("outgoing", data)
        if self._draining is None and self.get_write_buffer_size() > self._high:
            self._writer.pause_writing()
            self._draining = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            await self._stream.drain()
        except (OSError, RuntimeError) as exc:
            self._writer.connection_lost(exc)
            return
        finally:
            self._draining = None
        self._writer.resume_writing()

    def get_write_buffer_size(self) -> int:
        transport = self._stream.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = high if high is not None else self._high
        self._low = low if low is not None else self._low

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._closer = asyncio.get_running_loop().create_task(self._close())

    async def _close(self) -> None:
        with contextlib.suppress(Exception):
            await self._stream.drain()
        self._stream.close()
        with contextlib.suppress(Exception):
            await self._stream.wait_closed()
        self._writer.connection_lost(None)


class _MessageWriteTransport(asyncio.WriteTransport):
    """A message transport (``send(dict)``) as the Writer's transport: lines decoded, sent in order."""

    def __init__(self, transport: Any, writer: Writer, observers: _Observers | None) -> None:
        super().__init__()
        self._transport = transport
        self._writer = writer
        self._observers = observers
        self._queue: deque[bytes] = deque()
        self._size = 0
        self._high = 64 * 1024
        self._low = 16 * 1024
        self._paused = False
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._send_loop())

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        for line in bytes(data).split(b"\n"):
            if line.strip():
                self._queue.append(line)
                self._size += len(line)
        self._wake.set()
        if not self._paused and self._size > self._high:
            self._paused = True
            self._writer.pause_writing()

    async def _send_loop(self) -> None:
        failure: BaseException | None = None
        try:
            while True:
                while not self._queue:
                    if self._closing:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                line = self._queue.popleft()
                self._size -= len(line)
                message = orjson.loads(line)
                await self._transport.send(message)
                if self._observers is not None:
                    self._observers.emit("outgoing", message)
                if self._paused and self._size <= self._low:
                    self._paused = False
                    self._writer.resume_writing()
        except Exception as exc:
            failure = exc
        finally:
            if failure is None:
                with contextlib.suppress(Exception):
                    await self._transport.close()
            self._writer.connection_lost(failure)

    def get_write_buffer_size(self) -> int:
        return self._size

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = high if high is not None else self._high
        self._low = low if low is not None else self._low

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._wake.set()


#: Connection keywords of 0.8-0.10 that swap the SDK's own queue and dispatch parts; acp_fast has its own.
SDK_PLUMBING = frozenset({"queue", "state_store", "dispatcher_factory", "sender_factory"})


def _check_plumbing(kwargs: dict[str, Any]) -> None:
    unknown = sorted(set(kwargs) - SDK_PLUMBING)
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(unknown)}")
    if kwargs:
        log.warning("ignored %s: acp_fast uses its own bounded queue and dispatch", ", ".join(sorted(kwargs)))


def _is_message_transport(stream: Any) -> bool:
    return callable(getattr(stream, "receive", None)) and callable(getattr(stream, "send", None))


# -- the connection -------------------------------------------------------------------------------
class AgentSideConnection(SdkClient):
    """The SDK's ``AgentSideConnection(to_agent, input_stream, output_stream, listening=True, ...)``.

    ``to_agent`` is an agent or a factory called with this connection, which
    is also what the agent's ``on_connect`` gets: the SDK's client calls,
    plus ``_conn.send_request(method, params)``. ``input_stream`` is the
    stream written to (``StreamWriter``) and ``output_stream`` the one read
    from (``StreamReader``), as in the SDK; or ``input_stream`` is a message
    transport and ``output_stream`` None. Keywords beyond the SDK's:
    ``strict`` (see ``SdkAgent``) and ``limits``.
    """

    def __init__(
        self,
        to_agent: Any,
        input_stream: Any,
        output_stream: Any = None,
        listening: bool = True,
        *,
        use_unstable_protocol: bool = False,
        observers: list[Observer] | None = None,
        receive_timeout: float | None = None,
        strict: bool = False,
        limits: Limits | None = None,
        **sdk_plumbing: Any,
    ) -> None:
        super().__init__()
        _check_plumbing(sdk_plumbing)
        loop = asyncio.get_running_loop()
        limits = limits or Limits()
        self._acp_receive_timeout = receive_timeout
        self._acp_observers = _Observers(observers or [])
        watched = self._acp_observers if observers else None
        agent = wrap_sdk_agent(to_agent, use_unstable_protocol=use_unstable_protocol, strict=strict, sdk_client=self)
        writer = Writer(loop, limits)
        peer = Connection(loop, writer, limits)
        self._acp_observers.peer = peer
        self._acp_writer = writer
        self._acp_peer = peer
        self._acp_control = _PumpReadTransport()
        self._acp_task: asyncio.Task[None] | None = None
        self._acp_pump: asyncio.Task[None] | None = None
        self._acp_timed_out = False
        read: Callable[[], Any]
        if output_stream is None and _is_message_transport(input_stream):
            writer.attach(_MessageWriteTransport(input_stream, writer, watched))

            async def read_messages() -> bytes:
                message = await input_stream.receive()
                return b"" if message is None else orjson.dumps(message) + b"\n"

            read = read_messages
        elif callable(getattr(input_stream, "write", None)) and callable(getattr(output_stream, "read", None)):
            writer.attach(_StreamWriteTransport(input_stream, writer, watched))
            chunk = min(limits.read_buffer_bytes, MAX_READ_CHUNK)

            def read_bytes() -> Any:
                return output_stream.read(chunk)

            read = read_bytes
        else:
            raise TypeError(
                "AgentSideConnection needs an asyncio StreamWriter and StreamReader, or one message Transport"
            )
        self._acp_read = read
        self.server = AgentServer(agent, peer)  # calls the agent's on_connect with this connection
        sink: LineSink = _CompatSink(peer, watched)
        self._acp_protocol = ReadProtocol(sink, new_framer(limits), limits.read_buffer_bytes)
        self._acp_protocol.connection_made(self._acp_control)
        if listening:
            self._acp_start(loop)

    def _acp_start(self, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
        if self._acp_task is None:
            self._acp_pump = loop.create_task(
                _pump(self._acp_protocol, self._acp_control, self._acp_read, self._acp_receive_timeout)
            )
            self._acp_task = loop.create_task(self._acp_serve())
        return self._acp_task

    async def _acp_serve(self) -> None:
        try:
            await self._acp_peer.run()
        finally:
            pump = self._acp_pump
            if pump is not None:
                self._acp_control.close()
                if not pump.done():
                    pump.cancel()
                try:
                    await pump
                except _ReceiveTimeout:
                    self._acp_timed_out = True
                except asyncio.CancelledError:
                    pass

    def add_observer(self, observer: Observer) -> None:
        """Register a callback for every JSON-RPC message (from now on)."""
        self._acp_observers.observers.append(observer)

    async def listen(self) -> None:
        """Serve until the client's side ends (or ``close()``)."""
        await self._acp_start(asyncio.get_running_loop())
        if self._acp_timed_out:
            raise RequestError.internal_error({"details": "Agent timeout"})

    async def close(self) -> None:
        """End the read side and shut down in order (prompts cancelled, answers flushed).

        A control handler still running (a hung ``initialize``) holds the
        dispatch loop, so it is cancelled, as the SDK cancels every handler
        on close; the request it was serving is answered by the shutdown.
        """
        self._acp_control.close()
        self._acp_protocol.connection_lost(None)
        task = self._acp_start(asyncio.get_running_loop())
        if self._acp_peer.current_handler_name() != _NO_HANDLER and not task.done():
            task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(task)

    async def __aenter__(self) -> AgentSideConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def on_connect(self, conn: Any) -> None:
        """The SDK's connection has this no-op hook too."""


def use_in_sdk_http_server() -> bool:
    """Make the SDK's HTTP/WebSocket serving (``acp.http.server``, 0.12 on) build compat's connection.

    The SDK's ``AcpServer`` creates its ``AgentSideConnection`` itself and takes
    no other class; this points the name it uses at compat's, so every
    connection it opens runs on acp_fast. False when the installed release has
    no HTTP serving.
    """
    try:
        from acp.http import server as http_server
    except ImportError:
        return False
    setattr(http_server, "AgentSideConnection", AgentSideConnection)  # noqa: B010 - a name the SDK module keeps private
    return True


async def run_agent(
    agent: Any,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    use_unstable_protocol: bool = False,
    stdio_buffer_limit_bytes: int = DEFAULT_STDIO_BUFFER_LIMIT_BYTES,
    observers: list[Observer] | None = None,
    receive_timeout: float | None = None,
    strict: bool = False,
    limits: Limits | None = None,
    **sdk_plumbing: Any,
) -> None:
    """Drop-in for ``acp.run_agent``: serve the SDK agent until the client's side ends.

    Without streams it serves stdin/stdout on acp_fast's pipe transports;
    with them it is ``AgentSideConnection(...).listen()``.
    ``stdio_buffer_limit_bytes`` is, as in the SDK, the size of the read
    buffer; lines longer than it are still accepted (acp_fast's own line
    limit, ``Limits.max_line_bytes``, 64 MiB by default, is what caps a line).
    """
    _check_plumbing(sdk_plumbing)
    limits = replace(limits or Limits(), read_buffer_bytes=min(stdio_buffer_limit_bytes, MAX_READ_CHUNK))
    kwargs: dict[str, Any] = {
        "use_unstable_protocol": use_unstable_protocol,
        "observers": observers,
        "receive_timeout": receive_timeout,
        "strict": strict,
        "limits": limits,
    }
    if input_stream is None and output_stream is None:
        await _serve_stdio(agent, **kwargs)
        return
    conn = AgentSideConnection(agent, input_stream, output_stream, listening=False, **kwargs)
    try:
        await conn.listen()
    finally:
        await asyncio.shield(conn.close())


async def _serve_stdio(
    agent: Any,
    *,
    use_unstable_protocol: bool,
    observers: list[Observer] | None,
    receive_timeout: float | None,
    strict: bool,
    limits: Limits,
) -> None:
    """stdin/stdout through the loop's pipe transports (zero-copy reads on uvloop)."""
    if receive_timeout is not None:  # the timed read needs the pumped path
        reader, writer = await _stdio_streams(limits.read_buffer_bytes)
        await run_agent(
            agent,
            writer,
            reader,
            use_unstable_protocol=use_unstable_protocol,
            observers=observers,
            receive_timeout=receive_timeout,
            strict=strict,
            limits=limits,
        )
        return
    loop = asyncio.get_running_loop()
    watched = _Observers(observers or [])
    writer_ = Writer(loop, limits)
    peer = Connection(loop, writer_, limits)
    watched.peer = peer
    sdk_client = SdkClient()
    AgentServer(
        wrap_sdk_agent(agent, use_unstable_protocol=use_unstable_protocol, strict=strict, sdk_client=sdk_client), peer
    )
    sink: LineSink = _CompatSink(peer, watched if observers else None)
    protocol = ReadProtocol(sink, new_framer(limits), limits.read_buffer_bytes)
    await connect_stdio(loop, protocol, writer_)
    if observers:
        _observe_writes(writer_, watched)
    await peer.run()


def _observe_writes(writer: Writer, watched: _Observers) -> None:
    """Wrap the stdout transport so observers see outgoing messages too."""
    transport: Any = writer._transport
    original = transport.write

    def write(data: bytes | bytearray | memoryview) -> None:
        original(data)
        watched.emit_lines("outgoing", data)

    transport.write = write


async def _stdio_streams(limit: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio streams over stdin/stdout, as the SDK's ``stdio_streams`` opens them."""
    import os
    import sys

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(0), "rb", 0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(sys.stdout.fileno()), "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer


__all__ = ["DEFAULT_STDIO_BUFFER_LIMIT_BYTES", "AgentSideConnection", "run_agent", "use_in_sdk_http_server"]
