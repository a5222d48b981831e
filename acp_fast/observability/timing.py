"""Request timings: picks the compiled ``_timing``, or its pure-Python twin.

``ACP_FAST_NO_EXTENSIONS=1`` or a failed import of the extension selects the
twin; ``IMPLEMENTATION`` says which one is live ("c" or "python"). Both give
``now()``, ``Histogram(bounds)`` (``observe``, ``counts``, ``total``) and
``Timings(bounds, label, watch)`` (``since(key, started)``, ``last``,
``histograms``), with the same results; a process uses one of them throughout,
so every start and end is read from the same clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire import extensions

if TYPE_CHECKING:
    from ._timing_py import Histogram as Histogram
    from ._timing_py import Timings as Timings
    from ._timing_py import now as now

    IMPLEMENTATION: str
else:
    _compiled = extensions.load("acp_fast.observability._timing")
    if _compiled is None:
        from ._timing_py import Histogram, Timings, now
    else:
        Histogram, Timings, now = _compiled.Histogram, _compiled.Timings, _compiled.now
    IMPLEMENTATION = extensions.implementation(_compiled)

__all__ = ["IMPLEMENTATION", "Histogram", "Timings", "now"]
