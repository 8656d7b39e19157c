"""Which hosts of the fold changed, and which of those changed more than their numbers.

The fold (``probes.fleet_state.FleetState``) counts its writes (``version``) and keeps, in
order, each host's newest change (``changed_since``) and its newest change that was not a
sample moving only numbers (``judged_since``).  A view (the console's row cache,
``tui.views.fleet_rows``) then looks at the hosts that changed, and, off screen where
nobody reads numbers, only at those whose status, findings or GPUs answering may have
moved: at a thousand busy hosts every host changes each second, and visiting each to learn
that nothing but its numbers moved was most of a redraw's rows (issue 38).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from probes.analysis.fleet_row import HostStatus
from probes.analysis.tick_gpus import tick_gpus
from probes.wire.compact import StaticEpoch

if TYPE_CHECKING:
    from probes.analysis.host_findings import HostFindings
    from probes.analysis.host_logs import HostLogs
    from probes.analysis.limits import Limits
    from probes.analysis.reach_tracker import Outage, ReachTracker
    from probes.wire.events import SourceHealth
    from probes.wire.samples import HostSample


class HostState(Protocol):
    """What of ``probes.fleet_state.HostState`` is read here."""

    findings_kept: HostFindings
    reach: ReachTracker
    last: HostSample | None
    logs: HostLogs
    limits: Limits

NumbersMark = tuple[int, HostStatus, "Outage | None", "SourceHealth | None", "HostSample | None"]
"""What a sample that moves only numbers leaves as it was (``numbers_mark``)."""


def numbers_mark(host: HostState) -> NumbersMark:
    """What of ``host`` its row's status, findings and GPUs answering read, before a sample
    (written out in ``HostState.apply_sample``: change both)."""
    reach = host.reach
    kept = host.findings_kept
    return kept.content - kept.reworded, reach.status, reach.outage, reach.watch, host.last


def numbers_only(host: HostState, mark: NumbersMark) -> bool:
    """Whether the sample just folded into ``host`` (``mark``: taken before it) moved only
    numbers: no kept finding came, went or changed its severity (only its words or values
    may have, a throttled clock's MHz: ``HostFindings.reworded``; an off-screen row keeps
    its findings' words while nobody reads them, ``FleetRows._may_wait``), nor the
    reachability the findings and status read, nor any GPU's state (what the fleet row's
    GPU count reads beyond the findings: ``tui.views.fleet_rows._answering``).  A host that
    has flapped (its findings read its last-seen time) or whose job log's throughput is down
    (its cause is looked for in every sample) never moves only numbers.  False when
    unsure."""
    shape, status, outage, watch, last = mark
    reach = host.reach
    new = host.last
    kept = host.findings_kept
    if (kept.content - kept.reworded != shape or reach.status is not status
            or reach.outage is not outage or reach.watch is not watch or reach.onsets
            or last is None or new is None or host.logs.speed.drops(host.limits.detectors)):
        return False
    epoch = new.static_epoch
    if epoch is last.static_epoch and isinstance(epoch, StaticEpoch) \
            and new.wire_row is not None and last.wire_row is not None:
        return True  # both GPUs' static halves are this epoch's (``tick_gpus``): the same
    was, now = tick_gpus(last)[1], tick_gpus(new)[1]
    return was is now or [g.state for g in was] == [g.state for g in now]


class ChangeLog:
    """The fold's write count and, per host, the version of its newest change of each kind."""

    def __init__(self) -> None:
        self.version = 0
        """Writes so far: a view is unchanged while it and the clock are."""
        self._changed: dict[str, int] = {}
        """Each host that changed → the version of its newest change, oldest change first
        (``changed_since`` walks it from the newest end)."""
        self._judged: dict[str, int] = {}
        """The same for changes beyond numbers (``numbers_only`` False)."""

    def bump(self) -> None:
        """A write no host's row reads (a job's state)."""
        self.version += 1

    def changed(self, host: str, *, judged: bool = True) -> None:
        """``host`` changed; ``judged`` False: only its numbers moved (``numbers_only``)."""
        self.version += 1
        version = self.version
        changed = self._changed
        changed.pop(host, None)
        changed[host] = version
        if judged:
            marked = self._judged
            marked.pop(host, None)
            marked[host] = version

    def changed_since(self, version: int) -> list[str]:
        """The hosts that changed after ``version`` (a read of ``version``), newest first."""
        return _since(self._changed, version)

    def judged_since(self, version: int) -> list[str]:
        """The hosts whose change after ``version`` was more than numbers, newest first."""
        return _since(self._judged, version)


def _since(at_version: dict[str, int], version: int) -> list[str]:
    out = []
    for name, at in reversed(at_version.items()):
        if at <= version:
            break
        out.append(name)
    return out
