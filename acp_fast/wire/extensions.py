"""The one switch between the compiled extensions and their pure-Python twins.

Four modules have a compiled form (the framer, the decoder and the params walk in
``wire/``, the request timings in ``observability/``); each asks ``load`` for
it and falls back to its twin on None. ``ACP_FAST_NO_EXTENSIONS=1`` makes
every ``load`` answer None, so a process runs all twins or none it was not
denied; an extension that fails to import is answered None too, and why is
kept in ``MISSING``. The callers import the twin statically under
``TYPE_CHECKING``, so type checking reads one precise signature either way.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: The environment variable that selects every pure-Python twin ("1").
ENV_VAR = "ACP_FAST_NO_EXTENSIONS"
#: Whether the extensions were switched off for this process (read once, at import).
DISABLED = os.environ.get(ENV_VAR) == "1"
#: Why an extension asked for is not live although nobody switched them off, by module name.
MISSING: dict[str, str] = {}


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (absolute), or None: switched off, or not built (see ``MISSING``)."""
    if DISABLED:
        return None
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        MISSING[name] = str(exc)
        return None


def implementation(module: ModuleType | None) -> str:
    """``"c"`` for a module ``load`` returned, ``"python"`` for its twin."""
    return "python" if module is None else "c"


__all__ = ["DISABLED", "ENV_VAR", "MISSING", "implementation", "load"]
