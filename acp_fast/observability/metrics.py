"""Prometheus metrics: one C call per answered request, ``prometheus_client`` families at scrape time.

Why not ``prometheus_client.Histogram.observe`` per request: each call takes a
lock and walks label dictionaries, a cost paid per message whether anyone
scrapes or not. Here a request made through the recorder's request type (the
connection's ``request_type`` while metrics are on) reads the clock when it is
made, and its answer goes to :class:`~.timing.Timings` (compiled, see
``_timing.pyx``), which reads the clock again and adds one to a bucket; the
rarer outcomes (errors, prompts, cancels) go to plain :class:`~.timing.Histogram`
objects from Python. :class:`AcpCollector` turns those, and the counts the
host keeps anyway (``AcpHost.counts``, ``AcpHost.refused``), into metric
families when ``GET /metrics`` arrives. Everything runs on the event loop's
thread, so nothing needs a lock.

Label values are bounded: methods outside the ACP method table are reported as
``_extension`` or ``unknown``, stop reasons outside the ACP set as ``other``,
error codes outside the JSON-RPC reserved range as ``other``; no session or
connection id is ever a label.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from ..agent.methods import AGENT_METHODS
from ..agent.server import AgentServer
from ..peer.connection import Connection, IncomingRequest, Meter
from ..transports.client_faults import ClientFaults
from ..wire import jsonrpc
from ..wire.errors import PromptInProgress, ServerBusy, from_exception
from ..wire.limits import Limits
from ..wire.routes import ANSWER
from .timing import Histogram, Timings, now

log = logging.getLogger(__name__)

#: Request duration buckets (seconds): control answers take microseconds, prompts minutes.
REQUEST_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
#: Prompt turn buckets (seconds).
PROMPT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
#: Cancel latency buckets (seconds): a well-behaved agent answers within milliseconds; the watchdog
#: answers for a stuck one after ``cancel_grace_s`` (R30, default 2 s), hence the upper buckets.
CANCEL_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Event-loop lag buckets (seconds).
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: How often the lag probe wakes: one timer per interval, whatever the load.
LAG_PROBE_INTERVAL_S = 0.5
#: The stop reasons ACP defines; any other value an agent returns is reported as ``other``.
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
#: The lane of each method, read at scrape time (never per request).
_LANES = {name: spec.lane.value for name, spec in AGENT_METHODS.items()}
#: Answers the recorder looks at beyond their duration (a prompt's stop reason).
_WATCHED = frozenset({"session/prompt"})


def buckets(h: Histogram) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs of ``h``, as the exposition wants them."""
    out: list[tuple[str, float]] = []
    running = 0
    counts = h.counts()
    for bound, count in zip(h.bounds, counts, strict=False):
        running += count
        out.append((repr(bound), running))
    out.append(("+Inf", running + counts[-1]))
    return out


def method_label(method: str) -> str:
    """A bounded label for a method name: the ACP table's names, else ``_extension`` or ``unknown``."""
    if method in _LANES:
        return method
    return "_extension" if method.startswith("_") else "unknown"


def code_label(code: int) -> str:
    """A bounded label for a JSON-RPC error code: the reserved range (-32768..-32000) as is, else ``other``."""
    return str(code) if -32768 <= code <= -32000 else "other"


def busy_reason(exc: BaseException) -> str | None:
    """Why a -32000 refusal was given, for ``acp_requests_refused_total``; None when it is no refusal."""
    if isinstance(exc, PromptInProgress):
        return "session_busy"
    if not isinstance(exc, ServerBusy):
        return None
    text = str(exc)
    if "prompts running in this process" in text:
        return "process_prompts"
    if "sessions open or parked" in text:
        return "process_sessions"
    if "background requests" in text:
        return "pool_full"
    return "other"


class Recorder:
    """The histograms and counts one process (a host, or one stdio agent) records into."""

    def __init__(self) -> None:
        self.timings = Timings(REQUEST_BUCKETS, method_label, _WATCHED)  # answers, by method label
        self.errors: dict[tuple[str, str], Histogram] = {}  # error answers, by (method label, code label)
        self.prompts: dict[str, Histogram] = {}  # by stop reason
        self.cancel_latency = Histogram(CANCEL_BUCKETS)
        self.refused: dict[str, int] = {}
        self.bad_input: dict[int, int] = {}
        self.ws_closes: dict[int, int] = {}
        self.loop_lag = Histogram(LAG_BUCKETS)
        self.loop_lag_last = 0.0
        #: The class the connections make incoming requests with while this recorder is in use.
        self.request_type = _timed_request_type(self)

    def requests(self) -> list[tuple[tuple[str, str], Histogram]]:
        """Every request histogram by ``(method label, outcome)``, outcome ``ok`` or an error code label."""
        pairs = [((label, "ok"), h) for label, h in self.timings.histograms()]
        return sorted(pairs + list(self.errors.items()), key=lambda kv: kv[0])

    def answered(self, req: TimedRequest, result: Any, seconds: float) -> None:
        """A prompt's answer: its stop reason, and its cancel's latency (its duration is recorded)."""
        reason = result.get("stopReason") if type(result) is dict else None
        self._prompt(reason if reason in STOP_REASONS else "other", seconds)
        if req.cancelled_at:
            self.cancel_latency.observe(now() - req.cancelled_at)

    def failed(self, req: TimedRequest, exc: BaseException) -> None:
        end = now()
        code = from_exception(exc).code
        key = (method_label(req.method), code_label(code))
        h = self.errors.get(key)
        if h is None:
            h = self.errors[key] = Histogram(REQUEST_BUCKETS)
        h.observe(end - req.started)
        reason = busy_reason(exc)
        if reason is not None:
            self.refused[reason] = self.refused.get(reason, 0) + 1
        if req.method == "session/prompt" and reason is None:
            self._prompt("error", end - req.started)
        if req.cancelled_at:
            self.cancel_latency.observe(end - req.cancelled_at)

    def _prompt(self, reason: str, seconds: float) -> None:
        h = self.prompts.get(reason)
        if h is None:
            h = self.prompts[reason] = Histogram(PROMPT_BUCKETS)
        h.observe(seconds)

    def bad_line(self, code: int) -> None:
        self.bad_input[code] = self.bad_input.get(code, 0) + 1

    def ws_closed(self, code: int) -> None:
        self.ws_closes[code] = self.ws_closes.get(code, 0) + 1

    def instrument(self, conn: Connection) -> None:
        """Make ``conn``'s incoming requests timed and its bad lines counted (before it reads anything)."""
        conn.request_type = self.request_type
        conn.meter = Meter(now, self.bad_line)


class TimedRequest(IncomingRequest):
    """An incoming request that knows when it arrived and when its first cancel came.

    Recording its answer is the subclass's (:func:`_timed_request_type`), which
    holds its recorder in closure cells: one per-message cost less than an
    attribute looked up through the class.
    """

    __slots__ = ("cancelled_at", "started")

    def __init__(self, conn: Connection, id: str | int, method: str, params: Any) -> None:
        self._conn = conn  # IncomingRequest.__init__, inline: one frame less per request
        self.id = id
        self.method = method
        self.params = params
        self.answered = False
        self.cancelled_at = 0.0
        self.started = conn.meter.at  # type: ignore[union-attr]  # Recorder.instrument set it

    def cancel_received(self) -> None:
        if not self.cancelled_at:
            self.cancelled_at = now()


def _timed_request_type(recorder: Recorder) -> type[TimedRequest]:
    """The request type of ``recorder``'s connections (written for the per-message cost, issue 24).

    Per answer: ``IncomingRequest.respond``'s write inline, then one call into
    the compiled timings, which returns True only for a prompt.
    """
    since = recorder.timings.since
    timings = recorder.timings

    class BoundTimedRequest(TimedRequest):
        __slots__ = ()

        def respond(self, result: Any) -> None:
            if self.answered:  # the base class logs and drops a second answer
                IncomingRequest.respond(self, result)
                return
            try:
                data = _encode_result(self.id, result)
            except TypeError:  # the base class logs it and answers -32603 through respond_error
                IncomingRequest.respond(self, result)
                return
            self.answered = True
            conn = self._conn
            conn._incoming.pop(self.id, None)
            writer = conn.writer
            if writer.routed:  # Streamable HTTP: the answer's route goes with it (wire/routes.py)
                writer.route(ANSWER, self.id, None)
            writer.write(data)
            if since(self.method, self.started):  # other cancelled requests are answered -32800: respond_error
                recorder.answered(self, result, timings.last)

        def respond_error(self, exc: BaseException) -> None:
            was = self.answered
            IncomingRequest.respond_error(self, exc)
            if not was:
                recorder.failed(self, exc)

    return BoundTimedRequest


_encode_result = jsonrpc.encode_result


class HostView(Protocol):
    """What the collector reads of an ``AcpHost`` (hosting/server.py); kept structural to respect the layers."""

    @property
    def counts(self) -> dict[str, int]: ...

    refused: dict[int, int]
    draining: bool
    client_faults: ClientFaults


class _Attached(Protocol):
    @property
    def buffered_output(self) -> int: ...

    @property
    def reading_paused(self) -> bool: ...


class Metrics:
    """The metrics of one process: the recorder, the attached connections, the lag probe and the scrape."""

    def __init__(self, host: HostView | None = None, transport: str = "stdio") -> None:
        self.recorder = Recorder()
        self.host = host
        self.transport = transport  # the connections' transport when there is no host (stdio)
        self.servers: dict[Any, AgentServer] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(AcpCollector(self))
        ProcessCollector(registry=self.registry)
        self._probe: asyncio.TimerHandle | None = None
        self._listener: asyncio.Server | None = None
        self.group: str | None = None  # the worker group's socket directory (--workers N)
        self._group_listener: asyncio.Server | None = None
        self._scrapes: set[asyncio.Task[Any]] = set()

    # -- connections ---------------------------------------------------------------------------
    def attach(self, peer: Any, server: AgentServer) -> None:
        """A connection began: time its requests; its pool and output are read at scrape time."""
        self.recorder.instrument(server.conn)
        self.servers[peer] = server

    def detach(self, peer: Any) -> None:
        """A connection ended: count its WebSocket close code, stop reading it."""
        self.servers.pop(peer, None)
        out = getattr(peer, "out", None)
        code = getattr(out, "close_code", None)
        if code is not None:
            self.recorder.ws_closed(int(code))

    # -- the event-loop lag probe --------------------------------------------------------------
    def start(self) -> None:
        """Start the lag probe on the running loop."""
        loop = asyncio.get_running_loop()
        due = loop.time() + LAG_PROBE_INTERVAL_S
        self._probe = loop.call_at(due, self._tick, loop, due)

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        now = loop.time()
        lag = max(0.0, now - due)
        self.recorder.loop_lag.observe(lag)
        self.recorder.loop_lag_last = lag
        due = now + LAG_PROBE_INTERVAL_S
        self._probe = loop.call_at(due, self._tick, loop, due)

    async def stop(self) -> None:
        """Stop the probe and the metrics listener."""
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        for listener in (self._listener, self._group_listener):
            if listener is not None:
                listener.close()
                with contextlib.suppress(Exception):
                    await listener.wait_closed()
        self._listener = self._group_listener = None
        if self.group is not None:
            from .group import socket_path

            with contextlib.suppress(OSError):
                os.unlink(socket_path(self.group))
        for task in list(self._scrapes):
            task.cancel()

    # -- the scrape ----------------------------------------------------------------------------
    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    # -- a worker group (--workers N): observability/group.py -------------------------------------
    async def join_group(self, directory: str, limits: Limits) -> None:
        """Serve this worker's own exposition to its siblings, on ``<directory>/<pid>.sock``."""
        from .group import socket_path

        self.group = directory
        self._group_listener = await asyncio.start_unix_server(
            lambda r, w: self._serve_one(r, w, limits), socket_path(directory), limit=limits.max_request_head_bytes
        )

    def answer_http(self, channel: Any, limits: Limits) -> None:
        """``GET /metrics`` on the hosting port: this process's exposition, or the whole group's."""
        if self.group is None:
            body, kind = self.exposition()
            channel.respond(200, body, content_type=kind)
            return
        if len(self._scrapes) >= limits.max_metrics_connections:
            channel.respond(503, b"too many scrapes at once\n", [("Retry-After", "1")])
            return
        channel.hold()
        task = asyncio.get_running_loop().create_task(self._group_answer(channel, limits))
        self._scrapes.add(task)
        task.add_done_callback(self._scrapes.discard)

    async def _group_answer(self, channel: Any, limits: Limits) -> None:
        from .group import fetch, merge, socket_path

        assert self.group is not None
        own = socket_path(self.group)
        siblings = [os.path.join(self.group, n) for n in os.listdir(self.group) if n.endswith(".sock")]
        siblings = [p for p in siblings if p != own]
        timeout = limits.handshake_timeout_s
        texts = await asyncio.gather(*(fetch(p, timeout, limits.max_request_head_bytes) for p in siblings))
        parts = [(str(os.getpid()), self.exposition()[0])]
        parts += [(os.path.basename(p)[: -len(".sock")], t) for p, t in zip(siblings, texts, strict=True) if t]
        body = merge(parts)
        channel.release()
        channel.respond(200, body, content_type=CONTENT_TYPE_LATEST)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limits: Limits) -> None:
        task = asyncio.current_task()
        if len(self._scrapes) >= limits.max_metrics_connections or task is None:
            writer.close()
            return
        self._scrapes.add(task)
        try:
            await self._answer(reader, writer, limits.handshake_timeout_s)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        finally:
            self._scrapes.discard(task)
            writer.close()

    async def listen(self, host: str | None, port: int, limits: Limits) -> int:
        """Serve ``GET /metrics`` on a listener of its own (``--metrics-listen``); returns the port bound."""

        self._listener = await asyncio.start_server(
            lambda r, w: self._serve_one(r, w, limits), host, port, limit=limits.max_request_head_bytes
        )
        name = self._listener.sockets[0].getsockname()
        return int(name[1])

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or parts[0] not in (b"GET", b"HEAD"):
            status, body, kind = b"405 Method Not Allowed", b"GET /metrics\n", "text/plain"
        elif parts[1].split(b"?", 1)[0] != b"/metrics":
            status, body, kind = b"404 Not Found", b"404 Not Found\n", "text/plain"
        else:
            status = b"200 OK"
            body, kind = self.exposition()
        writer.write(
            b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind.encode()
            + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
            + (body if parts[0] != b"HEAD" else b"")
        )  # fmt: skip
        await asyncio.wait_for(writer.drain(), timeout_s)


def _counter(name: str, doc: str, label: str, values: Mapping[Any, int], fmt: Callable[[Any], str] = str) -> Metric:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items(), key=lambda kv: str(kv[0])):
        family.add_metric([fmt(key)], value)
    return family


class AcpCollector(Collector):
    """Builds every ``acp_*`` family from the recorder and the host's own counts, at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        rec = m.recorder
        requests = HistogramMetricFamily(
            "acp_request_duration_seconds",
            "Incoming JSON-RPC requests, arrival to answer written, by method, lane and outcome (ok or error code)",
            labels=["method", "lane", "outcome"],
        )
        for (method, outcome), h in rec.requests():
            requests.add_metric([method, _LANES.get(method, "none"), outcome], buckets(h), h.total)
        yield requests
        prompts = HistogramMetricFamily(
            "acp_prompt_duration_seconds", "Prompt turns, arrival to answer, by stop reason", labels=["stop_reason"]
        )
        for reason, h in sorted(rec.prompts.items()):
            prompts.add_metric([reason], buckets(h), h.total)
        yield prompts
        cancel = HistogramMetricFamily(
            "acp_cancel_latency_seconds", "First cancel of a running request received, to its answer written"
        )
        cancel.add_metric([], buckets(rec.cancel_latency), rec.cancel_latency.total)
        yield cancel
        lag = HistogramMetricFamily(
            "acp_event_loop_lag_seconds", f"How late a timer due every {LAG_PROBE_INTERVAL_S} s fired"
        )
        lag.add_metric([], buckets(rec.loop_lag), rec.loop_lag.total)
        yield lag
        yield GaugeMetricFamily("acp_event_loop_lag_last_seconds", "The lag probe's last reading", rec.loop_lag_last)
        yield _counter(
            "acp_requests_refused", "Requests refused -32000 instead of queued, by reason", "reason", rec.refused
        )
        yield _counter("acp_bad_input", "Bad input lines answered with an error, by code", "code", rec.bad_input)
        yield _counter("acp_websocket_closes", "WebSocket connections ended, by close code", "code", rec.ws_closes)
        yield from self._connections()

    def _connections(self) -> Iterator[Metric]:
        m = self.metrics
        servers = list(m.servers.items())
        slots = sum(server.pool.in_flight for _peer, server in servers)
        spawned = sum(len(server.conn._spawned) for _peer, server in servers)
        peers: list[_Attached] = [peer for peer, _server in servers if hasattr(peer, "buffered_output")]
        yield GaugeMetricFamily("acp_pool_slots_in_use", "Background pool slots held (prompts and mcp/*)", slots)
        yield GaugeMetricFamily("acp_spawned_tasks", "Tasks spawned by connections, alive", spawned)
        yield GaugeMetricFamily(
            "acp_orphaned_turns",
            "Cancelled turns the watchdog answered for after cancel_grace_s whose body still runs (R30)",
            sum(len(server.pool._orphans) for _peer, server in servers),
        )
        yield GaugeMetricFamily(
            "acp_output_buffered_bytes", "Output bytes queued for clients", sum(p.buffered_output for p in peers)
        )
        host = m.host
        connections = GaugeMetricFamily("acp_connections", "Open ACP connections by transport", labels=["transport"])
        sessions = GaugeMetricFamily("acp_sessions", "Sessions by state", labels=["state"])
        if host is None:
            connections.add_metric([m.transport], len(servers))
            sessions.add_metric(["attached"], sum(len(server.sessions) for _peer, server in servers))
            running = sum(1 for _peer, server in servers for job in server.pool.jobs() if job.is_prompt)
            yield connections
            yield sessions
            yield GaugeMetricFamily("acp_running_prompts", "Prompt turns running", running)
            return
        counts = host.counts
        connections.add_metric(["websocket"], counts["connections"] - counts["http_connections"])
        connections.add_metric(["http"], counts["http_connections"])
        yield connections
        sessions.add_metric(["attached"], counts["sessions"])
        sessions.add_metric(["parked"], counts["detached_sessions"])
        yield sessions
        yield GaugeMetricFamily("acp_running_prompts", "Prompt turns running", counts["running_prompts"])
        yield GaugeMetricFamily("acp_readers_paused", "Connections not read (backpressure)", counts["reading_paused"])
        yield GaugeMetricFamily("acp_http_streams", "Open Streamable HTTP event streams", counts["http_streams"])
        yield GaugeMetricFamily("acp_draining", "1 while the host drains (SIGTERM)", 1 if host.draining else 0)
        yield CounterMetricFamily("acp_connections_accepted", "ACP connections accepted", counts["accepted"])
        yield CounterMetricFamily("acp_drains", "Drains begun (a process drains once)", 1 if host.draining else 0)
        yield CounterMetricFamily(
            "acp_sessions_expired", "Parked sessions dropped unclaimed", counts["detached_expired"]
        )
        yield _counter(
            "acp_http_refused", "HTTP requests and upgrades refused before admission, by status", "status", host.refused
        )
        per_client = {"per_principal": counts["refused_per_principal"], "per_address": counts["refused_per_address"]}
        yield _counter("acp_clients_refused", "Refused by a per-client cap", "limit", per_client)
        yield _counter(
            "acp_client_errors",
            "What clients did wrong (logged at INFO, rate-limited), by reason",
            "reason",
            host.client_faults.counts,
        )


__all__ = ["AcpCollector", "Metrics", "Recorder", "TimedRequest", "buckets", "busy_reason", "method_label"]
