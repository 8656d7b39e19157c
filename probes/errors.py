"""The small exception hierarchy of rigwatch: each error has a title for the UI and a message.

Errors are raised where they are found and caught at the boundary that can act on
them: the CLI turns them into one line and an exit code, the console into a
notification or a host status.  Every error rigwatch raises on purpose is a
``RigwatchError``::

    RigwatchError
    ├── ProtocolError            wire: a line from an agent that cannot be used
    ├── TransportError           transport: the agent could not start or its stream broke;
    │                            ``kind`` is the DisconnectKind a session reports
    ├── ConfigError              a command-line option or configuration value is unusable
    │   ├── ProblemsError        a config file with every problem listed (path:line:col)
    │   │   ├── InventoryError   config.inventory
    │   │   └── SettingsError    tui.settings
    │   ├── HostlistError        config.hostlist (also a ValueError)
    │   └── ManifestError        outputs.manifest
    ├── RecordingError           store.recording: not a usable recording
    ├── ReplayError              store.replay: nothing to replay, or a bad seek target
    ├── CodecError               store.codec: data that does not fit its class (a ValueError)
    ├── ReportError, ExplainInputError   outputs.report, explain
    ├── ActionError              actions: a node action not taken (a bad node name, reason)
    │   └── AuditError           actions.audit: the audit trail cannot be written or read
    └── CommandError             tui.commands: a ``:`` command that cannot run (a ValueError)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class RigwatchError(Exception):
    """Base of every error rigwatch raises on purpose."""

    title = "rigwatch error"

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class ProtocolError(RigwatchError):
    """A line from an agent that cannot be used."""

    title = "Garbled agent output"


class DisconnectKind(str, Enum):
    """Why a host's stream ended, as a session reports it in ``Disconnected.kind``.

    The values are what recordings store; the console's host status follows from them.
    """

    UNREACHABLE = "unreachable"
    """TCP connect, handshake or login did not complete."""
    AUTH_FAILED = "auth-failed"
    HOST_KEY_REFUSED = "host-key-refused"
    AGENT_FAILED = "agent-failed"
    """Connected, but the agent could not run (no python, crashed)."""
    STALLED = "stalled"
    """Connected, but nothing arrived for too long."""
    GARBLED = "garbled"
    """The other end sent lines that are not the protocol."""
    DOWN = "down"
    """The stream simply ended, or the transport could not be made."""

    @property
    def refused(self) -> bool:
        """A refusal that retrying soon cannot fix: the session waits the full backoff cap."""
        return self in (DisconnectKind.AUTH_FAILED, DisconnectKind.HOST_KEY_REFUSED)


class TransportError(RigwatchError):
    """The agent could not be started or its stream broke."""

    title = "Connection problem"
    kind = DisconnectKind.DOWN


class ConfigError(RigwatchError):
    """A command-line option or configuration value is unusable."""

    title = "Configuration error"


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


class ProblemsError(ConfigError):
    """A config file that cannot be used; ``problems`` lists every reason, in file order."""

    title = "Configuration file error"

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class InventoryError(ProblemsError):
    """The inventory cannot be used."""

    title = "Inventory error"
