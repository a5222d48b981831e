"""R13, R14, R26: the write side, the transports and the exit, over real pipes with the compiled framer.

Each test drives a real ``python -m acp_fast`` subprocess (``FaultAgent`` of
test_faults, or the demo) the way a client that misbehaves would: it stops
reading stdout, floods stdin, hands over a regular file as stdin, or simply
hangs up. Every wait is on output, a stderr marker or the exit; the hang
timeout of ``AgentProcess`` only turns a hang into a failure, and nothing
here asserts on how long anything took.
"""

from __future__ import annotations

import signal
import threading

import pytest

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
