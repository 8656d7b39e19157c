"""The agent as shipped, and the bootstrap that runs it on a host without writing a file there.

The agent is written as the package ``probes/agent/`` and shipped as one source:
``agent_source`` concatenates its modules in dependency order (read as text, never
imported), drops their imports of each other, hoists the standard-library imports to the
top, marks each part with a banner and ends with the ``__main__`` guard.  A host whose
agent does not ``--simulate`` is sent it without the simulator.

The host runs ``python3 -u -c '<read N bytes of source from stdin and exec it>'``;
the console then writes exactly N bytes of agent source and keeps stdin open.
The agent watches stdin and exits at EOF, so closing the channel ends it: no
orphan stays behind even where SSH signals are refused.  The source travels on
stdin, not in argv, because one argv string is limited to 128 KiB on Linux.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

AGENT_DIR = Path(__file__).resolve().parent.parent / "agent"
AGENT_PARTS = ("commands", "output", "values", "watchdog", "proc", "pci", "software",
               "attribution", "smi", "nvml", "fabric", "logs", "kernel_log", "source",
               "simulator", "main")
"""The agent's modules in shipping order: each imports only from those before it."""
SIMULATOR_PART = "simulator"
"""Left out of what a real host is sent."""
SIMULATE_FLAG = "--simulate"
WIRE_ARGS = ("--wire", "2")
"""The agent the console ships speaks wire protocol v2 (``probes/wire/compact.py``)."""


@dataclass
class _Imports:
    """The standard-library imports of every part, each kept once."""

    future: set[str] = field(default_factory=set)
    plain: set[str] = field(default_factory=set)
    names: dict[str, set[str]] = field(default_factory=dict)

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        aliases = {a.name if a.asname is None else f"{a.name} as {a.asname}"
                   for a in node.names}
        if isinstance(node, ast.Import):
            self.plain |= {f"import {a}" for a in aliases}
        elif node.module == "__future__":
            self.future |= aliases
        else:
            self.names.setdefault(node.module or "", set()).update(aliases)

    def lines(self) -> list[str]:
        out = [f"from __future__ import {', '.join(sorted(self.future))}", ""] if self.future \
            else []
        out += sorted(self.plain)
        out += [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(self.names.items())]
        return out


def _part_body(name: str, text: str, shipped: tuple[str, ...], imports: _Imports) -> str:
    """One module's text without its top-level imports (those go to ``imports``).

    Raises:
        ValueError: a relative import that is not ``from .x import ...`` of a part shipped
            before this one (the order would leave a name undefined when the source runs).
    """
    tree = ast.parse(text, filename=f"probes/agent/{name}.py")
    drop: set[int] = set()
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            earlier = shipped[:shipped.index(name)]
            if node.level != 1 or node.module not in earlier:
                raise ValueError(f"probes/agent/{name}.py:{node.lineno}: "
                                 f"from {'.' * node.level}{node.module or ''} import ...: "
                                 f"only a part shipped before {name} ({', '.join(earlier)})")
        else:
            imports.add(node)
        drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines: list[str] = []
    after_drop = False
    for i, line in enumerate(text.splitlines(), 1):
        # Blank lines that only framed a dropped import go with it.
        if i in drop or (after_drop and not line.strip() and lines and not lines[-1].strip()):
            after_drop = True
            continue
        after_drop = False
        lines.append(line)
    return "\n".join(lines).strip("\n")


def _docstring(text: str) -> str:
    """The module docstring of ``text`` exactly as written."""
    first = ast.parse(text).body[0]
    return "\n".join(text.splitlines()[first.lineno - 1:first.end_lineno])


@lru_cache(maxsize=2)
def agent_source(simulate: bool) -> bytes:
    """The agent's source, exactly as shipped to hosts.

    Args:
        simulate: include the simulator (only hosts run with ``--simulate`` need it;
            without it the agent refuses ``--simulate``).

    Returns:
        One Python 3.8 source file, UTF-8.
    """
    shipped = tuple(p for p in AGENT_PARTS if simulate or p != SIMULATOR_PART)
    imports = _Imports()
    bodies = [f"# --- probes/agent/{name}.py ---\n\n"
              + _part_body(name, (AGENT_DIR / f"{name}.py").read_text(), shipped, imports)
              for name in shipped]
    variant = "with" if simulate else "without"
    head = ["#!/usr/bin/env python3", _docstring((AGENT_DIR / "__init__.py").read_text()),
            f"# Assembled by probes/transport/bootstrap.py from probes/agent/ ({variant} the "
            "simulator);\n# edit those modules, not this file.", ""]
    text = "\n".join(head + imports.lines()) + "\n\n\n" + "\n\n\n".join(bodies)
    text += '\n\n\nif __name__ == "__main__":\n    main()\n'
    return text.encode("utf-8")


def wants_simulator(agent_args: list[str]) -> bool:
    """Whether these agent arguments ask for the simulator."""
    return any(a == SIMULATE_FLAG or a.startswith(SIMULATE_FLAG + "=") for a in agent_args)


def shipped_source(agent_args: list[str]) -> bytes:
    """The source a host running the agent with ``agent_args`` is sent."""
    return agent_source(simulate=wants_simulator(agent_args))


def bootstrap_argv(python: str, agent_args: list[str], nbytes: int | None = None) -> list[str]:
    """The argv that starts the agent from source on stdin.

    Args:
        python: the host's interpreter (``python3`` by default in inventories).
        agent_args: arguments for the agent itself.
        nbytes: length of the source that will follow on stdin (default: that of
            ``shipped_source(agent_args)``).

    Returns:
        An argv list; ``--stdin-eof-exit`` and ``--wire 2`` (the compact protocol, which
        the console's reader takes with v1) are always added, before ``agent_args`` so an
        explicit ``--wire 1`` there still wins.
    """
    n = len(shipped_source(agent_args)) if nbytes is None else nbytes
    code = (f"import sys;exec(compile(sys.stdin.buffer.read({n}),'rigwatch-agent','exec'),"
            "{'__name__':'__main__'})")
    return [python, "-u", "-c", code, "--stdin-eof-exit", *WIRE_ARGS, *agent_args]


def bootstrap_command(python: str, agent_args: list[str], nbytes: int | None = None) -> str:
    """The same as one shell command line, every word quoted (for SSH exec requests)."""
    return " ".join(shlex.quote(a) for a in bootstrap_argv(python, agent_args, nbytes))
