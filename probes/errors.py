"""The small exception hierarchy of rigwatch: each error has a title for the UI and a message.

Errors are raised where they are found and caught at the boundary that can act on
them: the CLI turns them into one line and an exit code, the console into a
notification or a host status.
"""

from __future__ import annotations


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
