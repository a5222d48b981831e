"""The tools shipped beside the runtime: ``acp-fast bench``, ``acp-fast client`` and ``acp-fast top``.

They sit above every runtime layer and only the command line imports them
(the import contracts in pyproject.toml say so), so serving an agent never
loads a tool. They are installed with the package, so every sub-command works
from a plain install.
"""
