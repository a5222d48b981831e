"""R13, R14, R26: the write side, the transports and the exit, over real pipes, with the live framer and decoder.

Each test drives a real ``python -m acp_fast`` subprocess (``FaultAgent`` of
test_faults, or the demo) the way a client that misbehaves would: it stops
reading stdout, floods stdin, hands over a regular file as stdin, or simply
hangs up. Every wait is on output, a stderr marker or the exit; the hang
timeout of ``AgentProcess`` only turns a hang into a failure, and nothing
here asserts on how long anything took.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from acp_fast.peer.memory import MemoryTransport
from acp_fast.peer.writer import Writer
from acp_fast.transports.stdio import _FileReadTransport
from acp_fast.wire.limits import Limits
from tests.helpers import AgentProcess
from tests.test_faults import TARGET

pytestmark = pytest.mark.slow

INIT = b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}\n'
NEW = b'{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'


def _prompt_line(session_id: str, text: str, id: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":"%s","method":"session/prompt","params":{"sessionId":"%s",'
        b'"prompt":[{"type":"text","text":"%s"}]}}\n' % (id.encode(), session_id.encode(), text.encode())
    )


def _dropped_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "dropped" in line and "unwritten bytes" in line]


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_r14_shutdown_ends_while_the_client_no_longer_reads_stdout(how: str) -> None:
    flags = ("--shutdown-grace-s", "0.2", "--abort-join-s", "0.2", "--flush-timeout-s", "0.2")
    with AgentProcess("serve", TARGET, *flags, read_stdout=False) as agent:
        prompts = [_prompt_line(sid, "seq 100000000 256", f"p-{sid}") for sid in ("s1", "s2")]
        agent.send_raw(INIT + NEW + NEW.replace(b'"new"', b'"new2"') + b"".join(prompts))
        # Nobody reads stdout: the pipe fills, the writer passes its high-water mark, producers wait.
        agent.wait_stderr("MARK paused at ")
        if how == "eof":
            agent.close_stdin()
        else:
            agent.proc.send_signal(signal.SIGTERM)
        assert agent.wait() == 0  # cancel -> grace -> join -> bounded flush -> exit
        err = agent.stderr
        assert "MARK finalizer s1 cancelled" in err and "MARK finalizer s2 cancelled" in err, err[-3000:]
        dropped = _dropped_lines(err)
        assert len(dropped) == 1, err[-3000:]  # one line says how much never reached the client
        assert int(dropped[0].split("dropped ")[1].split()[0]) > 0, dropped
        assert "Traceback" not in err, err[-3000:]


def test_r13_a_clean_disconnect_is_not_logged_as_a_failure() -> None:
    with AgentProcess("demo", "--log-level", "debug", read_stdout=False) as agent:
        proc = agent.proc
        assert proc.stdout is not None
        agent.send_raw(INIT)
        assert b'"id":"init"' in proc.stdout.readline()
        proc.stdout.close()  # the client goes away: first its end of our stdout ...
        agent.send_raw(b'{"jsonrpc":"2.0","id":"x","method":"session/list"}\n')  # (answered into nothing)
        agent.wait_stderr("; shutting down")  # ... the agent saw it ...
        agent.close_stdin()  # ... then our stdin
        assert agent.wait() == 0
        err = agent.stderr
        assert " WARNING " not in err and " ERROR " not in err, err[-3000:]


def test_r26_a_client_that_sends_without_reading_cannot_grow_the_agent() -> None:
    n, MiB = 200_000, 1024  # KiB per MiB, as /proc reports KiB
    probe = b'{"jsonrpc":"2.0","id":"probe","method":"initialize","params":{"protocolVersion":1}}\n'
    with AgentProcess("demo", "--log-level", "debug", read_stdout=False) as agent:
        agent.wait_stderr("event loop:")  # started: the baseline
        base = agent.status("VmRSS")
        # Shortest malformed lines: the most answers per input byte. Sent from a thread, since
        # the agent stops reading them, so this write blocks until the client reads.
        flood = threading.Thread(target=agent.send_raw, args=(b"x\n" * n + probe,), daemon=True)
        flood.start()
        agent.wait_stderr("stdout is backed up")  # the agent holds its input for our reading
        agent.start_reading()
        for _ in range(n):
            msg = agent.next()
            assert msg["id"] is None and msg["error"]["code"] == -32700, msg
        assert agent.next()["id"] == "probe"  # every answer arrived, in order
        flood.join(agent.HANG_S)
        peak = agent.status("VmHWM")
        agent.close_stdin()
        assert agent.wait() == 0
        # 400 KB of input once grew the agent by over 70 MiB of buffered answers; now it is
        # held to the write high-water mark, one read chunk and the inbox.
        assert peak - base < 32 * MiB, (base, peak)



def test_r26_regular_file_stdin_is_never_read_ahead_of_delivery(run: Any, tmp_path: Path) -> None:
    """A paused file is not read; the reader thread is at most the chunk being delivered ahead."""
    path = tmp_path / "in.bin"
    path.write_bytes(bytes(range(256)) * (16 * 4096))  # 16 MiB: many read chunks

    class Probe(asyncio.Protocol):
        def __init__(self, fd: int, done: asyncio.Event) -> None:
            self.fd, self.done = fd, done
            self.delivered = 0
            self.ahead: list[int] = []  # bytes read from the file but not delivered, per delivery

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.ReadTransport, transport)

        def data_received(self, data: bytes) -> None:
            self.delivered += len(data)
            self.ahead.append(os.lseek(self.fd, 0, os.SEEK_CUR) - self.delivered)
            self.transport.pause_reading()  # as a full inbox does, every time
            asyncio.get_running_loop().call_soon(self.resume)

        def resume(self) -> None:
            self.ahead.append(os.lseek(self.fd, 0, os.SEEK_CUR) - self.delivered)  # nothing read while paused
            self.transport.resume_reading()

        def eof_received(self) -> bool:
            self.done.set()
            return False

    async def body() -> None:
        fd = os.open(path, os.O_RDONLY)
        done = asyncio.Event()
        probe = Probe(os.dup(fd), done)  # the transport closes its fd at EOF; the dup shares the offset
        try:
            _FileReadTransport(asyncio.get_running_loop(), fd, probe)
            await done.wait()
            assert probe.delivered == path.stat().st_size
            assert set(probe.ahead) == {0}, max(probe.ahead)
        finally:
            os.close(probe.fd)

    run(body())


def test_r26_regular_file_stdin_honours_pause_like_a_pipe(tmp_path: Path) -> None:
    errors, notes, pad = 5000, 1024, 64 * 1024  # 64 MiB of notifications behind the errors
    note = b'{"jsonrpc":"2.0","method":"_unknown/note","params":{"pad":"%s"}}\n' % (b"a" * pad)
    probe = b'{"jsonrpc":"2.0","id":"probe","method":"initialize","params":{"protocolVersion":1}}\n'
    stdin = tmp_path / "in.jsonl"
    with stdin.open("wb") as f:
        f.write(b"x\n" * errors)  # answers enough to back stdout up while nobody reads it
        for _ in range(notes):
            f.write(note)  # never answered, only read
        f.write(probe)
    # A small inbox keeps what may legitimately wait for dispatch (8 notes, 512 KiB) far below
    # the bound, so allocator noise cannot reach it while a read-ahead of the file still would.
    args = ("demo", "--log-level", "debug", "--max-inbox", "8")
    with AgentProcess(*args, read_stdout=False, stdin_path=str(stdin)) as agent:
        agent.wait_stderr("event loop:")
        base = agent.status("VmRSS")
        agent.wait_stderr("stdout is backed up")  # input must pause here, the file included
        agent.start_reading()
        for _ in range(errors):
            msg = agent.next()
            assert msg["id"] is None and msg["error"]["code"] == -32700, msg
        assert agent.next()["id"] == "probe"  # all of the file was read in the end
        peak = agent.status("VmHWM")
        assert agent.wait() == 0  # the end of the file is EOF
        # Read ahead, the file would sit in memory whole (64 MiB); paused, a chunk or two.
        assert peak - base < 32 * 1024, (base, peak)


LIBRARY_CALL = """
import asyncio, gc, sys
from acp_fast import run_agent
from acp_fast.wire.limits import Limits
from tests.test_faults import FaultAgent

policy = type(asyncio.get_event_loop_policy())
frozen = gc.get_freeze_count()  # not 0 on every Python: 3.12 starts with objects frozen
young = gc.get_threshold()[0]  # 700 up to 3.12, 2000 on 3.13
status = run_agent(FaultAgent(), Limits(shutdown_grace_s=0.2, abort_join_s=0.2))
kept = type(asyncio.get_event_loop_policy()) is policy
young_kept = gc.get_threshold()[0] == young
print(
    f"MARK returned {status} frozen={gc.get_freeze_count() - frozen} young_kept={young_kept} policy_kept={kept}",
    file=sys.stderr,
    flush=True,
)
gc.collect()  # the abandoned task goes now, its coroutine closed outside any loop
print("MARK collected", file=sys.stderr, flush=True)
"""


def test_r14_run_agent_as_a_library_returns_a_status_and_leaves_the_process_alone() -> None:
    with AgentProcess("-c", LIBRARY_CALL, python_args=True) as agent:
        agent.initialize()
        sid = agent.new_session()
        agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hang"}]}, "p")
        assert agent.next()["method"] == "session/update"
        agent.close_stdin()  # cancel -> grace -> abort -> join -> the task is abandoned
        _, resp = agent.until_response("p")
        assert resp["result"] == {"stopReason": "cancelled"}, resp
        assert agent.wait() == 0  # the script ended normally: no os._exit inside run_agent
        err = agent.stderr
        # 1 = a task had to be abandoned; no gc.freeze, no gc threshold and no event-loop
        # policy unless asked for.
        assert "MARK returned 1 frozen=0 young_kept=True policy_kept=True" in err, err[-3000:]
        assert "was destroyed but it is pending" not in err, err[-3000:]
        # Closing the abandoned coroutine is not the job failing, whatever its finally blocks raise.
        assert "MARK collected" in err and " failed" not in err, err[-3000:]


@pytest.mark.parametrize(
    "call",
    ["asyncio.run(run_agent(A()))", "async def main():\n    run_agent(A())\n\nasyncio.run(main())"],
    ids=["asyncio.run", "inside-a-loop"],
)
def test_run_agent_called_the_sdk_way_fails_at_once_naming_the_async_entry(call: str) -> None:
    code = f"import asyncio\nfrom acp_fast import Agent, run_agent\n\nclass A(Agent):\n    pass\n\n{call}\n"
    with AgentProcess("-c", code, python_args=True) as agent:  # stdin stays open: nothing is served
        assert agent.wait() == 1
        assert "await acp_fast.serve_stdio(agent)" in agent.stderr, agent.stderr[-3000:]
        assert agent.no_more_output() == []


def test_r14_writer_close_gives_up_after_its_flush_bound_and_says_how_much(
    run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        writer = Writer(asyncio.get_running_loop(), Limits(flush_timeout_s=0.0))
        received: list[bytes] = []
        pipe = MemoryTransport(asyncio.get_running_loop(), writer, received.append)
        writer.attach(pipe)
        pipe.read_end.pause_reading()  # a reader that never reads again (closing does not release it)
        writer.write(b"x" * 100_000 + b"\n")
        writer.flush()
        assert await writer.close() == 100_001  # gave up at once (bound 0): everything dropped
        assert received == [] and pipe.is_closing()

    with caplog.at_level(logging.WARNING, logger="acp_fast.peer.writer"):
        run(body())
    assert [r.getMessage() for r in caplog.records] == [
        "stdout was not read for 0.0 s at exit: dropped 100001 unwritten bytes"
    ]
