"""``acp-fast bench``: the end-to-end benchmark, its floor agent and its SDK peer agent."""
