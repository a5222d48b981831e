# examples/limits.py
from acp_fast import Limits, run_agent

from echo import Echo                              # examples/echo.py, saved beside this file

limits = Limits(max_background=8, cancel_grace_s=1.0, max_line_bytes=8 * 1024 * 1024)

if __name__ == "__main__":
    raise SystemExit(run_agent(Echo(), limits))    # every field has an `acp-fast` flag too
