"""The bootstrap that runs the agent on a host without writing a file there.

The host runs ``python3 -u -c '<read N bytes of source from stdin and exec it>'``;
the console then writes exactly N bytes of agent source and keeps stdin open.
The agent watches stdin and exits at EOF, so closing the channel ends it: no
orphan stays behind even where SSH signals are refused.  The source travels on
stdin, not in argv, because one argv string is limited to 128 KiB on Linux.
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from pathlib import Path

AGENT_PATH = Path(__file__).resolve().parent.parent / "agent" / "main.py"


@lru_cache(maxsize=1)
def agent_source() -> bytes:
    """The agent's source, exactly as shipped to hosts."""
    return AGENT_PATH.read_bytes()


def bootstrap_argv(python: str, agent_args: list[str], nbytes: int | None = None) -> list[str]:
    """The argv that starts the agent from source on stdin.

    Args:
        python: the host's interpreter (``python3`` by default in inventories).
        agent_args: arguments for the agent itself.
        nbytes: length of the source that will follow on stdin.

    Returns:
        An argv list; ``--stdin-eof-exit`` is always added.
    """
    n = len(agent_source()) if nbytes is None else nbytes
    code = (f"import sys;exec(compile(sys.stdin.buffer.read({n}),'rigwatch-agent','exec'),"
            "{'__name__':'__main__'})")
    return [python, "-u", "-c", code, "--stdin-eof-exit", *agent_args]


def bootstrap_command(python: str, agent_args: list[str], nbytes: int | None = None) -> str:
    """The same as one shell command line, every word quoted (for SSH exec requests)."""
    return " ".join(shlex.quote(a) for a in bootstrap_argv(python, agent_args, nbytes))
