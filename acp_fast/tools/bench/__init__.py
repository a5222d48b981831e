"""``acp-fast bench``: the end-to-end benchmark, its floor agent and its SDK peer agent.

driver (command line) -> runner (the run) -> probe (what a target supports) and
scenarios (the measured rounds) -> process (one agent subprocess, whose CPU time
and memory proc_stats reads from outside); report prints, stats holds the one
percentile definition, targets says what is run.
echo_floor.py, ws_floor.py and sdk_demo_agent.py are scripts the bench starts, not modules it imports.
"""
