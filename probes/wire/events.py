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
    dropped_samples: int = 0
    """Samples of the host the source skipped since its last report (a collector whose
    console did not read keeps only each host's newest)."""
    dropped_lines: int = 0
    """Its other lines dropped past the source's bound meanwhile (log lines first)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", clean_text(self.reason))
        object.__setattr__(self, "source", clean_text(self.source))



@dataclass(frozen=True)
class ClockOffset:
    """How far the host's clock runs ahead of the console's (negative: behind), as the
    session estimates it from when the host's samples arrive.

    Every time the session passes on after this item is already corrected by
    ``applied_s``: recordings and replays keep the console's time order across hosts.
    """

    ts: float
    """Console time of the estimate."""
    offset_s: float
    """Host clock minus console clock (the link's delay makes it read slightly low)."""
    applied_s: float
    """What is taken off the host's times from now on (0 while the offset is small)."""
    samples: int = 0
    """How many of the host's messages the estimate rests on."""


@dataclass(frozen=True)
class JobChange:
    """A watched Slurm job's state as the scheduler last told it (polled), and what changed.

    Passed under the job's batch host's name, so a recording keeps it beside its hosts'
    items and a replay shows the job end when it ended."""

    ts: float
    """Console time of the poll that saw the change."""
    job: str
    state: str
    """Slurm's state (``RUNNING``, ``COMPLETED``, ``FAILED``, ``REQUEUED``…); ``UNKNOWN``
    when Slurm no longer tells (past MinJobAge) and nothing was seen before."""
    reason: str | None = None
    exit_code: str | None = None
    """``status:signal`` as sacct writes it, once the job ended."""
    nodes: tuple[str, ...] = ()
    note: str | None = None
    """What else to say: Slurm did not answer, the node list changed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", clean_text(self.state)[:40])
        if self.reason is not None:
            object.__setattr__(self, "reason", clean_text(self.reason)[:200])
        if self.note is not None:
            object.__setattr__(self, "note", clean_text(self.note)[:300])


@dataclass(frozen=True)
class XidEvent:
    """An Xid a GPU monitor reported as a number, not as a log line: dcgm-exporter's
    ``DCGM_FI_DEV_XID_ERRORS`` (the GPU's last Xid code) changed to ``xid``.

    It reaches the Xid rules as it came (GPU, code), never rewritten as a kernel line to be
    parsed again; the metric is sticky, so the same code again later is not seen (a limit
    of the metric that the kernel log, read over SSH, does not have)."""

    ts: float
    gpu: int
    xid: int
    bus_id: str | None = None
    """The GPU's PCI bus id as the series labels it (remote text, cleaned)."""
    uuid: str | None = None
    source: str = "dcgm"
    """Who reported it: ``dcgm`` (a Prometheus series of dcgm-exporter's or rigwatch's)."""
    metric: str = "DCGM_FI_DEV_XID_ERRORS"

    def __post_init__(self) -> None:
        for name in ("bus_id", "uuid"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, clean_text(value)[:80])
        object.__setattr__(self, "source", clean_text(self.source)[:40])
        object.__setattr__(self, "metric", clean_text(self.metric)[:80])


SessionItem = (AgentMessage | Connected | Disconnected | ClockOffset | JobChange | SourceHealth
               | XidEvent)

Emit = Callable[[str, SessionItem], None]
"""Called with (host name, item) for every item; must not block."""


def emit_each(host: str, msgs: list[AgentMessage], emit: Emit) -> bool:
    """Emit each message; True when there was one.  In a frame of its own: a loop variable
    in a session's would hold the last message (a collector's: a hello or fabric report,
    ~8 KB a host) for as long as the ticks after it decode to nothing (issue 38, memory)."""
    for msg in msgs:
        emit(host, msg)
    return bool(msgs)
