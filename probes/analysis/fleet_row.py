"""A host's line on the fleet screen and where its stream stands: the values every screen
reads of a host, already judged (``probes.fleet_state`` builds them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from probes.analysis.judge import GpuJudgement, TempLevel
from probes.triage import Severity
from probes.wire.samples import HostSample


class HostStatus(str, Enum):
    """Where a host's stream stands."""

    CONNECTING = "connecting"
    STREAMING = "streaming"
    STALE = "stale"
    DOWN = "down"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth-failed"
    HOST_KEY_REFUSED = "host-key-refused"
    AGENT_FAILED = "agent-failed"
    UNKNOWN = "unknown"
    """The console's own path to the host failed (a collector, the metrics server): nothing
    is known of the host now, which is not the same as down."""

    @property
    def is_down(self) -> bool:
        """Not streaming because of a failure (as opposed to connecting, stale or unknown)."""
        return self not in (HostStatus.CONNECTING, HostStatus.STREAMING, HostStatus.STALE,
                            HostStatus.UNKNOWN)


@dataclass(frozen=True)
class FleetRow:
    """One host's line on the fleet screen: already computed, ready to render."""

    name: str
    tags: tuple[str, ...]
    status: HostStatus
    stale_s: float | None
    gpus_ok: int
    gpus_expected: int | None
    max_temp_c: float | None
    mem_used_pct: float | None
    mean_util_pct: float | None
    power_w: float | None
    findings: int
    worst: Severity | None
    worst_summary: str | None
    simulated: bool
    by_severity: tuple[int, int, int] = (0, 0, 0)
    """Findings counted as (critical, warning, info), for the header totals."""
    gpus: tuple[GpuJudgement, ...] = ()
    """Each GPU's verdicts, as every screen shows them (``probes.analysis.judge``)."""
    temp_level: TempLevel = TempLevel.UNKNOWN
    """The hottest GPU's level against its own slowdown threshold."""
    reason: str | None = None
    """Why the host is down or stale, in full (sanitised): the fleet table's reason."""
    last_seen_s: float | None = None
    """Seconds since the host's last item, when it is down or stale (its values are old)."""
    next_retry_s: float | None = None
    """Seconds until the next connection attempt, when the host is down."""
    headline: str | None = None
    """The worst finding led by its verdict ("GPU6 LOST · Xid 79"), so truncation keeps it."""
    jobs: tuple[str, ...] = ()
    """The Slurm jobs whose processes hold its GPUs now (the agent's attribution)."""
    mem_high: bool = False
    """Its GPUs' memory, all together, used at or above ``mem_high_pct``."""

    @property
    def healthy(self) -> bool:
        """Streaming, every GPU it should have answering, nothing worse than info found:
        the word the fleet filter matches (``!healthy`` leaves the hosts that need a look)."""
        return (self.status is HostStatus.STREAMING
                and (self.worst is None or self.worst.rank < Severity.WARNING.rank)
                and (self.gpus_expected is None or self.gpus_ok >= self.gpus_expected))


def jobs_of(sample: HostSample | None) -> tuple[str, ...]:
    """The Slurm job ids of a sample's GPU processes, sorted numerically."""
    if sample is None:
        return ()
    found = {p.slurm_job for g in sample.gpus for p in g.processes or () if p.slurm_job}
    return tuple(sorted(found, key=lambda j: (len(j), j)))
