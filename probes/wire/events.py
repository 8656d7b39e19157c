"""What a host session reports beside the agent's own messages: connects and disconnects,
and whether the console's own path to the host (a collector, a metrics server) works."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from probes.errors import DisconnectKind, WatcherFault
from probes.wire.protocol import StreamStats
from probes.wire.samples import AgentMessage
from probes.wire.sanitize import clean_text


@dataclass(frozen=True)
class Connected:
    """The agent was started and its stream is open."""

    ts: float


@dataclass(frozen=True)
class Disconnected:
    """The stream ended; the session will retry after ``retry_in_s``."""

    ts: float
    reason: str
    retry_in_s: float | None = None
    stats: StreamStats | None = None
    kind: DisconnectKind = DisconnectKind.DOWN
    """Why it ended; recordings store the value (``"stalled"``), the codec reads it back."""

    def __post_init__(self) -> None:
        # the reason quotes the host (the agent's last stderr line, an SSH server's text)
        object.__setattr__(self, "reason", clean_text(self.reason))


@dataclass(frozen=True)
class SourceHealth:
    """Whether the console can see a host through ``source`` (a collector, a Prometheus).

    Sent for each host the source covers when its health changes: a stalled collector or
    a Prometheus that is down says nothing about the hosts behind it, so they read
    "unknown" and the fault is one finding about the source, not one per host.
    """

    ts: float
    source: str
    """The watcher's part at fault, as the operator names it: ``collector 2``, ``prometheus``."""
    fault: WatcherFault | None = None
    """What is wrong with it; None: the host is seen through it again."""
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", clean_text(self.reason))
        object.__setattr__(self, "source", clean_text(self.source))


SessionItem = AgentMessage | Connected | Disconnected | SourceHealth

Emit = Callable[[str, SessionItem], None]
"""Called with (host name, item) for every item; must not block."""
