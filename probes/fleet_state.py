"""The console's picture of the fleet: per-host state folded from session items.

Pure and synchronous: the app applies items here from its message handlers and
hands the resulting immutable rows to widgets.  Nothing here blocks or does I/O.
``HostState`` stores what each item shows and merges it; what an item shows is judged in
``probes.analysis`` (``item_findings`` for hellos and samples).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from probes.analysis.allocation import HoldTracker
from probes.analysis.detectors import DetectorSchedule, detector_stretch
from probes.analysis.fabric import FabricTracker, fabric_findings_changed
from probes.analysis.fabric_groups import RACK_CODES, SWITCH_CODES, grouped
from probes.analysis.fabric_map import FabricMap, fabric_map
from probes.analysis.findings import Finding, Severity, log_findings
from probes.analysis.first_failure import Diagnosis, diagnose
from probes.analysis.fleet_changes import ChangeLog, numbers_mark, numbers_only
from probes.analysis.fleet_counts import count_rows
from probes.analysis.fleet_row import FleetRow, HostStatus
from probes.analysis.gpu_peers import PeerCounts
from probes.analysis.host_clock import clock_findings
from probes.analysis.host_findings import HostFindings
from probes.analysis.host_logs import HostLogs
from probes.analysis.item_findings import hello_layout_findings, sample_chains
from probes.analysis.job_ranks import HostRanks, RankIndex, placed
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.analysis.judge import GpuJudgement, TempLevel, gpus_present, judge_gpus, mem_high
from probes.analysis.limits import DetectorLimits, Limits, PreflightLimits
from probes.analysis.onsets import Clocks
from probes.analysis.reach_tracker import ReachTracker
from probes.analysis.row_judge import RowJudge, row_numbers
from probes.analysis.sample_judge import SampleJudge
from probes.analysis.throughput import throughput_findings
from probes.analysis.watcher import source_findings
from probes.analysis.xid_events import xid_event_finding
from probes.config.fleet import HostSpec
from probes.history import HostHistory, tiers_for
from probes.rules.logrules.scan_worker import ScanWorker
from probes.rules.parsers.ibnetdiscover import IbTopology
from probes.wire.events import (
    ClockOffset,
    JobChange,
    SessionItem,
    SourceHealth,
    XidEvent,
)
from probes.wire.samples import (
    JOB_SOURCE_PREFIX,
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    ProbeError,
)

RANK_INDEX_EVERY_S = 2.0
"""How old the rank index may get while items arrive (see ``FleetState.rank_index``)."""


@dataclass
class HostState:
    """Everything the console knows about one host; owned by the app's thread."""

    spec: HostSpec
    hello: Hello | None = None
    last: HostSample | None = None
    reach: ReachTracker = field(default_factory=ReachTracker)
    """Whether and since when the host can be watched (status, outage, last seen)."""
    history: HostHistory = field(default_factory=HostHistory)
    """Every series of the host in tiers (1 s for 2 h, 15 s for 12 h, 5 min for 30 days)."""
    findings_kept: HostFindings = field(default_factory=HostFindings)
    """Its findings by kind (sample, sticky, layout, detectors, fabric) and their merge."""
    limits: Limits = field(default_factory=Limits)
    """The operator's limits, for the findings and every judgement shown about this host."""
    detectors: DetectorSchedule = field(default_factory=DetectorSchedule)
    """Runs each detector when due (every 1–5 agent minutes), not every tick."""
    errors: deque[ProbeError] | tuple[()] = ()
    peers: PeerCounts | None = None
    """The fleet's GPU counts by model: what this host should list where the inventory
    names no ``expect_gpus`` (shared by every host of a ``FleetState``)."""
    logs: HostLogs = field(default_factory=HostLogs)
    """Its log lines on their way to the rules, how they are read, the speed they show."""
    holds: HoldTracker = field(default_factory=HoldTracker)
    """Since when each GPU has been held by its current job (allocation against use): fed
    by samples, read by the allocation findings (not a log's)."""
    clock: ClockOffset | None = None
    """The session's newest estimate of the host's clock against the console's (the times
    folded here are already corrected by its ``applied_s``)."""
    fabric: FabricTracker = field(default_factory=FabricTracker)
    """The host's IB/RoCE ports and NVLinks, from its newest ``fabric`` messages."""
    changes: int = 0
    """Items folded so far."""
    revision: int = 0
    """Writes so far (items folded, log scans taken): what a cached row or finding list was
    computed at."""
    quiet: int = 0
    """Samples folded that changed none of its kept findings (``HostFindings.content``):
    ``revision - quiet`` moves only with a write the merged findings may read."""
    row_judge: RowJudge = field(default_factory=RowJudge, repr=False, compare=False)
    """Its row's GPU verdicts and numbers, kept while what they read holds (``row``)."""
    sample_judge: SampleJudge = field(default_factory=SampleJudge, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.reach.interval_s = self.spec.interval_s

    @property
    def name(self) -> str:
        """The host's name in the fleet."""
        return self.spec.name

    @property
    def status(self) -> HostStatus:
        """The status last judged (``status_at`` for a given moment); the host's other
        reachability (outage, last seen, why down) is read at ``reach``, its findings at
        ``findings_kept``, its logs at ``logs``."""
        return self.reach.status

    def apply(self, item: SessionItem, now: float) -> None:
        """Fold one session item, received at console wall time ``now``."""
        self.changes += 1
        self.revision += 1
        self.reach.note(item, now)
        if isinstance(item, HostSample):
            content = self.findings_kept.content
            self._apply_sample(item)
            if self.findings_kept.content == content:
                self.quiet += 1
        elif isinstance(item, Hello):
            self.hello = item
            self.logs.set_zone(item)
            self.findings_kept.set_layout(hello_layout_findings(self.name, item))
        elif isinstance(item, LogEvent):
            if self.logs.add(item):
                self.scan_logs()
        elif isinstance(item, FabricSample):
            self.fabric.add(item)
            self.findings_kept.set_fabric(fabric_findings_changed(
                self.name, self.fabric, self.hello, self.limits.detectors))
        elif isinstance(item, LogSourceState):
            self.logs.note_source(item)
        elif isinstance(item, ProbeError):
            self.errors = self.errors if isinstance(self.errors, deque) else deque(maxlen=100)
            self.errors.append(item)
        elif isinstance(item, ClockOffset):
            self.clock = item
            self.logs.set_offset(item)
        elif isinstance(item, XidEvent):  # a number from DCGM: the Xid rules, no line
            self.findings_kept.keep([xid_event_finding(self.name, item)])

    def apply_sample(self, sample: HostSample, now: float) -> bool:
        """``apply`` of a sample (the fold's one item a tick of every host: its own path,
        issue 38); True when it moved only numbers (``fleet_changes.numbers_only``)."""
        kept, reach = self.findings_kept, self.reach
        content = kept.content
        # ``numbers_mark(self)`` written out: a call and a frame less (issue 38)
        mark = (content - kept.reworded, reach.status, reach.outage, reach.watch, self.last)
        self.changes += 1
        self.revision += 1
        reach.note_sample(now)
        self._apply_sample(sample)
        if kept.content == content:
            self.quiet += 1
        return numbers_only(self, mark)

    def _apply_sample(self, sample: HostSample) -> None:
        """A sample folded.  A quiet tick's answers are taken without the calls that would
        give them (issue 38): no detector due (``DetectorSchedule.run``'s first test), the
        allocations' static facts those of the last tick (``HoldTracker.update``'s), the
        judges' findings the last ones (``HostFindings.take_sample(None)``: a count)."""
        self.last = sample
        name, hello, history = self.spec.name, self.hello, self.history
        kept = self.findings_kept
        history.add(sample)
        detectors, ts = self.detectors, sample.ts
        if not detectors._idle_from <= ts <= detectors._idle_to:
            detected = detectors.run(name, history, hello, sample)
            if detected is not None:
                kept.set_detected(detected)
        holds = self.holds
        epoch = sample.static_epoch
        if epoch is None or epoch is not holds.epoch:
            holds.update(sample)
        found = self.sample_judge.judged(name, hello, sample, history, holds,
                                         self.limits.detectors, self.spec.expect_gpus, self.peers)
        if sample.pcie is not None:  # else ``sample_chains`` reads none (most ticks)
            chains = sample_chains(name, hello, sample)
            if chains is not None:
                kept.set_chains(chains)
        if found is None:
            kept.revision += 1  # ``take_sample(None)``
        else:
            kept.take_sample(found, ts)

    def kernel_log_summary(self) -> str:
        """How this host's kernel log is read, for triage's "what was checked"."""
        return self.logs.summary(bool(self.spec.simulate))

    # The write side beyond ``apply``: the owner calls these (``FleetState.tick`` before a
    # redraw or an alert check); every query below reads what they left and changes nothing.

    def scan_logs(self) -> bool:
        """Run the log rules over the lines queued since the last scan (with a worker: take
        what it found); True when there was something to scan or take."""
        hits = self.logs.scan()
        if hits is None:
            return False
        self.revision += 1  # its cached findings and row are old now
        self.findings_kept.keep(log_findings(self.name, self.hello, hits))
        return True

    def refresh_status(self, now: float) -> bool:
        """Judge staleness as of ``now`` (a streaming host silent too long reads stale);
        True when the status moved."""
        return self.reach.refresh(now)

    def tick(self, now: float) -> bool:
        """Bring the host up to ``now``: its queued log lines scanned, its staleness judged.
        True when its findings or status may have moved."""
        scanned = self.scan_logs()
        return self.reach.refresh(now) or scanned  # ``refresh_status``, a call less

    def status_at(self, now: float) -> HostStatus:
        """The status as of ``now`` (``ReachTracker.status_at``; nothing is stored)."""
        return self.reach.status_at(now)

    def reachability(self, status: HostStatus | None = None) -> list[Finding]:
        """Down (critical) or stale (warning): the host itself cannot be watched now.

        Stale follows ``status`` (default: the one ``refresh_status`` last judged).
        """
        return self.reach.findings(self.name, self.status if status is None else status)

    def findings(self, status: HostStatus | None = None) -> list[Finding]:
        """Current and sticky findings, worst first, one per incident, with the host's
        reachability as of ``status`` (default: the status last judged).  A pure read: lines
        queued since the last ``scan_logs`` count once it ran.

        Remembered until something they read changes (a memo, not state: every tick asks
        for every host's, and at a thousand hosts merging them again is most of a tick):
        ``findings_key``.
        """
        status = self.status if status is None else status
        return self._merged_findings(status, self.findings_key(status))

    def findings_key(self, status: HostStatus) -> tuple[object, ...]:
        """What the merged findings as of ``status`` read beyond the kept lists
        (``HostFindings.content``): every write but a quiet sample's (``quiet``), the
        reachability's state, and, while a job log's throughput is down (its cause is looked
        for in the history, which every sample moves), the host's revision."""
        reach = self.reach
        return (self.revision - self.quiet, status, reach.outage, reach.watch,
                reach.data_seen if status is HostStatus.STALE else None,
                reach.last_seen if reach.onsets else None,
                self.revision if self.logs.speed.drops(self.limits.detectors) else None)

    def _merged_findings(self, status: HostStatus, key: object = None, *,
                         copy: bool = True) -> list[Finding]:
        """The merge itself (``key`` None: afresh, not remembered; ``copy``:
        ``HostFindings.merged``'s)."""
        return self.findings_kept.merged(
            key, lambda: self.reachability(status), self._watched,
            lambda others: throughput_findings(self.name, self.logs.speed, others,
                                               self.limits.detectors, self.history),
            copy=copy)

    def findings_as_kept(self, status: HostStatus) -> list[Finding]:
        """``findings(status)`` as kept (not a copy: the caller only reads it), so a reader
        that keeps what it worked out from them can tell them by identity."""
        return self._merged_findings(status, self.findings_key(status), copy=False)

    def _watched(self) -> list[Finding]:
        """What is wrong with how the host is watched: its logs' sources, its clock."""
        return (self.logs.findings(self.name)
                + clock_findings(self.name, self.clock, self.limits.detectors))

    def judgements(self, found: list[Finding] | None = None) -> tuple[GpuJudgement, ...]:
        """Every GPU's verdicts from the newest sample and ``found`` (default: findings())."""
        return judge_gpus(self.last, self.hello, self.findings() if found is None else found,
                          self.limits.detectors, expected=self.spec.expect_gpus)

    def stale_limit_s(self) -> float:
        """Silence after which a streaming host reads stale."""
        return self.reach.stale_limit_s()

    def shown_status_at(self, now: float) -> HostStatus:
        """What the screens show as of ``now``: unknown while the watcher cannot see it."""
        return self.reach.shown(self.reach.status_at(now))

    def row(self, now: float) -> FleetRow:
        """This host's fleet-screen row as of ``now`` (wall time); a pure read.

        Its numbers and GPU verdicts are read from the tick as the fold reads it, never
        building a v2 tick's GPUs, each verdict kept while what it reads holds
        (``row_judge``; issue 38)."""
        status = self.status_at(now)
        last = self.last
        max_temp, used, total, util, power = row_numbers(last)
        found = self.findings_as_kept(status)
        expected = self.spec.expect_gpus
        judged = self.row_judge.judged(last, self.hello, found, self.limits.detectors,
                                       expected)
        by_severity, headline = self.row_judge.counted(found)
        if expected is None and self.hello is not None:
            expected = len(self.hello.facts.gpus)
        return FleetRow(
            name=self.name,
            tags=self.spec.tags,
            status=self.shown_status_at(now),
            stale_s=(now - self.reach.last_seen) if status is HostStatus.STALE
            and self.reach.last_seen else None,
            gpus_ok=gpus_present(judged),
            gpus_expected=expected,
            max_temp_c=max_temp,
            mem_used_pct=100.0 * used / total if total else None,
            mem_high=bool(total) and mem_high(100.0 * used / total, self.limits.detectors),
            mean_util_pct=util,
            power_w=power,
            findings=len(found),
            by_severity=by_severity,
            worst=found[0].severity if found else None,
            # an info finding (a far NIC) is no headline: the column stays for trouble
            worst_summary=found[0].summary if found and found[0].severity is not
            Severity.INFO else None,
            simulated=bool(self.spec.simulate),
            gpus=judged,
            temp_level=self.row_judge.hottest if last is not None else TempLevel.UNKNOWN,
            reason=self.reach.reason_at(now, status),
            last_seen_s=self.reach.last_seen_at(now, status),
            next_retry_s=self.reach.next_retry_at(now),
            headline=headline,
            jobs=self.row_judge.jobs(last),
        )

    def row_renewed(self, row: FleetRow, now: float, found: list[Finding]) -> FleetRow:
        """``self.row(now)``, given ``row``: a row that method built from these same
        findings (``found``: ``findings_as_kept(status_at(now))``, the very list), this
        hello and the status shown now.  Only what the sample and the clock move is read
        again (its numbers, GPU verdicts, jobs, ages); the name, status, counts and
        findings' fields are ``row``'s.  On the wall every host's sample moves only numbers
        each second, and the full build (its findings looked up, counted and headed again,
        24 fields set one by one) was most of the redraw at a thousand hosts (issue 38).
        A copy of ``row``'s fields, as ``fleet_rows._retimed`` makes (no
        ``__post_init__``)."""
        status = self.status_at(now)
        last = self.last
        max_temp, used, total, util, power = row_numbers(last)
        judge = self.row_judge
        judged = judge.judged(last, self.hello, found, self.limits.detectors,
                              self.spec.expect_gpus)
        reach = self.reach
        values = row.__dict__.copy()
        values["stale_s"] = (now - reach.last_seen) if status is HostStatus.STALE \
            and reach.last_seen else None
        values["gpus_ok"] = gpus_present(judged)
        values["max_temp_c"] = max_temp
        values["mem_used_pct"] = 100.0 * used / total if total else None
        values["mem_high"] = bool(total) and mem_high(100.0 * used / total,
                                                      self.limits.detectors)
        values["mean_util_pct"] = util
        values["power_w"] = power
        values["gpus"] = judged
        values["temp_level"] = judge.hottest if last is not None else TempLevel.UNKNOWN
        values["reason"] = reach.reason_at(now, status)
        values["last_seen_s"] = reach.last_seen_at(now, status)
        values["next_retry_s"] = reach.next_retry_at(now)
        values["jobs"] = judge.jobs(last)
        out: FleetRow = object.__new__(FleetRow)
        object.__setattr__(out, "__dict__", values)
        return out


class FleetState:
    """All hosts, in inventory order: the fold.

    Writes are ``apply`` (one item), ``take_scans`` (the log worker's finds) and ``tick``
    (queued log lines scanned, staleness judged as of now), called by the owner; every
    other method reads and changes nothing.  Which hosts changed is kept in order
    (``changed_since``), so a view (the console's row cache, ``tui.views.fleet_rows``)
    looks at those and not at the whole fleet.
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
                              logs=HostLogs(scan_worker), peers=self.peers)
            for s in specs}
        self.scan_worker = scan_worker
        self._log = ChangeLog()
        """Which hosts changed, and which beyond their numbers (``changed_since``)."""
        self._unticked: set[str] = set()
        """Hosts that folded an item since the last ``tick``."""
        self._stale_at: dict[str, float] = {}
        """When each streaming host turns stale unless an item comes first (``tick``)."""
        self.jobs: dict[str, JobChange] = {}
        """Each followed job's newest state as Slurm told it (``JobChange``)."""
        self._ranks: tuple[int, float, tuple[object, int], RankIndex] | None = None
        """The newest rank index: (version, monotonic time, (job watch, epoch), index)."""
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
        return self._log.version

    def apply(self, host: str, item: SessionItem, now: float) -> None:
        """Fold one item from ``host``'s session; items from unknown hosts are ignored."""
        state = self.hosts.get(host)
        if type(item) is HostSample:  # nearly every item: a tick (issue 38, its own path)
            if state is not None:
                if state.last is None:
                    self._rank_epoch += 1  # its GPUs and processes are known anew
                self._log.changed(host, judged=not state.apply_sample(item, now))
                self._unticked.add(host)
            return
        if isinstance(item, JobChange):  # the job's, passed under its batch host
            self.jobs[item.job] = item
            self._log.bump()
            return
        if state is not None:
            if isinstance(item, Hello) or (isinstance(item, HostSample) and state.last is None):
                self._rank_epoch += 1  # a host's GPUs or processes are known anew
            if isinstance(item, Hello):
                self.peers.add(host, item)
            mark = numbers_mark(state) if isinstance(item, HostSample) else None
            state.apply(item, now)
            if isinstance(item, SourceHealth):
                if state.reach.watch is None:
                    self.unseen.pop(host, None)
                else:
                    self.unseen[host] = state.reach.watch
            self._log.changed(host, judged=mark is None or not numbers_only(state, mark))
            self._unticked.add(host)

    def changed_since(self, version: int) -> list[str]:
        """The hosts that changed after ``version`` (a read of ``version``), newest first."""
        return self._log.changed_since(version)

    def judged_since(self, version: int) -> list[str]:
        """The hosts whose status, findings or GPUs answering may have changed after
        ``version``: ``changed_since`` less the samples that moved only numbers."""
        return self._log.judged_since(version)

    def scan_logs(self) -> bool:
        """Run the log rules over every host's queued lines (a write: a one-shot read calls
        it once its items are folded; ``tick`` does it too).  True when some host scanned."""
        moved = False
        for name in self._unticked:
            if self.hosts[name].scan_logs():
                self._log.changed(name)
                moved = True
        return moved

    def tick(self, now: float) -> bool:
        """Bring the fold up to ``now`` before it is read (a redraw, an alert check, a
        snapshot): the worker's finds taken, queued log lines scanned, staleness judged.
        True when some host's findings or status moved."""
        moved = self.take_scans()
        due = self._unticked
        due.update(n for n, t in self._stale_at.items() if t < now)
        self._unticked = set()
        hosts, stale_at, streaming = self.hosts, self._stale_at, HostStatus.STREAMING
        for name in due:
            state = hosts[name]
            if state.tick(now):
                self._log.changed(name)
                moved = True
            # ``shown_status_at(now)`` read off the status ``tick`` just judged as of
            # ``now`` (``status_at`` gives it back unchanged): at a thousand busy hosts
            # every host is due each redraw, and judging it twice was a third of the loop
            reach = state.reach
            seen = reach.last_seen
            if reach.status is streaming and reach.watch is None and seen is not None:
                stale_at[name] = seen + reach.stale_limit_s()
            else:
                stale_at.pop(name, None)
        return moved

    def take_scans(self) -> bool:
        """Fold what the log worker found since the last call (on the UI loop, before a
        redraw); True when some host's findings moved."""
        if self.scan_worker is None:
            return False
        moved = False
        for name, state in self.hosts.items():
            if state.logs.take_readings():
                state.revision += 1  # its cached findings and row are old now
                state.scan_logs()
                self._log.changed(name)
                moved = True
        return moved

    def rows(self, now: float) -> list[FleetRow]:
        """One row per host as of ``now``, in inventory order, each built afresh (a pure
        read; the console keeps and re-uses rows in ``tui.views.fleet_rows``)."""
        return [s.row(now) for s in self.hosts.values()]

    def rank_index(self, watch: JobWatch = NO_JOB) -> RankIndex:
        """Where every rank the fleet can place runs (``watch``: the job the operator
        watches, held by the view layer; its log's ranks are that job's).

        Rebuilt at most every ``RANK_INDEX_EVERY_S`` while items arrive: ranks move only when
        processes start or stop, and at a thousand hosts a rebuild is tens of milliseconds,
        which alerts and triage would otherwise pay every tick of an incident.
        """
        now = time.monotonic()
        kept = self._ranks
        key = (watch.key(), self._rank_epoch)
        if kept is not None and kept[2] == key and (
                kept[0] == self._log.version or now - kept[1] < RANK_INDEX_EVERY_S):
            return kept[3]
        index = RankIndex((HostRanks(s.name, s.last, s.hello, s.logs.rank_places())
                           for s in self.hosts.values()), watch)
        self._ranks = (self._log.version, now, key, index)
        return index

    def all_findings(self, names: Iterable[str] | None = None,
                     watch: JobWatch = NO_JOB) -> list[Finding]:
        """Every finding of the hosts (default: all), each job-log finding told its job and
        where its rank runs (ranks of one job are placed across all hosts; ``watch``: the
        job watched)."""
        states = self.hosts.values() if names is None else [
            self.hosts[n] for n in names if n in self.hosts]
        # each host's list as kept (``findings_as_kept``): read into a new list here, so
        # the copy ``findings()`` makes was a list a host a tick for nothing (issue 38)
        found = [f for s in states for f in s.findings_as_kept(s.status)]
        if any(f.code in SWITCH_CODES or f.code in RACK_CODES for f in found):
            found = grouped(found, self.fabric_map(), self.limits.detectors)
        found += source_findings(self.unseen, names if names is None else
                                 [s.name for s in states])
        return placed(found, self.rank_index(watch)) if any(
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

    def diagnosis(self, names: Iterable[str] | None = None, clocks: Clocks | None = None,
                  watch: JobWatch = NO_JOB) -> Diagnosis:
        """Every incident's first failure over the hosts (default: all), the lead first:
        the one answer triage, the job view, reports and snapshots all read (``watch``:
        the job watched)."""
        return diagnose(self.all_findings(names, watch), self.rank_index(watch),
                        clocks=clocks)

    def totals(self, now: float) -> dict[str, int]:
        """Counts for the header: hosts by status, GPUs, findings by severity."""
        return count_rows(self.rows(now))
