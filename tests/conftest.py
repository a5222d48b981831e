"""Fixtures every test shares: both framers, both read paths, both event loops, async-failure guards.

``read_path`` runs a test under each way a harness can feed its connection:
the production combination (the live framer, the loop's buffered read path)
and the pure-Python twin through ``data_received``. Modules whose tests build
a ``Harness`` take it for every test with
``pytestmark = pytest.mark.usefixtures("read_path")``.

``ACP_FAST_NO_EXTENSIONS=1`` runs the suite on the pure-Python modules alone,
as an install without a compiler gets them: tests marked ``c_extension`` (the
compiled modules against their twins) skip, everything else runs, the
production read path with the pure-Python framer. Without it, a compiled module
that is missing fails its tests rather than skipping them.

``run`` executes a coroutine on a fresh loop of the parametrised kind
(asyncio, uvloop, and for the dispatch tests asyncio with the eager task
factory on 3.12+) in debug mode, and fails the test if the loop's exception
handler fired (an exception in a callback or a never-retrieved task error),
so async failures cannot hide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from acp_fast.wire import _framing_py
from acp_fast.wire.framing import IMPLEMENTATION
from tests.helpers import NO_EXTENSIONS, READ_PATHS, Harness

try:
    from acp_fast.wire import _framing as _framing_c
except ImportError:  # pragma: no cover - the CI build always has it
    _framing_c = None  # type: ignore[assignment]

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

T = TypeVar("T")

FRAMERS = [
    pytest.param("c", id="c-extension", marks=pytest.mark.c_extension),
    pytest.param("py", id="pure-python"),
]


NOT_BUILT = "the Cython framer is not built (pip install -e .; ACP_FAST_NO_EXTENSIONS=1 tests without it)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``ACP_FAST_NO_EXTENSIONS=1``, skip the tests of the compiled modules, saying why."""
    if not NO_EXTENSIONS:
        return
    skip = pytest.mark.skip(reason="ACP_FAST_NO_EXTENSIONS=1: this tests a compiled module, which is not in use")
    for item in items:
        if item.get_closest_marker("c_extension") is not None:
            item.add_marker(skip)


@pytest.fixture(params=FRAMERS)
def framer_cls(request: pytest.FixtureRequest) -> type:
    if request.param == "c":
        if _framing_c is None:
            pytest.fail(NOT_BUILT)
        return _framing_c.LineFramer
    return _framing_py.LineFramer


@pytest.fixture(params=READ_PATHS)
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every Harness built during the test feeds its connection this way."""
    path = str(request.param)
    if path == "production" and IMPLEMENTATION != "c" and not NO_EXTENSIONS:
        pytest.fail(NOT_BUILT)
    monkeypatch.setattr(Harness, "read_path", path)
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Name the test order's seed even under ``-q`` (which hides pytest-randomly's header line)."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"tests ran in random order; --randomly-seed={seed} repeats it")


Runner = Callable[[Coroutine[Any, Any, T]], T]


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        if uvloop is None:
            pytest.fail("uvloop is not installed")
        return uvloop.new_event_loop()
    loop = asyncio.new_event_loop()
    if kind == "asyncio-eager":
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    return loop


#: The dispatch tests also run with ``asyncio.eager_task_factory`` (3.12+), where
#: ``create_task`` runs the new task's first step at once: R10's "before the task
#: ran a step" and the inline path must hold there too.
EAGER_MODULES = frozenset(
    {
        "test_compat",
        "test_faults_dispatch_inproc",
        "test_r01_r06_lanes",
        "test_r07_r09_limits",
        "test_r10_r12_cancel",
        "test_r13_r16_shutdown",
        "test_r17_mcp",
        "test_r18_r19_inline_dispatch",
        "test_r18_r21_dispatch_api",
        "test_r22_r23_sessions",
        "test_r24_errors_inproc",
    }
)
EAGER_SKIP = pytest.mark.skipif(
    not hasattr(asyncio, "eager_task_factory"), reason="asyncio.eager_task_factory is new in Python 3.12"
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``loop_kind``: asyncio and uvloop everywhere, eager asyncio for the dispatch tests."""
    if "loop_kind" not in metafunc.fixturenames or any(
        "loop_kind" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")
    ):
        return  # not wanted, or the test names its own loop kinds
    kinds: list[Any] = ["asyncio", "uvloop"]
    if metafunc.module.__name__.rpartition(".")[2] in EAGER_MODULES:
        kinds.append(pytest.param("asyncio-eager", marks=EAGER_SKIP))
    metafunc.parametrize("loop_kind", kinds)


@pytest.fixture
def run(loop_kind: str) -> Runner[Any]:
    """Run one coroutine to completion on a fresh loop; fail on any loop error."""

    def runner(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        loop = _new_loop(loop_kind)
        loop.set_debug(True)
        loop.slow_callback_duration = 10.0  # debug mode's 0.1 s warning is noise on shared CI
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        try:
            # The timeout only turns a hang into a failure; no test relies on it.
            result = loop.run_until_complete(asyncio.wait_for(coro, timeout))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        if errors:
            pytest.fail(f"event loop reported errors: {errors!r}")
        return result

    return runner
