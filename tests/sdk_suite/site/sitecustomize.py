"""Imported by every Python process the SDK-suite runner starts (it is on their PYTHONPATH).

With ``ACP_FAST_SDK_SUITE=compat`` the SDK's ``AgentSideConnection`` and
``run_agent`` are replaced, wherever the SDK's modules hold them, by
``acp_fast.compat``'s public ones: the SDK's tests, its HTTP/WebSocket
server and the agent subprocesses its tests spawn all run on acp_fast.
``ACP_FAST_SDK_SUITE=sdk`` keeps the SDK's own (the baseline run). Either
way each use is recorded, under the running test's id, in the file named by
``ACP_FAST_SDK_SUITE_MARKS``: those are the tests that drive an agent.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

_MODE = os.environ.get("ACP_FAST_SDK_SUITE")
_MODULES = ("acp", "acp.core", "acp.agent", "acp.agent.connection", "acp.stdio", "acp.http.server", "acp.ws.server")


def _mark() -> None:
    marks = os.environ.get("ACP_FAST_SDK_SUITE_MARKS")
    test = os.environ.get("PYTEST_CURRENT_TEST", "")
    if marks and test:
        with open(marks, "a", encoding="utf-8") as out:
            out.write(test.rsplit(" (", 1)[0] + "\n")


def _replacements(mode: str) -> tuple[type, Any]:
    import acp.agent.connection
    import acp.core

    if mode == "compat":
        from acp_fast.compat import AgentSideConnection as connection_class
        from acp_fast.compat import run_agent as run
    else:
        connection_class = acp.agent.connection.AgentSideConnection
        run = acp.core.run_agent

    class RecordedConnection(connection_class):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            _mark()
            super().__init__(*args, **kwargs)

        @classmethod
        def attach(cls, *args: Any, **kwargs: Any) -> Any:
            """1.x: the v1/v2 negotiation router attaches the agent to a connection it built itself."""
            _mark()
            return super().attach(*args, **kwargs)  # type: ignore[misc]

    RecordedConnection.__name__ = RecordedConnection.__qualname__ = "AgentSideConnection"

    async def run_agent(*args: Any, **kwargs: Any) -> None:
        _mark()
        await run(*args, **kwargs)

    return RecordedConnection, run_agent


_replaced: tuple[type, Any] | None = None


def _patch(module: ModuleType) -> None:
    global _replaced
    if _replaced is None:
        assert _MODE is not None
        _replaced = _replacements(_MODE)
        for name in _MODULES:  # those loaded while the replacements were built
            loaded = sys.modules.get(name)
            if loaded is not None and loaded is not module:
                _patch(loaded)
    connection_class, run_agent = _replaced
    if module.__name__ in ("acp", "acp.core") or hasattr(module, "AgentSideConnection"):
        module.AgentSideConnection = connection_class  # type: ignore[attr-defined]
    if hasattr(module, "run_agent"):
        module.run_agent = run_agent  # type: ignore[attr-defined]


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Patches the SDK modules as they finish loading, so a process that never imports acp pays nothing."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target)  # type: ignore[attr-defined]
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        if module.__name__ == "acp" or _replaced is not None:  # the package is whole from here on
            _patch(module)


if _MODE in ("compat", "sdk"):
    sys.meta_path.insert(0, _PatchAfterImport())
