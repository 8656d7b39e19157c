"""The small exception hierarchy of rigwatch: each error has a title for the UI and a message.

Errors are raised where they are found and caught at the boundary that can act on
them: the CLI turns them into one line and an exit code, the console into a
notification or a host status.
"""

from __future__ import annotations

from dataclasses import dataclass


class RigwatchError(Exception):
    """Base of every error rigwatch raises on purpose."""

    title = "rigwatch error"

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class ProtocolError(RigwatchError):
    """A line from an agent that cannot be used."""

    title = "Garbled agent output"


class TransportError(RigwatchError):
    """The agent could not be started or its stream broke."""

    title = "Connection problem"


class ConfigError(RigwatchError):
    """A command-line option or configuration value is unusable."""

    title = "Configuration error"


class ProbeFailure(RigwatchError):
    """A probe could not collect what it was asked for."""

    title = "Probe failed"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a config file, where it is: what a user fixes in one edit."""

    path: str
    line: int
    """1-based; 0 when the problem is the file itself (unreadable, not YAML text)."""
    col: int
    key: str | None
    """The key at fault, if any (``port``, ``hosts``)."""
    message: str
    hint: str = ""
    """What to do about it, shown after a dash (a close match, the allowed values)."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}" if self.line else self.path
        return f"{self.message} at {where}" + (f" — {self.hint}" if self.hint else "")


class InventoryError(ConfigError):
    """The inventory cannot be used; ``problems`` lists every reason, in file order."""

    title = "Inventory error"

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems
