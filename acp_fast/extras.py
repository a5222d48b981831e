"""The optional extras: what each brings, and the one-line refusal when one is missing.

Every entry point that needs an extra (a CLI flag, ``serve_ws``/``run_host``,
``acp_fast.compat``, ``--validate``, ``acp-fast bench``) asks here, so a user
who installed the plain package reads one line naming what to install instead
of a ``ModuleNotFoundError`` traceback. acp_fast is installed from a clone or an
sdist (it is not on the package index), so the hint is the form that works
there.
"""

from __future__ import annotations

import importlib.util

#: The importable modules each extra of pyproject.toml provides.
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("picows", "h11", "multidict"),
    "compat": ("acp",),
    "validate": ("jsonschema", "acp"),
    "plot": ("matplotlib",),
    "store": ("redis",),
    "metrics": ("prometheus_client",),
    "otel": ("opentelemetry.trace", "opentelemetry.propagate"),
}


def install_hint(extra: str) -> str:
    """The install command for ``extra`` as it works today: from a clone or an unpacked sdist."""
    return f"pip install '.[{extra}]' (in a clone or an unpacked sdist of acp_fast)"


class MissingExtra(ImportError):
    """An optional extra is not installed; the message is the whole story, one line."""

    def __init__(self, extra: str, what: str, module: str) -> None:
        self.extra = extra
        text = f"{what} needs the '{extra}' extra ({module} is not installed): {install_hint(extra)}"
        super().__init__(text, name=module)


def missing(extra: str) -> str | None:
    """The first module of ``extra`` this environment lacks, or None."""
    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
            return module
    return None


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported."""
    module = missing(extra)
    if module is not None:
        raise MissingExtra(extra, what, module)


__all__ = ["EXTRAS", "MissingExtra", "install_hint", "missing", "require"]
