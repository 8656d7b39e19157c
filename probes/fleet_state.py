"""The console's picture of the fleet: per-host state folded from session items.

Pure and synchronous: the app applies items here from its message handlers and
hands the resulting immutable rows to widgets.  Nothing here blocks or does I/O.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from probes.analysis.allocation import (
    HoldTracker,
    idle_allocation_findings,
    stray_process_findings,
)
from probes.analysis.collected import collection_findings
from probes.analysis.detectors import DetectorSchedule
from probes.analysis.fabric import FabricTracker, fabric_findings
from probes.analysis.fabric_groups import RACK_CODES, SWITCH_CODES, grouped
from probes.analysis.fabric_map import FabricMap, fabric_map
from probes.analysis.findings import (
    Finding,
    Severity,
    host_findings,
    link_chain_findings,
    log_findings,
    sample_findings,
    topology_findings,
)
from probes.analysis.first_failure import Diagnosis, diagnose
from probes.analysis.fleet_counts import count_by_severity, count_rows, timeless
from probes.analysis.fleet_row import FleetRow, HostStatus, jobs_of
from probes.analysis.gpu_peers import PeerCounts
from probes.analysis.headline import headline
from probes.analysis.host_clock import clock_findings
from probes.analysis.job_log_state import keep_job_log_state, refused_job_logs
from probes.analysis.job_ranks import HostRanks, RankIndex, placed
from probes.analysis.judge import GpuJudgement, TempLevel, gpus_present, judge_gpus, mem_high
from probes.analysis.limits import DetectorLimits, Limits, PreflightLimits
from probes.analysis.log_source import kernel_log_summary, log_source_findings
from probes.analysis.onsets import Clocks
from probes.analysis.reachability import (
    REACHABILITY_CODES,
    Outage,
    continue_outage,
    down_finding,
    gpu_count_finding,
    stale_finding,
)
from probes.analysis.repeats import merged_repeat
from probes.analysis.throughput import ThroughputTracker, reading, throughput_findings
from probes.analysis.watcher import (
    flapping_finding,
    follow_source,
    source_findings,
    unknown_reason,
)
from probes.analysis.xid_events import xid_event_finding
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.history import HostHistory, tiers_for
from probes.rules.logrules.live import LineClock, LiveLogScanner
from probes.rules.logrules.scan_worker import ScanWorker
from probes.rules.logrules.stamps import HostTime
from probes.rules.parsers.ibnetdiscover import IbTopology
from probes.triage import Code
from probes.wire.events import (
    ClockOffset,
    Connected,
    Disconnected,
    JobChange,
    SessionItem,
    SourceHealth,
    XidEvent,
)
from probes.wire.samples import (
    JOB_SOURCE_PREFIX,
    KERNEL_SOURCE,
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    ProbeError,
)

STALE_AFTER_INTERVALS = 3.0
STALE_MIN_S = 5.0
OFF_SCREEN_REFRESH_S = 5.0
"""How old an off-screen host's numbers may get in its fleet row (see ``FleetState.focus``)."""
DETECTOR_HOSTS = 3000
"""Hosts whose detectors run at their own pace; a larger fleet runs each host's detectors
proportionally less often (10,000 hosts: every 3.3 periods), so their CPU stays that of
3,000 hosts'.  Their verdicts are about windows of ten minutes to an hour."""
OFF_SCREEN_INTERVALS = 2.0
"""…or this many of the host's intervals: a host read every 15 s (Prometheus) changes every
15 s, so 5 s never spared a rebuild; at 10,000 such hosts the rebuilds were a tenth of a
core."""
RANK_INDEX_EVERY_S = 2.0
"""How old the rank index may get while items arrive (see ``FleetState.rank_index``)."""
SEEN_KERNEL_LINES = 20000
"""Kernel lines remembered per host so a reconnect's look-back is not counted twice."""


_DOWN_KINDS = {DisconnectKind(s.value): s for s in HostStatus if s.is_down}


@dataclass
class HostState:
    """Everything the console knows about one host; owned by the app's thread."""

    spec: HostSpec
    status: HostStatus = HostStatus.CONNECTING
    hello: Hello | None = None
    last: HostSample | None = None
    last_seen: float | None = None
    """Console wall time of the newest item from this host (agent clocks may be skewed)."""
    down_reason: str | None = None
    history: HostHistory = field(default_factory=HostHistory)
    """Every series of the host in tiers (1 s for 2 h, 15 s for 12 h, 5 min for 30 days)."""
    detected: tuple[Finding, ...] = ()
    """What the soak detectors found at their last run (leaks, sustained throttling …)."""
    limits: Limits = field(default_factory=Limits)
    """The operator's limits, for the findings and every judgement shown about this host."""
    detectors: DetectorSchedule = field(default_factory=DetectorSchedule)
    """Runs each detector when due (every 1–5 agent minutes), not every tick."""
    events: deque[LogEvent] = field(default_factory=lambda: deque(maxlen=500))
    errors: deque[ProbeError] = field(default_factory=lambda: deque(maxlen=100))
    sticky: dict[tuple[str, str, int | None, int | None], Finding] = field(default_factory=dict)
    """Findings from events and from GPUs that vanished: they stay until acknowledged."""
    current: tuple[Finding, ...] = ()
    layout: tuple[Finding, ...] = ()
    """Findings about how the host is built (topology, PCIe chains), kept until they change."""
    peers: PeerCounts | None = None
    """The fleet's GPU counts by model: what this host should list where the inventory
    names no ``expect_gpus`` (shared by every host of a ``FleetState``)."""
    logs: LiveLogScanner = field(default_factory=LiveLogScanner)
    scan_worker: ScanWorker | None = field(default=None, repr=False, compare=False)
    """The thread that runs the log rules (the console's); None: they run when asked."""
    holds: HoldTracker = field(default_factory=HoldTracker)
    """Since when each GPU has been held by its current job (allocation against use)."""
    speed: ThroughputTracker = field(default_factory=ThroughputTracker)
    """Training throughput per job log (``probes.analysis.throughput``)."""
    since: dict[tuple[str, str, int | None, int | None], float] = field(default_factory=dict)
    """When each current finding was first seen, so triage can order incidents in time."""
    log_source: LogSourceState | None = None
    """How the agent reads this host's kernel log, from its latest ``logsource`` message."""
    job_logs: dict[str, LogSourceState] = field(default_factory=dict)
    """How it reads each file a job named (``job:<path>``), from the same messages."""
    seen_kernel: dict[tuple[str | None, str], None] = field(default_factory=dict)
    """Recent kernel lines by (boot, cursor or line), oldest first: a reconnect resends
    dmesg's whole ring buffer, and the same Xid must not count twice."""
    outage: Outage | None = None
    """Since when and why the host has not streamed; None once a hello or sample arrives.
    Unlike ``down_reason`` it lasts through the retries' ``Connected``: one outage, one onset."""
    data_seen: float | None = None
    """Console wall time of the newest message from the agent itself (not the session's
    own connect and disconnect items): what "last seen" means."""
    watch: SourceHealth | None = None
    """Set while the console's own path to the host (a collector, Prometheus) is at fault:
    the host reads unknown, and neither stale nor down is judged of it."""
    relay_dropped: int = 0
    """Samples its collector skipped while the console did not read (newest kept)."""
    relay_dropped_lines: int = 0
    """Other lines its collector dropped meanwhile, past its bound."""
    onsets: deque[float] = field(default_factory=lambda: deque(maxlen=32))
    """When its recent outages began, for ``flapping``."""
    clock: ClockOffset | None = None
    """The session's newest estimate of the host's clock against the console's (the times
    folded here are already corrected by its ``applied_s``)."""
    fabric: FabricTracker = field(default_factory=FabricTracker)
    """The host's IB/RoCE ports and NVLinks, from its newest ``fabric`` messages."""
    fabric_found: tuple[Finding, ...] = ()
    """What they are judged to be (``probes.analysis.fabric``), onsets kept."""
    changes: int = 0
    """Items folded so far: what a cached row or finding list was computed at."""
    _found: tuple[int, HostStatus, list[Finding]] | None = field(
        default=None, repr=False, compare=False)
    """``findings()`` as of (``changes``, status): they change with nothing else."""

    @property
    def name(self) -> str:
        """The host's name in the fleet."""
        return self.spec.name

    def apply(self, item: SessionItem, now: float) -> None:
        """Fold one session item, received at console wall time ``now``."""
        self.changes += 1
        was_stale = self.status is HostStatus.STALE
        self.last_seen = now
        if not isinstance(item, (Connected, Disconnected, ClockOffset, SourceHealth)):
            self.data_seen = now
        if isinstance(item, HostSample):
            self._apply_sample(item)
        elif isinstance(item, Hello):
            self.hello = item
            self.logs.clock = LineClock(HostTime(item.clock.utc_offset_s or 0.0,
                                                 item.clock.boot_time),
                                        self.logs.clock.offset_s)
            self.status = HostStatus.STREAMING
            self.outage = None
            self.layout = tuple(topology_findings(self.name, item)
                                + link_chain_findings(self.name, item, item.pcie)
                                + collection_findings(self.name, item))
        elif isinstance(item, LogEvent):
            if item.source == KERNEL_SOURCE and self._seen_before(item):
                return
            self.events.append(item)
            if item.source != KERNEL_SOURCE and self.scan_worker is None:
                self.speed.add(item.source, item.line, item.ts)  # else read on the worker
            if self.scan_worker is not None:
                self.logs.post(item.source, item.line, item.ts)
                self.scan_worker.submit(self.logs)
            elif self.logs.add(item.source, item.line, item.ts):
                self.scan_logs()
        elif isinstance(item, FabricSample):
            self.fabric.add(item)
            self._judge_fabric()
        elif isinstance(item, LogSourceState):
            if item.source == KERNEL_SOURCE:
                self.log_source = item
            else:
                keep_job_log_state(self.job_logs, item)
        elif isinstance(item, ProbeError):
            self.errors.append(item)
        elif isinstance(item, ClockOffset):
            self.clock = item
            self.logs.clock = LineClock(self.logs.clock.zone, item.applied_s)
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
                self.onsets.append(self.outage.onset)
        elif isinstance(item, XidEvent):  # a number from DCGM: the Xid rules, no line
            f = xid_event_finding(self.name, item)
            kept = self.sticky.get(f.key)
            self.sticky[f.key] = f if kept is None else merged_repeat(kept, f)
        elif isinstance(item, SourceHealth):
            self.status, self.watch = follow_source(self.status, self.watch, item)
            self.relay_dropped += item.dropped_samples
            self.relay_dropped_lines += item.dropped_lines

    @property
    def shown_status(self) -> HostStatus:
        """What the screens show: unknown while the watcher itself cannot see the host."""
        return HostStatus.UNKNOWN if self.watch is not None else self.status

    def _apply_sample(self, sample: HostSample) -> None:
        self.last = sample
        self.status = HostStatus.STREAMING
        self.outage = None
        self.history.add(sample)
        detected = self.detectors.run(self.name, self.history, self.hello, sample)
        if detected is not None:
            self.detected = detected
        self.holds.update(sample)
        found = (sample_findings(self.name, self.hello, sample, self.limits.detectors)
                 + host_findings(self.name, sample)
                 + idle_allocation_findings(self.name, self.history, sample, self.holds,
                                            self.limits.detectors)
                 + stray_process_findings(self.name, sample, self.limits.detectors))
        # The host's own GPU list (its hello) against the inventory: a GPU it lists and then
        # loses is gpu-lost's, per GPU; one it does not list at all is counted here.
        listed = max(len(self.hello.facts.gpus) if self.hello else 0,
                     sum(1 for g in sample.gpus if g.index >= 0))
        short = gpu_count_finding(self.name, self.spec.expect_gpus, listed, sample.ts)
        peer = self.peers.expected(self.name) if self.peers is not None and short is None \
            and self.spec.expect_gpus is None else None
        if peer is not None:
            short = gpu_count_finding(self.name, peer[0], listed, sample.ts)
            if short is not None:
                short = replace(short, evidence=f"{listed} GPUs listed; {peer[1]} hosts of "
                                f"the same model list {peer[0]}")
        if short is not None:
            found.append(short)
        if sample.pcie is not None and self.hello is not None:
            chains = link_chain_findings(self.name, self.hello, sample.pcie)
            self.layout = tuple(f for f in self.layout if f.code != Code.PCIE_LINK_DOWNGRADED)
            self.layout += tuple(chains)
        for f in found:
            if f.code == Code.GPU_LOST:
                self.sticky.setdefault(f.key, f)
        current = []
        for f in found:
            if f.code == Code.GPU_LOST:
                continue
            first = self.since.setdefault(f.key, sample.ts)
            current.append(f if f.ts == first else replace(f, ts=first))
        keys = {f.key for f in current}
        for key in [k for k in self.since if k not in keys]:
            del self.since[key]
        self.current = tuple(current)

    def _judge_fabric(self) -> None:
        """The fabric's findings, each keeping the onset of its first message."""
        was = {f.key: f.ts for f in self.fabric_found}
        found = fabric_findings(self.name, self.fabric, self.hello, self.limits.detectors)
        self.fabric_found = tuple(replace(f, ts=was[f.key]) if was.get(f.key) is not None
                                  else f for f in found)

    def _seen_before(self, event: LogEvent) -> bool:
        """Whether this kernel line already arrived (remembering it if not).

        The journal's cursor names an entry exactly; a dmesg line carries its own
        monotonic stamp, so within one boot its text is its identity.
        """
        key = (event.boot, event.cursor or event.line)
        if key in self.seen_kernel:
            return True
        self.seen_kernel[key] = None
        if len(self.seen_kernel) > SEEN_KERNEL_LINES:
            del self.seen_kernel[next(iter(self.seen_kernel))]
        return False

    def kernel_log_summary(self) -> str:
        """How this host's kernel log is read, for triage's "what was checked"."""
        return kernel_log_summary(self.log_source, bool(self.spec.simulate))

    def scan_logs(self) -> None:
        """Run the log rules over the lines queued since the last scan (with a worker: take
        what it found)."""
        if self.scan_worker is not None:
            hits = self.logs.take()
        elif self.logs.pending:
            hits = self.logs.scan()
        else:
            return
        for f in log_findings(self.name, self.hello, hits):
            kept = self.sticky.get(f.key)
            self.sticky[f.key] = f if kept is None else merged_repeat(kept, f)

    def reachability(self) -> list[Finding]:
        """Down (critical) or stale (warning): the host itself cannot be watched now.

        Stale follows the status ``refresh_status`` last judged (the row does, every redraw).
        """
        flapping = flapping_finding(self.name, self.onsets, self.last_seen or 0.0)
        found = [flapping] if flapping is not None else []
        if self.outage is not None:
            return [down_finding(self.name, self.outage), *found]
        if self.status is HostStatus.STALE and self.data_seen is not None and self.watch is None:
            return [stale_finding(self.name, self.data_seen, self.stale_limit_s()), *found]
        return found

    def findings(self) -> list[Finding]:
        """Current and sticky findings, worst first, one per incident.

        Kept until the next item or status change: every tick asks for every host's (rows,
        alerts), and at a thousand hosts merging them again each time is most of a tick.
        """
        cached = self._found
        if cached is not None and cached[0] == self.changes and cached[1] is self.status:
            return list(cached[2])
        found = self._merged_findings()
        self._found = (self.changes, self.status, found)
        return list(found)

    def _merged_findings(self) -> list[Finding]:
        self.scan_logs()
        merged = {f.key: f for f in self.reachability()}
        merged.update({f.key: f for f in self.layout})
        merged.update({f.key: f for f in log_source_findings(self.name, self.log_source)})
        merged.update({f.key: f for f in clock_findings(self.name, self.clock,
                                                         self.limits.detectors)})
        merged.update({f.key: f for f in refused_job_logs(self.name, self.job_logs.values())})
        merged.update({f.key: f for f in self.detected})
        merged.update({f.key: f for f in self.current})
        merged.update({f.key: f for f in self.fabric_found})
        merged.update(self.sticky)
        merged.update({f.key: f for f in throughput_findings(
            self.name, self.speed, list(merged.values()), self.limits.detectors, self.history)})
        # A host that cannot be watched leads its own list: everything else about it is old.
        return sorted(merged.values(), key=lambda f: (
            -f.severity.rank, f.code not in REACHABILITY_CODES, f.step.value, f.code))

    def judgements(self, found: list[Finding] | None = None) -> tuple[GpuJudgement, ...]:
        """Every GPU's verdicts from the newest sample and ``found`` (default: findings())."""
        return judge_gpus(self.last, self.hello, self.findings() if found is None else found,
                          self.limits.detectors, expected=self.spec.expect_gpus)

    def stale_limit_s(self) -> float:
        """Silence after which a streaming host reads stale."""
        return max(STALE_MIN_S, STALE_AFTER_INTERVALS * self.spec.interval_s)

    def refresh_status(self, now: float) -> None:
        """Mark a streaming host stale when it has been silent too long."""
        if self.status in (HostStatus.STREAMING, HostStatus.STALE) and self.last_seen is not None \
                and self.watch is None:
            limit = self.stale_limit_s()
            silent = now - self.last_seen
            self.status = HostStatus.STALE if silent > limit else HostStatus.STREAMING

    def row(self, now: float) -> FleetRow:
        """This host's fleet-screen row as of ``now`` (wall time)."""
        self.refresh_status(now)
        gpus = self.last.gpus if self.last else ()
        temps = [g.temp_c for g in gpus if g.temp_c is not None]
        used = sum(g.mem_used_mib or 0.0 for g in gpus)
        total = sum(g.mem_total_mib or 0.0 for g in gpus if g.mem_used_mib is not None)
        utils = [g.util_pct for g in gpus if g.util_pct is not None]
        powers = [g.power_w for g in gpus if g.power_w is not None]
        found = self.findings()
        judged = self.judgements(found)
        expected = self.spec.expect_gpus
        if expected is None and self.hello is not None:
            expected = len(self.hello.facts.gpus)
        return FleetRow(
            name=self.name,
            tags=self.spec.tags,
            status=self.shown_status,
            stale_s=(now - self.last_seen) if self.status is HostStatus.STALE and self.last_seen
            else None,
            gpus_ok=gpus_present(judged),
            gpus_expected=expected,
            max_temp_c=max(temps) if temps else None,
            mem_used_pct=100.0 * used / total if total else None,
            mem_high=bool(total) and mem_high(100.0 * used / total, self.limits.detectors),
            mean_util_pct=sum(utils) / len(utils) if utils else None,
            power_w=sum(powers) if powers else None,
            findings=len(found),
            by_severity=count_by_severity(found),
            worst=found[0].severity if found else None,
            # an info finding (a far NIC) is no headline: the column stays for trouble
            worst_summary=found[0].summary if found and found[0].severity is not
            Severity.INFO else None,
            simulated=bool(self.spec.simulate),
            gpus=judged,
            temp_level=max((j.temp for j in judged), key=lambda t: t.rank,
                           default=TempLevel.UNKNOWN),
            reason=self._reason(now),
            last_seen_s=self._last_seen_s(now),
            next_retry_s=self._next_retry_s(now),
            headline=headline(found[0], found) if found and found[0].severity is not
            Severity.INFO else None,
            jobs=jobs_of(self.last),
        )

    def _reason(self, now: float) -> str | None:
        if self.watch is not None:
            return unknown_reason(self.watch)
        if self.outage is not None:
            return self.outage.reason
        if self.status is HostStatus.STALE and self.data_seen is not None:
            return f"no data for {now - self.data_seen:.0f} s (agent or link frozen?)"
        return None

    def _last_seen_s(self, now: float) -> float | None:
        if self.data_seen is None or (self.outage is None and self.watch is None
                                      and self.status is not HostStatus.STALE):
            return None
        return max(0.0, now - self.data_seen)

    def _next_retry_s(self, now: float) -> float | None:
        if self.outage is None or self.outage.retry_at is None \
                or self.status is HostStatus.CONNECTING:
            return None
        return max(0.0, self.outage.retry_at - now)


@dataclass(frozen=True)
class _KeptRow:
    """A host's newest fleet row and what it was built from."""

    changes: int
    status: HostStatus
    row: FleetRow
    built_at: float
    marks: tuple[tuple[object, Severity], ...]


def detector_stretch(hosts: int) -> float:
    """How many of its periods apart each detector runs in a fleet of ``hosts``."""
    return max(1.0, hosts / DETECTOR_HOSTS)


def _finding_marks(host: HostState) -> tuple[tuple[object, Severity], ...]:
    """What of a host's findings its row shows: which there are and how bad."""
    return tuple((f.key, f.severity) for f in host.findings())


def _retimed(host: HostState, row: FleetRow, now: float) -> FleetRow:
    """``row`` with its age-dependent fields as of ``now``; the rest cannot have changed
    while the host's items and status did not."""
    return replace(
        row,
        stale_s=(now - host.last_seen) if row.status is HostStatus.STALE and host.last_seen
        else None,
        reason=host._reason(now),
        last_seen_s=host._last_seen_s(now),
        next_retry_s=host._next_retry_s(now))


class FleetState:
    """All hosts, in inventory order.

    Rows are kept per host and computed again only when the host folded an item or its
    status moved (stale); a down or stale host's ages are re-stamped on the kept row.  At a
    thousand hosts a redraw, a key press or a burst of connects then costs the hosts that
    changed, not the whole fleet.
    """

    def __init__(self, specs: list[HostSpec], limits: DetectorLimits | None = None,
                 preflight: PreflightLimits | None = None,
                 scan_worker: ScanWorker | None = None) -> None:
        self.limits = Limits(limits or DetectorLimits(), preflight or PreflightLimits())
        """The operator's limits (``settings.yaml``), shared by every host."""
        stretch = detector_stretch(len(specs))
        self.peers = PeerCounts()
        """GPUs listed per model, for hosts with no ``expect_gpus``."""
        self.hosts: dict[str, HostState] = {
            s.name: HostState(s, limits=self.limits,
                              detectors=DetectorSchedule(self.limits.detectors, stretch),
                              history=HostHistory(tiers_for(s.interval_s)),
                              scan_worker=scan_worker, peers=self.peers)
            for s in specs}
        self.scan_worker = scan_worker
        if scan_worker is not None:
            for state in self.hosts.values():
                state.logs.reader = reading
        self._version = 0
        self._rows: tuple[tuple[float, int], list[FleetRow]] | None = None
        self._totals: tuple[tuple[float, int], dict[str, int]] | None = None
        self._kept: dict[str, _KeptRow] = {}
        """Each host's newest row and what it was built from."""
        self._list: list[FleetRow] = []
        """The newest rows in inventory order (``rows`` hands out copies)."""
        self._place = {name: i for i, name in enumerate(self.hosts)}
        self._due: set[str] = set(self.hosts)
        """Hosts to look at in the next ``rows``: they folded an item since the last."""
        self._waiting: dict[str, float] = {}
        """Off-screen hosts whose new numbers wait, each until when (``_may_wait``)."""
        self._timed: set[str] = set()
        """Hosts whose rows carry ages (stale, down): re-stamped each time."""
        self._stale_at: dict[str, float] = {}
        """When each streaming host turns stale unless an item comes first."""
        self._visited_at: float | None = None
        self.focus: frozenset[str] | None = None
        """The hosts whose rows are on screen, None for all of them.  A row is rebuilt
        whenever its host's items change, except that an off-screen host whose status and
        findings are unchanged keeps its row (its numbers) up to ``OFF_SCREEN_REFRESH_S``:
        at a thousand hosts, building every row every second was most of the UI's tick,
        for rows nobody could see.  Status, findings, counts and verdicts are never late."""
        self.row_builds = 0
        """Rows computed in full so far (tests and benches count them)."""
        self.watched_job: str | None = None
        """The Slurm job of ``--slurm-job``/``:job``: its log's findings are that job's."""
        self.watched_hosts: frozenset[str] = frozenset()
        """The hosts Slurm gave the watched job (``--slurm-job``): they run it."""
        self.watched_layout: dict[int, tuple[str, int]] = {}
        """Task → (host, GPU) of the watched job where Slurm's layout fixes them."""
        self.jobs: dict[str, JobChange] = {}
        """Each followed job's newest state as Slurm told it (``JobChange``)."""
        self._ranks: tuple[int, float, tuple[str | None, int, frozenset[str]], RankIndex] \
            | None = None
        """The newest rank index: (version, monotonic time, (watched job, epoch), index)."""
        self._rank_epoch = 0
        """Counts hellos and first samples: a host whose GPUs or processes were unknown
        when the index was built makes it stale at once, not two seconds later."""
        self.unseen: dict[str, SourceHealth] = {}
        """Hosts the watcher itself cannot see now, and why (``source_findings``)."""
        self.topology: IbTopology | None = None
        """The fabric as ``ibnetdiscover`` showed it (``--ibnetdiscover``): each HCA's switch."""
        self._map: tuple[int, IbTopology | None, FabricMap] | None = None

    @property
    def version(self) -> int:
        """Items folded so far: the view is unchanged while it and the clock are."""
        return self._version

    def apply(self, host: str, item: SessionItem, now: float) -> None:
        """Fold one item from ``host``'s session; items from unknown hosts are ignored."""
        if isinstance(item, JobChange):  # the job's, passed under its batch host
            self.jobs[item.job] = item
            self._version += 1
            return
        state = self.hosts.get(host)
        if state is not None:
            if isinstance(item, Hello) or (isinstance(item, HostSample) and state.last is None):
                self._rank_epoch += 1  # a host's GPUs or processes are known anew
            if isinstance(item, Hello):
                self.peers.add(host, item)
            state.apply(item, now)
            if isinstance(item, SourceHealth):
                if state.watch is None:
                    self.unseen.pop(host, None)
                else:
                    self.unseen[host] = state.watch
            self._version += 1
            self._due.add(host)

    def take_scans(self) -> bool:
        """Fold what the log worker found since the last call (on the UI loop, before a
        redraw); True when some host's findings moved."""
        if self.scan_worker is None:
            return False
        moved = False
        for name, state in self.hosts.items():
            logs = state.logs
            if logs.done or logs.readings:
                state.changes += 1  # its cached findings and row are old now
                while logs.readings:
                    source, ts, got, line = logs.readings.popleft()
                    state.speed.add_reading(source, ts, got, line)
                state.scan_logs()
                self._version += 1
                self._due.add(name)
                moved = True
        return moved

    def row(self, host: HostState, now: float) -> FleetRow:
        """``host``'s row as of ``now``: the kept one (re-stamped) unless it changed."""
        host.refresh_status(now)
        name = host.name
        kept = self._kept.get(name)
        if kept is not None and kept.status is host.shown_status and (
                kept.changes == host.changes or self._may_wait(host, kept, now)):
            row = kept.row
            if kept.changes == host.changes:
                self._waiting.pop(name, None)
            else:
                self._waiting[name] = kept.built_at + self._wait_s(host)
            if not timeless(row):
                row = _retimed(host, row, now)
        else:
            row = host.row(now)
            self.row_builds += 1
            self._kept[name] = _KeptRow(host.changes, host.shown_status, row, now,
                                        _finding_marks(host))
            self._waiting.pop(name, None)
        if timeless(row):
            self._timed.discard(name)
        else:
            self._timed.add(name)
        if host.shown_status is HostStatus.STREAMING and host.last_seen is not None:
            self._stale_at[name] = host.last_seen + host.stale_limit_s()
        else:
            self._stale_at.pop(name, None)
        return row

    @staticmethod
    def _wait_s(host: HostState) -> float:
        return max(OFF_SCREEN_REFRESH_S, OFF_SCREEN_INTERVALS * host.spec.interval_s)

    def _may_wait(self, host: HostState, kept: _KeptRow, now: float) -> bool:
        """Off screen, built less than ``OFF_SCREEN_REFRESH_S`` (or two of the host's
        intervals) ago, same findings."""
        return (self.focus is not None and host.name not in self.focus
                and 0.0 <= now - kept.built_at < self._wait_s(host)
                and kept.marks == _finding_marks(host))

    def rows(self, now: float) -> list[FleetRow]:
        """One row per host, in inventory order.

        Only the hosts that may have moved are looked at: those that folded an item, whose
        row carries an age, that turn stale by now, or whose waiting numbers are due or came
        on screen.  At 10,000 hosts read every 15 s that is a few hundred a second, where a
        loop over every host was a tenth of a core.  A redraw asks for rows and for totals
        at the same ``now``: they are computed once.
        """
        key = (now, self._version)
        if self._rows is None or self._rows[0] != key:
            self._rows = (key, self._refreshed(now))
        return self._rows[1]

    def _refreshed(self, now: float) -> list[FleetRow]:
        if not self._list or self._visited_at is None or now < self._visited_at:
            # first call, or the clock went back (a replay's seek): look at every host
            self._list = [self.row(h, now) for h in self.hosts.values()]
        else:
            focus = self.focus
            due = self._due | self._timed
            due.update(n for n, t in self._stale_at.items() if t < now)
            due.update(n for n, t in self._waiting.items()
                       if t <= now or focus is None or n in focus)
            hosts, place, out = self.hosts, self._place, self._list
            for name in due:
                out[place[name]] = self.row(hosts[name], now)
        self._due = set()
        self._visited_at = now
        return list(self._list)

    def rank_index(self) -> RankIndex:
        """Where every rank the fleet can place runs.

        Rebuilt at most every ``RANK_INDEX_EVERY_S`` while items arrive: ranks move only when
        processes start or stop, and at a thousand hosts a rebuild is tens of milliseconds,
        which alerts and triage would otherwise pay every tick of an incident.
        """
        now = time.monotonic()
        kept = self._ranks
        key = (self.watched_job, self._rank_epoch, self.watched_hosts)
        if kept is not None and kept[2] == key and (
                kept[0] == self._version or now - kept[1] < RANK_INDEX_EVERY_S):
            return kept[3]
        index = RankIndex((HostRanks(s.name, s.last, s.hello, s.logs.rank_places())
                           for s in self.hosts.values()), self.watched_job,
                          self.watched_hosts, self.watched_layout)
        self._ranks = (self._version, now, key, index)
        return index

    def all_findings(self, names: Iterable[str] | None = None) -> list[Finding]:
        """Every finding of the hosts (default: all), each job-log finding told its job and
        where its rank runs (ranks of one job are placed across all hosts)."""
        states = self.hosts.values() if names is None else [
            self.hosts[n] for n in names if n in self.hosts]
        found = [f for s in states for f in s.findings()]
        if any(f.code in SWITCH_CODES or f.code in RACK_CODES for f in found):
            found = grouped(found, self.fabric_map(), self.limits.detectors)
        found += source_findings(self.unseen, names if names is None else
                                 [s.name for s in states])
        return placed(found, self.rank_index()) if any(
            f.source and f.source.startswith(JOB_SOURCE_PREFIX) for f in found) else found

    def fabric_map(self) -> FabricMap:
        """Each host's leaf switch (per HCA) and rack, from the inventory's tags, the
        discovered topology and the hellos' HCA GUIDs; built again when a hello arrives."""
        kept = self._map
        if kept is not None and kept[0] == self._rank_epoch and kept[1] is self.topology:
            return kept[2]
        built = fabric_map((s.spec for s in self.hosts.values()), self.topology,
                           {n: s.hello for n, s in self.hosts.items()})
        self._map = (self._rank_epoch, self.topology, built)
        return built

    def diagnosis(self, names: Iterable[str] | None = None,
                  clocks: Clocks | None = None) -> Diagnosis:
        """Every incident's first failure over the hosts (default: all), the lead first:
        the one answer triage, the job view, reports and snapshots all read."""
        return diagnose(self.all_findings(names), self.rank_index(), clocks=clocks)

    def totals(self, now: float) -> dict[str, int]:
        """Counts for the header: hosts by status, GPUs, findings by severity."""
        key = (now, self._version)
        if self._totals is not None and self._totals[0] == key:
            return dict(self._totals[1])
        out = count_rows(self.rows(now))
        self._totals = (key, out)
        return dict(out)
