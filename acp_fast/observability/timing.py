"""Request timings: picks the compiled ``_timing``, or its pure-Python twin.

``ACP_FAST_NO_EXTENSIONS=1`` or a failed import of the extension selects the
twin; ``IMPLEMENTATION`` says which one is live ("c" or "python"). Both give
``now()``, ``Histogram(bounds)`` (``observe``, ``counts``, ``total``) and
``Timings(bounds, label, watch)`` (``since(key, started)``, ``last``,
``histograms``), with the same results; a process uses one of them throughout,
so every start and end is read from the same clock.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._timing_py import Histogram as Histogram
    from ._timing_py import Timings as Timings
    from ._timing_py import now as now

    IMPLEMENTATION: str
elif os.environ.get("ACP_FAST_NO_EXTENSIONS") == "1":
    from ._timing_py import Histogram, Timings, now

    IMPLEMENTATION = "python"
else:
    try:
        from . import _timing

        Histogram, Timings, now = _timing.Histogram, _timing.Timings, _timing.now
        IMPLEMENTATION = "c"
    except ImportError:
        from ._timing_py import Histogram, Timings, now

        IMPLEMENTATION = "python"

__all__ = ["IMPLEMENTATION", "Histogram", "Timings", "now"]
