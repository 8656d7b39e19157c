"""One host's reachability as folded from its session: status, outage, last seen, the
watcher's own faults; a concern of ``HostState`` of its own (issue #37: the fold split by
concern, its reads pure).

``note`` (an item arrived) and ``refresh`` (judge staleness as of now) are the writes; every
other method answers for a given moment and changes nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.analysis.fleet_row import HostStatus
from probes.analysis.reachability import Outage, continue_outage, down_finding, stale_finding
from probes.analysis.watcher import flapping_finding, follow_source, unknown_reason
from probes.errors import DisconnectKind
from probes.wire.events import ClockOffset, Connected, Disconnected, SessionItem, SourceHealth
from probes.wire.samples import Hello, HostSample

STALE_AFTER_INTERVALS = 3.0
STALE_MIN_S = 5.0

_DOWN_KINDS = {DisconnectKind(s.value): s for s in HostStatus if s.is_down}


@dataclass
class ReachTracker:
    """Whether and since when one host can be watched."""

    interval_s: float = 1.0
    """The host's sample interval: silence past three of them (at least 5 s) is stale."""
    status: HostStatus = HostStatus.CONNECTING
    down_reason: str | None = None
    """Why its session dropped, while it is down."""
    last_seen: float | None = None
    """Console wall time of the newest item from this host (agent clocks may be skewed)."""
    data_seen: float | None = None
    """Console wall time of the newest message from the agent itself (not the session's
    own connect and disconnect items): what "last seen" means."""
    outage: Outage | None = None
    """Since when and why the host has not streamed; None once a hello or sample arrives.
    Unlike ``down_reason`` it lasts through the retries' ``Connected``: one outage, one onset."""
    watch: SourceHealth | None = None
    """Set while the console's own path to the host (a collector, Prometheus) is at fault:
    the host reads unknown, and neither stale nor down is judged of it."""
    onsets: deque[float] | tuple[()] = ()
    """When its recent outages began, for ``flapping`` (a deque from the first outage on:
    an empty one is ~0.8 KB a host, and most hosts never go down; issue 38, memory)."""
    relay_dropped: int = 0
    """Samples its collector skipped while the console did not read (newest kept)."""
    relay_dropped_lines: int = 0
    """Other lines its collector dropped meanwhile, past its bound."""

    # writes

    def note(self, item: SessionItem, now: float) -> None:
        """Fold what ``item``, received at console wall time ``now``, says of reachability."""
        was_stale = self.status is HostStatus.STALE
        self.last_seen = now
        if not isinstance(item, (Connected, Disconnected, ClockOffset, SourceHealth)):
            self.data_seen = now
        if isinstance(item, (HostSample, Hello)):
            self.status = HostStatus.STREAMING
            self.outage = None
        elif isinstance(item, Connected):
            self.status = HostStatus.CONNECTING
            self.down_reason = None
        elif isinstance(item, Disconnected):
            self.status = _DOWN_KINDS.get(item.kind, HostStatus.DOWN)
            self.down_reason = item.reason
            retry_at = now + item.retry_in_s if item.retry_in_s is not None else None
            fresh = self.outage is None
            self.outage = continue_outage(self.outage, item.ts, item.kind, item.reason, retry_at,
                                          self.data_seen if was_stale else None)
            if fresh:
                if not isinstance(self.onsets, deque):
                    self.onsets = deque(maxlen=32)
                self.onsets.append(self.outage.onset)
        elif isinstance(item, SourceHealth):
            self.status, self.watch = follow_source(self.status, self.watch, item)
            self.relay_dropped += item.dropped_samples
            self.relay_dropped_lines += item.dropped_lines

    def note_sample(self, now: float) -> None:
        """``note`` of a sample (the fold's own path for a tick, issue 38)."""
        self.last_seen = self.data_seen = now
        self.status = HostStatus.STREAMING
        self.outage = None

    def refresh(self, now: float) -> bool:
        """Judge staleness as of ``now`` and keep it; True when the status moved."""
        status = self.status_at(now)
        moved = status is not self.status
        self.status = status
        return moved

    # reads

    def stale_limit_s(self) -> float:
        """Silence after which a streaming host reads stale."""
        return max(STALE_MIN_S, STALE_AFTER_INTERVALS * self.interval_s)

    def status_at(self, now: float) -> HostStatus:
        """The status as of ``now``: a streaming host silent past ``stale_limit_s`` is
        stale, a stale one that spoke since is streaming (nothing is stored)."""
        if self.status in (HostStatus.STREAMING, HostStatus.STALE) \
                and self.last_seen is not None and self.watch is None:
            silent = now - self.last_seen
            return HostStatus.STALE if silent > self.stale_limit_s() else HostStatus.STREAMING
        return self.status

    def shown(self, status: HostStatus) -> HostStatus:
        """What the screens show for ``status``: unknown while the watcher cannot see it."""
        return HostStatus.UNKNOWN if self.watch is not None else status

    def findings(self, host: str, status: HostStatus) -> list[Finding]:
        """Down (critical) or stale (warning) as of ``status``, and flapping."""
        flapping = flapping_finding(host, self.onsets, self.last_seen or 0.0)
        found = [flapping] if flapping is not None else []
        if self.outage is not None:
            return [down_finding(host, self.outage), *found]
        if status is HostStatus.STALE and self.data_seen is not None and self.watch is None:
            return [stale_finding(host, self.data_seen, self.stale_limit_s()), *found]
        return found

    def reason_at(self, now: float, status: HostStatus) -> str | None:
        """Why the host is not streaming as of ``now`` (``status``: its ``status_at``)."""
        if self.watch is not None:
            return unknown_reason(self.watch)
        if self.outage is not None:
            return self.outage.reason
        if status is HostStatus.STALE and self.data_seen is not None:
            return f"no data for {now - self.data_seen:.0f} s (agent or link frozen?)"
        return None

    def last_seen_at(self, now: float, status: HostStatus) -> float | None:
        """Seconds since the agent last spoke, where that is news (down, stale, unknown)."""
        if self.data_seen is None or (self.outage is None and self.watch is None
                                      and status is not HostStatus.STALE):
            return None
        return max(0.0, now - self.data_seen)

    def next_retry_at(self, now: float) -> float | None:
        """Seconds until the next connect try, while one waits."""
        if self.outage is None or self.outage.retry_at is None \
                or self.status is HostStatus.CONNECTING:
            return None
        return max(0.0, self.outage.retry_at - now)
