"""The client end of an ACP connection, on the same symmetric peer (R20-R23).

``ClientSideConnection`` wraps a ``dispatch.Connection`` the way
``AgentServer`` does on the other side: it answers the agent's requests
(permission, fs, terminal, elicitation) through a :class:`ClientHandler`,
in spawned tasks so they never hold the dispatch loop, and routes
``session/update`` notifications to the session they belong to.

Sessions come from a builder (R23)::

    await client.initialize()
    text = await client.build_session("/repo").run_until(lambda s: s.prompt_text("hi"))

``run_until`` sends ``session/new`` and waits for the response on the
*current* task; calling it from an ordered handler would wait for a
response that the held loop can never route, so it raises DeadlockError at
once, like awaiting any request there (R21). The session's update routing is
installed by an ordered result callback, on the loop, before the next
message is read (R20), so no update that follows the response is lost.

Each session buffers at most ``Limits.max_inbox`` updates; when the buffer
is full the dispatch loop waits for the consumer, and reading from the agent
pauses (backpressure, nothing is dropped). ``prompt`` consumes updates while
its turn runs, so an ordinary turn never fills it.

``connect_in_memory`` (an agent in the same loop, no pipes) and
``spawn_agent`` (a subprocess over real pipes) build ready connections.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..agent.base import Agent
from ..agent.methods import PROTOCOL_VERSION
from ..peer.connection import Connection, IncomingRequest
from ..peer.memory import link
from ..peer.reader import ReadProtocol
from ..peer.writer import Writer
from ..transports.stdio import connect_stdio
from ..wire.errors import AcpError, DeadlockError, InvalidParams, MethodNotFound, RequestCancelled
from ..wire.framing import new_framer
from ..wire.jsonrpc import Notification
from ..wire.limits import Limits

if TYPE_CHECKING:
    from ..agent.server import AgentServer

log = logging.getLogger(__name__)

T = TypeVar("T")
Params = dict[str, Any]

_UNIMPLEMENTED = "__acp_client_unimplemented__"


def _unimplemented(fn: Callable[..., Any]) -> Callable[..., Any]:
    setattr(fn, _UNIMPLEMENTED, True)
    return fn


class ClientHandler:
    """Answers the agent's requests; override what this client supports.

    Each method gets the wire params (camelCase dict) and returns the wire
    result. A method left as inherited answers -32601 and is not advertised
    in ``initialize``'s ``clientCapabilities``.
    """

    @_unimplemented
    async def request_permission(self, params: Params) -> Params:
        raise MethodNotFound("session/request_permission")

    @_unimplemented
    async def read_text_file(self, params: Params) -> Params:
        raise MethodNotFound("fs/read_text_file")

    @_unimplemented
    async def write_text_file(self, params: Params) -> Params:
        raise MethodNotFound("fs/write_text_file")

    @_unimplemented
    async def create_terminal(self, params: Params) -> Params:
        raise MethodNotFound("terminal/create")

    @_unimplemented
    async def terminal_output(self, params: Params) -> Params:
        raise MethodNotFound("terminal/output")

    @_unimplemented
    async def wait_for_terminal_exit(self, params: Params) -> Params:
        raise MethodNotFound("terminal/wait_for_exit")

    @_unimplemented
    async def kill_terminal(self, params: Params) -> Params:
        raise MethodNotFound("terminal/kill")

    @_unimplemented
    async def release_terminal(self, params: Params) -> Params:
        raise MethodNotFound("terminal/release")

    @_unimplemented
    async def create_elicitation(self, params: Params) -> Params:
        raise MethodNotFound("elicitation/create")

    # MCP over ACP for servers this client hosts and declared as {"type": "acp"} (R17).
    @_unimplemented
    async def mcp_connect(self, params: Params) -> Params:
        raise MethodNotFound("mcp/connect")

    @_unimplemented
    async def mcp_message(self, params: Params) -> Any:
        """``params`` is the outer ``{connectionId, method, params?}``; return the inner result."""
        raise MethodNotFound("mcp/message")

    @_unimplemented
    async def mcp_disconnect(self, params: Params) -> Params:
        raise MethodNotFound("mcp/disconnect")

    def implements(self, attr: str) -> bool:
        fn = getattr(type(self), attr, None)
        return fn is not None and not getattr(fn, _UNIMPLEMENTED, False)

    def capabilities(self) -> Params:
        """``clientCapabilities`` for what this handler implements."""
        caps: Params = {
            "fs": {
                "readTextFile": self.implements("read_text_file"),
                "writeTextFile": self.implements("write_text_file"),
            },
            "terminal": self.implements("create_terminal"),
        }
        return caps


#: Agent->client request method -> ClientHandler attribute.
HANDLER_OF: dict[str, str] = {
    "session/request_permission": "request_permission",
    "fs/read_text_file": "read_text_file",
    "fs/write_text_file": "write_text_file",
    "terminal/create": "create_terminal",
    "terminal/output": "terminal_output",
    "terminal/wait_for_exit": "wait_for_terminal_exit",
    "terminal/kill": "kill_terminal",
    "terminal/release": "release_terminal",
    "elicitation/create": "create_elicitation",
    "mcp/connect": "mcp_connect",
    "mcp/message": "mcp_message",
    "mcp/disconnect": "mcp_disconnect",
}


class _UpdateBuffer:
    """A bounded FIFO the dispatch loop fills and one consumer drains."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[Params] = deque()
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    async def put(self, item: Params) -> None:
        while len(self._items) >= self.capacity:  # backpressure onto the dispatch loop
            self._changed.clear()
            await self._changed.wait()
        self._items.append(item)
        self._changed.set()

    def pop_all(self) -> list[Params]:
        items = list(self._items)
        self._items.clear()
        self._changed.set()
        return items

    def pop(self) -> Params | None:
        if not self._items:
            return None
        item = self._items.popleft()
        self._changed.set()
        return item

    def changed(self) -> Coroutine[Any, Any, bool]:
        """Wait for the next put/pop; armed now, not when the waiter first runs."""
        self._changed.clear()
        return self._changed.wait()


class PromptResult:
    """One finished turn: the response and every update drained while it ran."""

    __slots__ = ("response", "updates")

    def __init__(self, response: Params, updates: list[Params]) -> None:
        self.response = response
        self.updates = updates

    @property
    def stop_reason(self) -> str:
        return str(self.response.get("stopReason"))

    @property
    def text(self) -> str:
        """The concatenated text of the turn's ``agent_message_chunk`` updates."""
        parts = []
        for u in self.updates:
            content = u.get("content")
            if u.get("sessionUpdate") == "agent_message_chunk" and isinstance(content, dict):
                text = content.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)


class ClientSession:
    """A session as the client sees it; updates arrive in ``session/update`` order."""

    def __init__(self, client: ClientSideConnection, session_id: str, result: Params) -> None:
        self.client = client
        self.id = session_id
        self.result = result
        self._updates = _UpdateBuffer(client.conn.limits.max_inbox)

    def pending_updates(self) -> list[Params]:
        """Take every update received so far (outside a turn, e.g. available commands)."""
        return self._updates.pop_all()

    async def next_update(self) -> Params:
        """Wait for the next update of this session."""
        while True:
            item = self._updates.pop()
            if item is not None:
                return item
            run = self.client._run_task
            if run is not None and run.done():
                raise ConnectionError("the connection ended while waiting for session updates")
            await self._wait_changed()

    async def _wait_changed(self, also: asyncio.Future[Any] | None = None) -> None:
        """Until an update arrives, ``also`` finishes, or the connection ends."""
        waiter = asyncio.ensure_future(self._updates.changed())
        futures: set[asyncio.Future[Any]] = {waiter}
        if also is not None:
            futures.add(also)
        if self.client._run_task is not None:
            futures.add(self.client._run_task)
        try:
            await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    async def prompt(
        self, prompt: str | list[Params], on_update: Callable[[Params], None] | None = None
    ) -> PromptResult:
        """Send ``session/prompt`` and drain updates until its response (R05: all came first).

        ``on_update`` sees each update as it is drained, so a console can show a turn while it runs.
        """
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt
        pending = self.client.conn.send_request("session/prompt", {"sessionId": self.id, "prompt": blocks})
        answer: asyncio.Future[Any] = asyncio.ensure_future(_await(pending))
        collected: list[Params] = []

        def take() -> None:
            items = self._updates.pop_all()
            if on_update is not None:
                for item in items:
                    on_update(item)
            collected.extend(items)

        try:
            while True:
                take()
                if answer.done():
                    break
                await self._wait_changed(answer)
        finally:
            if not answer.done():
                answer.cancel()
        response = answer.result()
        take()  # routed before the response, so already here
        return PromptResult(response if isinstance(response, dict) else {}, collected)

    async def prompt_text(self, prompt: str) -> str:
        return (await self.prompt(prompt)).text

    def cancel(self) -> None:
        """``session/cancel``: the running turn ends with ``stopReason: "cancelled"``."""
        self.client.conn.send_notification("session/cancel", {"sessionId": self.id})

    async def request(self, method: str, params: Params | None = None) -> Any:
        """Any session-scoped request (``session/set_mode``...), ``sessionId`` filled in."""
        return await self.client.conn.send_request(method, {"sessionId": self.id, **(params or {})})


async def _await(pending: Awaitable[T]) -> T:
    return await pending


class SessionBuilder:
    """``client.build_session(cwd).mcp_servers([...]).run_until(fn)`` (R23)."""

    def __init__(self, client: ClientSideConnection, cwd: str) -> None:
        self._client = client
        self._params: Params = {"cwd": cwd, "mcpServers": []}

    def mcp_servers(self, servers: Sequence[Params]) -> SessionBuilder:
        self._params["mcpServers"] = list(servers)
        return self

    def additional_directories(self, dirs: Sequence[str]) -> SessionBuilder:
        self._params["additionalDirectories"] = list(dirs)
        return self

    async def start(self) -> ClientSession:
        """Send ``session/new`` and wait for it on the current task."""
        conn = self._client.conn
        if conn.in_dispatch_loop():
            raise DeadlockError(
                f"build_session(...).run_until() inside ordered handler {conn.current_handler_name()} "
                "would deadlock: the session/new response is routed by the loop this handler is "
                "holding. Call it from a spawned task (conn.spawn) instead."
            )
        pending = conn.send_request("session/new", self._params)
        holder: list[ClientSession] = []

        async def register(result: Any, error: AcpError | None) -> None:
            # On the loop, before the next message (R20): updates right behind the response route.
            if error is None and isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                holder.append(self._client._register(result["sessionId"], result))

        pending.on_result(register)
        result = await pending
        if not holder:
            raise InvalidParams(f"session/new answered without a sessionId: {result!r}")
        return holder[0]

    async def run_until(self, fn: Callable[[ClientSession], Awaitable[T]]) -> T:
        """Build the session, then run ``fn(session)`` and return its result."""
        session = await self.start()
        try:
            return await fn(session)
        finally:
            self._client._sessions.pop(session.id, None)


class ClientSideConnection:
    """The client's side of one ACP connection."""

    def __init__(self, conn: Connection, handler: ClientHandler | None = None) -> None:
        self.conn = conn
        self.handler = handler or ClientHandler()
        self.agent_capabilities: Params = {}
        self.init_result: Params = {}
        self._sessions: dict[str, ClientSession] = {}
        self._serving: dict[str | int, asyncio.Task[Any]] = {}
        self._run_task: asyncio.Task[Any] | None = None
        conn.on_receive_request(self._on_request, "acp_fast.ClientSideConnection.request")
        conn.on_receive_notification(self._on_notification, "acp_fast.ClientSideConnection.notification")

    def run(self) -> asyncio.Task[None]:
        """Start the dispatch loop in its own task (once)."""
        if self._run_task is None:
            self._run_task = self.conn.loop.create_task(self.conn.run(), name=f"{self.conn.name}.run")
        return self._run_task

    async def initialize(
        self,
        protocol_version: int = PROTOCOL_VERSION,
        client_capabilities: Params | None = None,
        client_info: Params | None = None,
    ) -> Params:
        params: Params = {
            "protocolVersion": protocol_version,
            "clientCapabilities": client_capabilities
            if client_capabilities is not None
            else self.handler.capabilities(),
        }
        if client_info is not None:
            params["clientInfo"] = client_info
        result: Params = await self.conn.send_request("initialize", params)
        self.init_result = result
        self.agent_capabilities = result.get("agentCapabilities") or {}
        return result

    def build_session(self, cwd: str) -> SessionBuilder:
        return SessionBuilder(self, cwd)

    async def load_session(
        self, session_id: str, cwd: str, mcp_servers: Sequence[Params] = ()
    ) -> ClientSession:
        """``session/load``: routed before the request leaves, so the replay it streams is kept."""
        previous = self._sessions.get(session_id)
        session = self._register(session_id, {})
        try:
            params = {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
            session.result = await self.conn.send_request("session/load", params) or {}
        except BaseException:
            if previous is not None:  # a failed re-load leaves the session it had
                self._sessions[session_id] = previous
            else:
                self._sessions.pop(session_id, None)
            raise
        return session

    def forget_session(self, session_id: str) -> None:
        """Stop routing a session's updates (another session took its place in a console)."""
        self._sessions.pop(session_id, None)

    def _register(self, session_id: str, result: Params) -> ClientSession:
        session = ClientSession(self, session_id, result)
        self._sessions[session_id] = session
        return session

    # -- incoming -----------------------------------------------------------------------
    async def _on_request(self, req: IncomingRequest) -> bool:
        attr = HANDLER_OF.get(req.method)
        if attr is None:
            return False  # another handler may claim it; else -32601
        params = req.params if isinstance(req.params, dict) else {}
        fn: Callable[[Params], Awaitable[Any]] = getattr(self.handler, attr)
        task = self.conn.spawn(self._serve(req, fn, params), name=f"acp.client.{req.method}:{req.id}")
        self._serving[req.id] = task
        return True

    async def _serve(self, req: IncomingRequest, fn: Callable[[Params], Awaitable[Any]], params: Params) -> None:
        try:
            req.respond(await fn(params))
        except asyncio.CancelledError:
            req.respond_error(RequestCancelled())
        except Exception as exc:
            req.respond_error(exc)
        finally:
            self._serving.pop(req.id, None)

    async def _on_notification(self, note: Notification) -> bool:
        params = note.params if isinstance(note.params, dict) else {}
        if note.method == "session/update":
            session = self._sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            update = params.get("update")
            if session is None or not isinstance(update, dict):
                log.debug("session/update for an unknown session dropped")
                return True
            await session._updates.put(update)
            return True
        if note.method == "$/cancel_request":
            task = self._serving.get(params.get("requestId"))  # type: ignore[arg-type]
            if task is not None:
                task.cancel()
            return True
        return False

    async def close(self) -> None:
        """Close our write side (the agent sees EOF) and wait for the connection to end."""
        await self.conn.writer.close()
        if self._run_task is not None:
            await self._run_task


# -- ready-made connections --------------------------------------------------------------


class InMemoryPair:
    """An agent and a client in one loop, joined by in-memory pipes."""

    def __init__(self, client: ClientSideConnection, server: AgentServer, server_task: asyncio.Task[None]) -> None:
        self.client = client
        self.server = server
        self.server_task = server_task

    async def close(self) -> None:
        """EOF to the agent, then wait for both sides to finish their shutdown."""
        await self.client.close()
        await self.server_task


def connect_in_memory(
    agent: Agent, handler: ClientHandler | None = None, limits: Limits | None = None
) -> InMemoryPair:
    """Serve ``agent`` on an in-memory connection and return the client side, running."""
    from ..agent.server import AgentServer

    loop = asyncio.get_running_loop()
    limits = limits or Limits()
    a_writer, c_writer = Writer(loop, limits), Writer(loop, limits)
    a_conn = Connection(loop, a_writer, limits, name="acp.agent")
    c_conn = Connection(loop, c_writer, limits, name="acp.client")
    server = AgentServer(agent, a_conn)
    client = ClientSideConnection(c_conn, handler)
    link(loop, c_writer, ReadProtocol(a_conn, new_framer(limits), limits.read_buffer_bytes))
    link(loop, a_writer, ReadProtocol(c_conn, new_framer(limits), limits.read_buffer_bytes))
    server_task = loop.create_task(a_conn.run(), name="acp.agent.run")
    client.run()
    return InMemoryPair(client, server, server_task)


class AgentProcess:
    """An agent subprocess and the client connection to it over its stdio pipes."""

    def __init__(self, client: ClientSideConnection, process: asyncio.subprocess.Process) -> None:
        self.client = client
        self.process = process

    async def close(self) -> int:
        """Close the agent's stdin, wait for it to exit and for our side to drain."""
        await self.client.close()
        return await self.process.wait()


async def spawn_agent(
    argv: Sequence[str],
    handler: ClientHandler | None = None,
    limits: Limits | None = None,
    stderr: int | None = None,
    env: dict[str, str] | None = None,
) -> AgentProcess:
    """Start ``argv`` as an ACP agent and connect to it over real pipes."""
    loop = asyncio.get_running_loop()
    limits = limits or Limits()
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=to_agent_r, stdout=from_agent_w, stderr=stderr, env=env
        )
    finally:
        os.close(to_agent_r)
        os.close(from_agent_w)
    try:
        writer = Writer(loop, limits)
        conn = Connection(loop, writer, limits, name="acp.client")
        client = ClientSideConnection(conn, handler)
        reader = ReadProtocol(conn, new_framer(limits), limits.read_buffer_bytes)
        await connect_stdio(loop, reader, writer, stdin_fd=from_agent_r, stdout_fd=to_agent_w)
    finally:
        os.close(from_agent_r)  # connect_stdio works on duplicates
        os.close(to_agent_w)
    client.run()
    return AgentProcess(client, process)
