"""``acp-fast bench``: end-to-end latency, throughput and cost over real pipes.

One driver, identical for every target, spawns each agent as a subprocess
and talks ACP to it over its stdin/stdout, in the same run, side by side:

- ``acp_fast``: the demo agent, ``python -m acp_fast demo``;
- ``sdk``: the same agent logic on the official Python SDK
  (``acp_fast/tools/bench/sdk_demo_agent.py``; needs the ``bench`` extra);
- ``floor``: ``acp_fast/tools/bench/echo_floor.py``, a uvloop+orjson process that
  answers every request at once, so its numbers are the pipe round trip;
- any other ACP agent command given with ``--agent "CMD" [--label NAME]``.

Scenarios (all with ``stream N DELAY_MS`` prompts): cancel during a long
prompt and a cheap request during a long prompt, each idle and with 31
other sessions streaming at full speed; pipelined cheap requests and
pipelined ``session/new`` per second; ``session/update`` notifications per
second from one fast prompt and from 32; RSS per open session and per running prompt; and handshake
time (spawn to the ``session/new`` answer) next to a bare
``python -c "import asyncio, uvloop, orjson"``. A target that lacks what a
scenario needs is reported ``unsupported`` for it. Speed is reported, never
asserted: the goals are printed as met, missed or n/a.

``--hosting`` adds ACP over WebSocket (hosting.py): ``acp-fast demo --listen``
with ``--ws-connections`` connections held (set-up rate, RSS per idle
connection) and ``--cancels`` cancels, next to a bare picows echo floor; it
needs the ``server`` extra and is skipped with one line without it.

This module is the command line; the run lives in runner.py, the scenarios
in scenarios.py, the agent process in process.py, the output in report.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from ...wire.limits import MAX_SESSIONS
from . import cancel_ignored
from .probe import PROBE_TIMEOUT_S
from .process import WAIT_TIMEOUT_S, log
from .report import goals, meta, notes, plot, table
from .runner import FULL, QUICK, Options, Runner, Sizes, session_budget
from .targets import BUILTIN, TargetError, select_targets


class _AgentAction(argparse.Action):
    """``--agent CMD`` appends (CMD, None); a later ``--label NAME`` names the last one."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        agents: list[list[str | None]] = getattr(namespace, "agents", None) or []
        if option_string == "--agent":
            agents.append([str(values), None])
        elif not agents or agents[-1][1] is not None:
            parser.error("--label NAME must follow the --agent it names")
        else:
            agents[-1][1] = str(values)
        namespace.agents = agents


_AGENT_PROTOCOL = """\
what an --agent must answer on stdio (each probe step waits at most --probe-timeout s):
  initialize, then session/new {cwd, mcpServers} -> sessionId          needed by every scenario
  session/set_mode to a mode from the session/new result, else _echo   the cheap request
  session/prompt with the text "stream N DELAY_MS"                     N session/update, then end_turn
  session/cancel during such a prompt                                  stopReason "cancelled"
a piece it lacks makes the scenarios that need it "unsupported"; the run goes on."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="acp-fast bench",
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog=_AGENT_PROTOCOL,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small counts (well under a minute)")
    p.add_argument("--json", type=Path, default=Path("bench-results/latest.json"), help="results file")
    p.add_argument("--plot", type=Path, default=None, help="latency CDF PNG (default: next to --json)")
    p.add_argument("--no-plot", action="store_true", help="skip the plot")
    p.add_argument(
        "--targets",
        default=",".join(BUILTIN),
        help=f"comma-separated subset of {','.join(BUILTIN)} (may be empty with --agent)",
    )
    p.add_argument(
        "--agent",
        action=_AgentAction,
        metavar="CMD",
        help="also benchmark this ACP agent command (repeatable; what it must answer: below)",
    )
    p.add_argument("--label", action=_AgentAction, metavar="NAME", help="column name of the --agent before it")
    p.add_argument(
        "--hosting", action="store_true", help="also measure ACP over WebSocket (--listen) against a picows echo floor"
    )
    p.add_argument(
        "--cancel-ignored",
        action="store_true",
        help="also measure 'cancel, agent ignores it': session/cancel -> answer vs cancel_grace_s (acp_fast, sdk)",
    )
    p.add_argument("--sdk-uvloop", action="store_true", help="run the SDK agent on uvloop instead of asyncio")
    p.add_argument("--pin", action="store_true", help="pin the driver to CPU 0 and agents to CPU 1")
    p.add_argument("--seed", type=int, default=1, help="seed of the cancel-timing jitter")
    p.add_argument("--timeout", type=float, default=WAIT_TIMEOUT_S, help="seconds any measured wait may take")
    p.add_argument(
        "--probe-timeout", type=float, default=PROBE_TIMEOUT_S, help="seconds each capability probe step may take"
    )
    for f in Sizes.__dataclass_fields__:
        p.add_argument("--" + f.replace("_", "-"), type=int, default=None, help=f"override the {f} count")
    p.set_defaults(agents=[])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = Sizes(**{f: getattr(args, f) or getattr(base, f) for f in Sizes.__dataclass_fields__})
    wanted = [n.strip() for n in args.targets.split(",") if n.strip()]
    if "acp_fast" in wanted and session_budget(sizes) > MAX_SESSIONS:
        print(
            f"acp-fast bench: (--bursts + 1) x --new-sessions = {session_budget(sizes) - 1} sessions on one "
            f"connection, over acp_fast's default limit of {MAX_SESSIONS}",
            file=sys.stderr,
        )
        return 2
    skipped: list[str] = []
    try:
        targets = select_targets(
            wanted, [(str(c), lbl) for c, lbl in args.agents], sdk_uvloop=args.sdk_uvloop, skipped=skipped
        )
    except TargetError as exc:
        print(f"acp-fast bench: {exc}", file=sys.stderr)
        return 2
    for line in skipped:
        log(line)
    if not targets and not args.hosting and not args.cancel_ignored:
        print("acp-fast bench: no target left to benchmark", file=sys.stderr)
        return 2
    opts = Options(sizes, targets, args.pin, args.seed, args.timeout, args.probe_timeout)
    runner = Runner(opts)
    started = time.monotonic()
    if targets:
        _run_loop(runner.run)
    names = [t.name for t in targets]
    if args.hosting:
        _hosting(runner, sizes)
        names += [n for n in ("acp_fast", "floor") if n not in names]
        if any("ts-sdk" in per for per in runner.results.values()):
            names.append("ts-sdk")
    if args.cancel_ignored:
        _cancel_ignored(runner, sizes, with_sdk="sdk" in wanted or not wanted)  # --targets "": this row alone
        names += [n for n in runner.results[cancel_ignored.SCENARIO] if n not in names]
    seconds = time.monotonic() - started
    cheap = {name: sup.cheap_method for name, sup in runner.support.items()}
    report: dict[str, Any] = {"meta": meta(opts, argv, seconds, cheap), "results": runner.results}
    _publish(args, runner, names, cheap, report, seconds)
    if runner.failures:
        print(f"acp-fast bench: {runner.failures} scenario(s) failed; see FAILED above", file=sys.stderr)
        return 1
    return 0


def _publish(
    args: argparse.Namespace,
    runner: Runner,
    names: list[str],
    cheap: dict[str, str],
    report: dict[str, Any],
    seconds: float,
) -> None:
    """The table, the notes and the goals on stdout; the JSON report and the plot on disk."""
    print(
        f"acp-fast bench{' --quick' if args.quick else ''}: python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {seconds:.0f} s, load {os.getloadavg()[0]:.2f}"
    )
    print()
    print(table(runner.results, names))
    print()
    for line in notes(runner.results, names, cheap):
        print(line)
    print()
    checked = goals(runner.results)
    print(
        "goals: MET or MISS only where the spread of the same-run ratio (burst by burst for rates, a bootstrap "
        "for percentiles) lies wholly on one side; ?? where it straddles the goal"
        + (" (a --quick run is short: expect several ??, and judge goals on a full run)" if args.quick else "")
    )
    for g in checked:
        print(f"  [{g.mark}] {g.text}: {g.detail}")
    report["goals"] = [{**g.__dict__, "mark": g.mark.strip()} for g in checked]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1))
    print(f"\nresults: {args.json}")
    if not args.no_plot:
        png = args.plot or args.json.with_suffix(".png")
        if plot(runner.results, png):
            print(f"plot: {png}")


def _hosting(runner: Runner, sizes: Sizes) -> None:
    """The WebSocket scenario, after the stdio ones (its servers are separate processes)."""
    from . import hosting_ts
    from .hosting import SCENARIOS, missing_extra, run_hosting

    why = missing_extra()
    if why is not None:
        log(f"hosting: skipped ({why})")
        for scenario in SCENARIOS:
            runner.unsupported(scenario, "acp_fast", why)
        return
    log(
        f"hosting: {sizes.ws_connections} WebSocket connections held, {sizes.cancels} cancels, "
        f"{sizes.updates_one} updates; echo, push and agent floors"
    )

    async def measure() -> None:
        try:
            results = await run_hosting(sizes.ws_connections, sizes.cancels, sizes.updates_one)
        except Exception as exc:  # a server that did not start or a connection that failed: one FAILED row each
            for scenario in SCENARIOS:
                runner.failed(scenario, "acp_fast", f"{type(exc).__name__}: {exc}")
        else:
            for scenario, per in results.items():
                for target, value in per.items():
                    runner.put(scenario, target, value)
        ts_why = hosting_ts.missing()
        if ts_why is not None:
            log(f"hosting: {hosting_ts.TARGET} unsupported: {ts_why}")
        else:
            log(f"hosting: {hosting_ts.TARGET} (the TypeScript SDK's AcpServer on node), same connections and cancels")
        for scenario, per in (await hosting_ts.run_ts_hosting(sizes.ws_connections, sizes.cancels)).items():
            for target, value in per.items():
                if "error" in value:
                    runner.failed(scenario, target, value["error"])
                else:
                    runner.put(scenario, target, value)

    _run_loop(measure)


def _cancel_ignored(runner: Runner, sizes: Sizes, with_sdk: bool) -> None:
    """The "cancel, agent ignores it" scenario, after the others (its agents are separate processes)."""
    rounds = sizes.ignored_cancels
    sdk_rounds = cancel_ignored.sdk_rounds(rounds) if with_sdk else 0
    log(
        f"cancel, agent ignores it: {rounds} rounds on acp_fast (cancel_grace_s={cancel_ignored.GRACE_S:g} s)"
        + (f", {sdk_rounds} on the sdk" if sdk_rounds else "")
    )

    async def measure() -> None:
        try:
            row = await cancel_ignored.run(sys.executable, rounds, sdk_rounds)
        except Exception as exc:  # an agent that did not start or closed its pipe: one FAILED row
            runner.failed(cancel_ignored.SCENARIO, "acp_fast", f"{type(exc).__name__}: {exc}")
            return
        for target, value in row.items():
            runner.put(cancel_ignored.SCENARIO, target, value)

    _run_loop(measure)


def _run_loop(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(fn())
        return
    uvloop.run(fn())


__all__ = ["main"]
