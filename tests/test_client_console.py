"""``acp-fast client`` end to end: real processes, pipes, loopback sockets and a pty; every wait bounded.

Over stdio against ``acp-fast demo`` and a probe agent (tests/client_agents.py), over WebSocket and
Streamable HTTP against ``acp-fast demo --listen 127.0.0.1:0``, and at a terminal (a pty) for the
interactive path: a prompt, a Ctrl-C cancel with its stop reason and time, a permission answered by
hand, Ctrl-C at the prompt line, Ctrl-D.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_fast.tools.client.console import Renderer
from acp_fast.tools.client.options import (
    EXIT_CANCELLED,
    EXIT_DISCONNECTED,
    EXIT_ERROR,
    EXIT_MAX_TOKENS,
    EXIT_OK,
    EXIT_REFUSAL,
    EXIT_USAGE,
)

ROOT = Path(__file__).resolve().parent.parent
ACP_FAST = [sys.executable, "-m", "acp_fast"]
DEMO = [*ACP_FAST, "demo", "--pace-ms", "1"]
PROBE = [*ACP_FAST, "serve", "tests.client_agents:ProbeAgent"]
BOUND_S = 60.0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def client(*args: str, stdin: str | None = None, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACP_FAST, "client", *args],
        cwd=cwd,
        env=_env(**env),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("acp-fast client:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


# -- stdio -----------------------------------------------------------------------------------


def test_prompt_run_prints_streamed_text_and_exits_0() -> None:
    done = client("--prompt", "stream 3 1", "--prompt", "plan", "--", *DEMO)
    assert done.returncode == EXIT_OK, done
    assert "chunk 0 chunk 1 chunk 2" in done.stdout, done.stdout
    assert "[plan] 2/2 done" in done.stdout and "planned 2 steps" in done.stdout, done.stdout
    assert "[commands] stream, tool, plan, system" in done.stdout, done.stdout
    assert done.stderr.count("[end_turn]") == 2, done.stderr


def test_json_prints_every_message_both_directions_as_one_line() -> None:
    done = client("--json", "--prompt", "stream 2 1", "--", *DEMO)
    assert done.returncode == EXIT_OK, done
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["dir"] for r in records} == {"send", "recv"}
    methods = [(r["dir"], r["msg"].get("method")) for r in records]
    assert methods[:1] == [("send", "initialize")], methods
    assert ("send", "session/new") in methods and ("send", "session/prompt") in methods, methods
    chunks = [r for r in records if r["msg"].get("method") == "session/update"]
    assert len(chunks) >= 3, records  # the commands update and two chunks
    assert records[-1]["msg"]["result"] == {"stopReason": "end_turn"}, records[-1]
    caps = records[0]["msg"]["params"]["clientCapabilities"]
    assert caps == {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}


@pytest.mark.parametrize(
    ("flag", "expected"), [("--allow-all", "the tool listed 2 files"), ("--deny-all", "permission refused")]
)
def test_permission_answered_by_policy_without_asking(flag: str, expected: str) -> None:
    done = client(flag, "--prompt", "tool", "--", *DEMO)
    assert done.returncode == EXIT_OK, done
    assert expected in done.stdout, done.stdout
    assert "[tool] Pretend to list files (read, pending)" in done.stdout, done.stdout
    assert f"({flag})" in done.stderr, done.stderr


def test_fs_served_inside_root_and_refused_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("inner text")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (root / "link.txt").symlink_to(secret)
    (root / "sub").mkdir()
    prompts = [
        f"read {root / 'inside.txt'}",
        f"read {secret}",
        f"read {root / 'sub' / '..' / '..' / 'secret.txt'}",
        f"read {root / 'link.txt'}",
        f"write {root / 'new' / 'made.txt'} written here",
        f"write {tmp_path / 'escaped.txt'} nope",
        "terminal",
    ]
    args = [x for p in prompts for x in ("--prompt", p)]
    done = client("--root", str(root), *args, "--", *PROBE)
    assert done.returncode == EXIT_OK, done
    out = done.stdout
    assert "read ok: 'inner text'" in out, out
    assert out.count("refused -32602: refused:") == 4, out  # absolute, .., symlink, write outside
    assert "secret" not in out.replace("secret.txt", ""), out
    assert (root / "new" / "made.txt").read_text() == "written here"
    assert not (tmp_path / "escaped.txt").exists()
    assert "refused -32601: terminal/create: acp-fast client does not serve terminals" in out, out
    assert "[terminal] refused 'true'" in done.stderr, done.stderr
    assert done.stderr.count("outside --root") == 4, done.stderr


@pytest.mark.parametrize(
    ("prompt", "status"),
    [
        ("stop refusal", EXIT_REFUSAL),
        ("stop max_tokens", EXIT_MAX_TOKENS),
        ("stop cancelled", EXIT_CANCELLED),
        ("stop end_turn", EXIT_OK),
        ("fail", EXIT_ERROR),
        ("die", EXIT_DISCONNECTED),
    ],
)
def test_exit_status_reflects_the_last_turn(prompt: str, status: int) -> None:
    done = client("--prompt", "stop end_turn", "--prompt", prompt, "--", *PROBE)
    assert done.returncode == status, done
    if prompt == "fail":  # the agent logs its own traceback to the shared stderr; the console says one line
        assert [line for line in done.stderr.splitlines() if line.startswith("acp-fast client:")] == [
            "acp-fast client: the agent answered with error -32602: this agent fails on purpose (during the turn)"
        ], done.stderr
        return
    assert "Traceback" not in done.stderr, done.stderr
    if prompt == "die":
        assert "the agent exited with status 9" in one_line_error(done)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give an agent to run after --"),
        (["ftp://example.org/acp"], "bad URL"),
        (["ws://127.0.0.1:notaport/acp"], "the port is not a number"),
        (["--header", "novalue", "ws://127.0.0.1:1/acp"], "expected NAME:VALUE"),
        (["--token-env", "ACP_FAST_TEST_UNSET_VAR", "ws://127.0.0.1:1/acp"], "empty or unset"),
        (["--root", "/no/such/dir", "--", "true"], "is not a directory"),
        (["--header", "A:b", "--", "true"], "apply to a URL"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = client(*args)
    assert done.returncode == EXIT_USAGE, done
    assert message in one_line_error(done)


def test_argparse_usage_error_exits_2() -> None:
    done = client("--allow-all", "--deny-all", "--", "true")
    assert done.returncode == EXIT_USAGE, done
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ws://127.0.0.1:1/acp"], "connection refused"),
        (["http://127.0.0.1:1/acp"], "connection refused"),
        (["--", "/no/such/agent"], "cannot start '/no/such/agent'"),
        (["--", sys.executable, "-c", "pass"], "the agent exited with status 0"),
    ],
)
def test_unreachable_agents_are_one_line_and_exit_7(args: list[str], message: str) -> None:
    done = client(*args)
    assert done.returncode == EXIT_DISCONNECTED, done
    assert message in one_line_error(done)


def test_missing_server_extra_names_what_to_install() -> None:
    code = (
        "import sys; sys.modules['picows'] = None; sys.modules['h11'] = None\n"
        "from acp_fast.cli import main; main(['client', sys.argv[1]])"
    )
    for url in ("ws://127.0.0.1:1/acp", "http://127.0.0.1:1/acp"):
        done = subprocess.run(
            [sys.executable, "-c", code, url], env=_env(), capture_output=True, text=True, timeout=BOUND_S
        )
        assert done.returncode == EXIT_USAGE, done
        assert "pip install '.[server]'" in one_line_error(done)


def test_session_commands_from_piped_lines() -> None:
    lines = "stream 2 1\n/sessions\n/mode code\n/mode nosuchmode\n/load nosuch\n/load demo-1\n/help\nstream 1 1\n"
    done = client("--", *DEMO, stdin=lines)
    assert done.returncode == EXIT_OK, done
    assert "chunk 0 chunk 1" in done.stdout, done.stdout
    assert "* demo-1" in done.stderr, done.stderr  # /sessions marks the current one
    assert "[mode code]" in done.stderr, done.stderr
    assert "error -32602" in done.stderr, done.stderr  # the unknown mode, and the console goes on
    assert "> stream 2 1" in done.stdout, done.stdout  # /load replays the session's history
    assert done.stdout.endswith("chunk 0 \n"), done.stdout  # the reloaded session still streams
    assert done.stderr.count("error -32602") == 2, done.stderr  # unknown mode, unknown session
    assert "[session demo-1 loaded]" in done.stderr and "/sessions" in done.stderr, done.stderr


def test_a_closed_stdout_ends_the_console_quietly() -> None:
    proc = subprocess.Popen(
        [*ACP_FAST, "client", "--json", "--prompt", "a long answer", "--", *DEMO],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["dir"] == "send"
    proc.stdout.close()  # what `| head -1` does
    try:
        _, err = proc.communicate(timeout=BOUND_S)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_OK, err
    assert b"Traceback" not in err and b"Exception ignored" not in err, err


def _cancel_with_sigint(args: list[str]) -> tuple[int, str]:
    """Run a long ``--prompt`` turn, SIGINT the console once it streams; its status and stderr."""
    proc = subprocess.Popen(
        [*ACP_FAST, "client", *args],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the signal is for the console alone, as a terminal's Ctrl-C would be
    )
    try:
        assert proc.stdout is not None
        seen = ""
        deadline = time.monotonic() + BOUND_S
        while "chunk 3 " not in seen:
            ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
            assert ready, f"the turn never streamed: {seen!r}"
            data = os.read(proc.stdout.fileno(), 65536).decode()
            assert data, f"the console ended before streaming: {seen!r}"
            seen += data
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND_S)
        return proc.returncode, err
    finally:
        proc.kill()
        proc.wait()


def test_sigint_cancels_a_prompt_run_over_stdio() -> None:
    status, err = _cancel_with_sigint(["--prompt", "stream 100000 5", "--", *DEMO])
    assert status == EXIT_CANCELLED, err
    assert re.search(r"\[cancelled, answered \d+\.\d ms after the cancel\]", err), err


def test_sigint_before_the_session_opens_is_one_line() -> None:
    silent = [sys.executable, "-c", "import sys, time; print('ready', file=sys.stderr, flush=True); time.sleep(60)"]
    proc = subprocess.Popen(
        [*ACP_FAST, "client", "--", *silent],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], BOUND_S)
        assert ready and proc.stderr.readline() == "ready\n"  # the agent runs: the console waits for initialize
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND_S)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == EXIT_CANCELLED, err
    assert err.strip() == "acp-fast client: interrupted", err


def test_renderer_prints_each_kind_of_update_in_short() -> None:
    out = io.StringIO()
    r = Renderer(out, quiet=False)
    r.update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
    r.update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello "}})
    r.update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "world"}})
    r.update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.txt", "kind": "read"})
    r.update({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
    r.update(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "one", "priority": "high", "status": "completed"},
                {"content": "two", "priority": "low", "status": "pending"},
            ],
        }
    )
    r.update({"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "", "mimeType": "x"}})
    r.update({"sessionUpdate": "usage_update", "used": 1, "size": 2})
    r.end_line()
    assert out.getvalue().splitlines() == [
        "(thinking) hmm",
        "Hello world",
        "[tool] Read a.txt (read, pending)",
        "[tool] t1: completed",
        "[plan] 1/2 done: one (completed); two (pending)",
        "[image]",
        "[usage_update]",
    ]


# -- hosted agents ------------------------------------------------------------------------------


@pytest.fixture
def hosted(request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """``acp-fast demo --listen 127.0.0.1:0`` (with a token when the test asks); its port and token."""
    token = "s3cret-token" if getattr(request, "param", None) == "auth" else ""
    args = [*DEMO, "--listen", "127.0.0.1:0"] + (["--auth-token-env", "ACP_FAST_TEST_TOKEN"] if token else [])
    proc = subprocess.Popen(
        args, env=_env(ACP_FAST_TEST_TOKEN=token), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], BOUND_S)
        assert ready, "the host never announced itself"
        banner = proc.stderr.readline()
        match = re.search(r"127\.0\.0\.1:(\d+)", banner)
        assert match, banner
        yield int(match.group(1)), token
    finally:
        proc.terminate()
        proc.wait(timeout=BOUND_S)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_hosted_demo_over_websocket_and_streamable_http(hosted: tuple[int, str], scheme: str) -> None:
    port, _ = hosted
    url = f"{scheme}://127.0.0.1:{port}/acp"
    done = client(url, "--allow-all", "--prompt", "stream 3 1", "--prompt", "tool", "--prompt", "plan")
    assert done.returncode == EXIT_OK, done
    assert "chunk 0 chunk 1 chunk 2" in done.stdout, done.stdout
    assert "the tool listed 2 files" in done.stdout and "planned 2 steps" in done.stdout, done.stdout
    lines = "stream 1 1\n/sessions\n"
    done = client(url, "--json", stdin=lines)
    assert done.returncode == EXIT_OK, done
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(r["dir"] == "send" and r["msg"].get("method") == "session/list" for r in records), records
    status, err = _cancel_with_sigint([url, "--prompt", "stream 100000 5"])
    assert status == EXIT_CANCELLED, err
    assert re.search(r"\[cancelled, answered \d+\.\d ms after the cancel\]", err), err


@pytest.mark.parametrize("hosted", ["auth"], indirect=True)
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_hosted_demo_with_a_bearer_token(hosted: tuple[int, str], scheme: str) -> None:
    port, token = hosted
    url = f"{scheme}://127.0.0.1:{port}/acp"
    refused = client(url, "--prompt", "stream 1 1")
    assert refused.returncode == EXIT_DISCONNECTED, refused
    assert "401" in one_line_error(refused)
    done = client(url, "--token-env", "ACP_FAST_CLIENT_TOKEN", "--prompt", "stream 1 1", ACP_FAST_CLIENT_TOKEN=token)
    assert done.returncode == EXIT_OK, done
    assert "chunk 0" in done.stdout
    done = client(url, "--header", f"Authorization: Bearer {token}", "--prompt", "stream 1 1")
    assert done.returncode == EXIT_OK, done


# -- at a terminal ------------------------------------------------------------------------------


class Terminal:
    """The console on a pty: what it shows is read with bounded waits, never fixed sleeps."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        import pty

        pid, fd = pty.fork()
        if pid == 0:  # the child: a session leader whose controlling terminal is the pty
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, _env(TERM="dumb"))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.seen = ""
        self.mark = 0

    def expect(self, pattern: str) -> re.Match[str]:
        """Wait (bounded) for ``pattern`` in what appeared since the last match."""
        deadline = time.monotonic() + BOUND_S
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.seen, self.mark)
            if match:
                self.mark = match.end()
                return match
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"{pattern!r} never appeared; the terminal shows:\n{self.seen[self.mark:]}")
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                raise AssertionError(f"the console ended before {pattern!r}:\n{self.seen[self.mark:]}")
            self.seen += data.decode("utf-8", "replace").replace("\r\n", "\n")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self) -> int:
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            ready, _, _ = select.select([self.fd], [], [], 0.05)  # drain what it still writes
            if ready:
                with contextlib.suppress(OSError):  # EIO once the child closed the terminal
                    self.seen += os.read(self.fd, 65536).decode("utf-8", "replace")
        raise AssertionError("the console did not exit")

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def test_terminal_prompt_cancel_permission_and_ctrl_d(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *DEMO], cwd=tmp_path)
    try:
        term.expect(r"session demo-1")
        term.expect(r"> ")
        term.type("stream 3 1\n")
        term.expect(r"chunk 0 chunk 1 chunk 2")
        term.expect(r"\[end_turn\]")
        # A long turn, cancelled with Ctrl-C once it is streaming.
        term.expect(r"> ")
        term.type("stream 100000 5\n")
        term.expect(r"chunk 3 ")
        term.type("\x03")
        term.expect(r"\[cancelling: session/cancel sent\]")
        match = term.expect(r"\[cancelled, answered (\d+\.\d) ms after the cancel\]")
        assert float(match.group(1)) < BOUND_S * 1000
        # A permission request, answered by hand.
        term.expect(r"> ")
        term.type("tool\n")
        term.expect(r"1\) Allow \(allow_once\)")
        term.expect(r"2\) Reject \(reject_once\)")
        term.expect(r"choose 1-2: ")
        term.type("1\n")
        term.expect(r"the tool listed 2 files")
        term.expect(r"\[end_turn\]")
        # Ctrl-C while the question is open: the turn is cancelled and the question answered cancelled.
        term.expect(r"> ")
        term.type("tool\n")
        term.expect(r"choose 1-2: ")
        term.type("\x03")
        term.expect(r"\[cancelled, answered \d+\.\d ms after the cancel\]")
        # Ctrl-C at the prompt line drops what was typed; the next line is a fresh prompt.
        term.expect(r"> ")
        term.type("half a line")
        term.expect(r"half a line")
        term.type("\x03")
        term.expect(r"\^C\n> ")  # the terminal's echo, then the console's fresh prompt: the signal was handled
        term.type("stream 1 1\n")
        term.expect(r"chunk 0 \n")  # "half a linestream 1 1" would have been the demo's long answer
        term.expect(r"\[end_turn\]")
        term.expect(r"> ")
        term.type("\x04")  # Ctrl-D
        assert term.wait() == EXIT_OK
    finally:
        term.close()


def test_terminal_agent_death_is_one_line_and_exit_7(tmp_path: Path) -> None:
    term = Terminal([*ACP_FAST, "client", "--", *PROBE], cwd=ROOT)
    try:
        term.expect(r"> ")
        term.type("stop end_turn\n")
        term.expect(r"\[end_turn\]")
        term.expect(r"> ")
        term.type("die\n")
        term.expect(r"acp-fast client: the agent exited with status 9 \(during the turn\)")
        assert term.wait() == EXIT_DISCONNECTED
        assert "Traceback" not in term.seen and "Fatal Python error" not in term.seen, term.seen
    finally:
        term.close()
