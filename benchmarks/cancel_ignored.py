"""Cancel, agent ignores it: time from ``session/cancel`` to the answer vs ``cancel_grace_s``, acp_fast and the SDK.

    python benchmarks/cancel_ignored.py [--rounds 30] [--sdk-rounds 3] [--grace 0.5] [--wait 10]

A thin wrapper: the scenario lives in acp_fast/tools/bench/cancel_ignored.py and
is a row of ``acp-fast bench --cancel-ignored``; this prints it alone.
"""

from __future__ import annotations

from acp_fast.tools.bench.cancel_ignored import main

if __name__ == "__main__":
    main()
