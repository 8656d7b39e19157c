"""The fleet rows as they were before issue 38's cheap rows (main ``baf2c43``): the reference
``tests/analysis/test_fleet_rows_equivalent.py`` holds the new ones to, field by field.

``HostState.row`` (as ``row_before``), its findings merge (afresh, never remembered),
``judge_gpus`` (each GPU judged by ``judge_gpu_afresh``, the memo left out: a pure cache),
``jobs_of`` and ``tui.views.fleet_rows.FleetRows`` with its helpers, copied unchanged but for
these imports and the names; not imported by the console."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from probes.analysis.findings import Finding, Severity
from probes.analysis.fleet_counts import count_by_severity, count_rows, timeless
from probes.analysis.fleet_row import FleetRow, HostStatus
from probes.analysis.headline import worst_headline
from probes.analysis.judge import (
    LEAK_CODES,
    LOST_CODES,
    SPIN_CODES,
    GpuJudgement,
    GpuVerdict,
    TempLevel,
    field_notes_of,
    gpus_present,
    judge_gpu_afresh,
    mem_high,
    peer_link,
)
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.reachability import REACHABILITY_CODES
from probes.analysis.throughput import throughput_findings
from probes.fleet_state import FleetState, HostState
from probes.wire.samples import Hello, HostSample

# ---- probes/analysis/host_findings.py: HostFindings.merged, afresh -----------------------


def findings_before(host: HostState, status: HostStatus | None = None) -> list[Finding]:
    """``HostState.findings(status)``, merged afresh."""
    status = host.status if status is None else status
    kept = host.findings_kept
    merged = {f.key: f for f in host.reach.findings(host.name, status)}
    merged.update({f.key: f for f in kept.layout})
    merged.update({f.key: f for f in host._watched()})
    merged.update({f.key: f for f in kept.detected})
    merged.update({f.key: f for f in kept.current})
    merged.update({f.key: f for f in kept.fabric})
    merged.update(kept.sticky)
    merged.update({f.key: f for f in throughput_findings(
        host.name, host.logs.speed, list(merged.values()), host.limits.detectors,
        host.history)})
    return sorted(merged.values(), key=lambda f: (
        -f.severity.rank, f.code not in REACHABILITY_CODES, f.step.value, f.code))


# ---- probes/analysis/judge.py: judge_gpus -------------------------------------------------


def judge_gpus_before(sample: HostSample | None, hello: Hello | None,
                      findings: Iterable[Finding], limits: DetectorLimits = DEFAULT_LIMITS,
                      expected: int | None = None) -> tuple[GpuJudgement, ...]:
    codes: dict[int | None, set[str]] = {}
    leaks: dict[int | None, Severity] = {}
    gone_at: dict[int, float] = {}
    for f in findings:
        codes.setdefault(f.gpu, set()).add(f.code)
        if f.code in SPIN_CODES:  # a host's finding about each of the GPUs it names
            for i in f.details.gpus:
                codes.setdefault(i, set()).add(f.code)
        if f.code in LEAK_CODES:
            leaks[f.gpu] = f.severity
        if f.code in LOST_CODES and f.gpu is not None and f.gpu >= 0:
            ts = f.ts if f.ts is not None else float("inf")
            gone_at[f.gpu] = min(gone_at.get(f.gpu, ts), ts)
    slowdown = {g.index: g.temp_slowdown_c for g in hello.facts.gpus} if hello else {}
    notes = field_notes_of(hello)
    sampled = [g for g in (sample.gpus if sample else ()) if g.index >= 0]
    peers = peer_link(sampled)
    out = [judge_gpu_afresh(g, slowdown.get(g.index), frozenset(codes.get(g.index, ())),
                      leaks.get(g.index), limits, notes, peers)
           for g in sampled]
    out = [replace(j, since=_finite(gone_at.get(j.index))) if j.gone else j for j in out]
    seen = {j.index for j in out}
    if sample is not None:
        reported = (set(slowdown) | set(gone_at)) - seen
        out += [GpuJudgement(i, GpuVerdict.LOST, False, (), TempLevel.UNKNOWN,
                             TempLevel.UNKNOWN, None, None, since=_finite(gone_at.get(i)),
                             answering=False, not_collected=notes)
                for i in sorted(reported)]
        seen |= reported
    if expected is not None and sample is not None:
        free = (i for i in range(expected + len(seen)) if i not in seen)
        out += [GpuJudgement(next(free), GpuVerdict.MISSING, False, (), TempLevel.UNKNOWN,
                             TempLevel.UNKNOWN, None, None, answering=False,
                             not_collected=notes)
                for _ in range(max(0, expected - len(seen)))]
    return tuple(sorted(out, key=lambda j: j.index))


def _finite(ts: float | None) -> float | None:
    return ts if ts is not None and ts != float("inf") else None


# ---- probes/analysis/fleet_row.py: jobs_of ------------------------------------------------


def jobs_of_before(sample: HostSample | None) -> tuple[str, ...]:
    if sample is None:
        return ()
    found = {p.slurm_job for g in sample.gpus for p in g.processes or () if p.slurm_job}
    return tuple(sorted(found, key=lambda j: (len(j), j)))


# ---- probes/fleet_state.py: HostState.row -------------------------------------------------


def row_before(self: HostState, now: float) -> FleetRow:
    """This host's fleet-screen row as of ``now`` (wall time); a pure read."""
    status = self.status_at(now)
    gpus = self.last.gpus if self.last else ()
    temps = [g.temp_c for g in gpus if g.temp_c is not None]
    used = sum(g.mem_used_mib or 0.0 for g in gpus)
    total = sum(g.mem_total_mib or 0.0 for g in gpus if g.mem_used_mib is not None)
    utils = [g.util_pct for g in gpus if g.util_pct is not None]
    powers = [g.power_w for g in gpus if g.power_w is not None]
    found = findings_before(self, status)
    judged = judge_gpus_before(self.last, self.hello, found, self.limits.detectors,
                               expected=self.spec.expect_gpus)
    expected = self.spec.expect_gpus
    if expected is None and self.hello is not None:
        expected = len(self.hello.facts.gpus)
    return FleetRow(
        name=self.name,
        tags=self.spec.tags,
        status=self.shown_status_at(now),
        stale_s=(now - self.reach.last_seen) if status is HostStatus.STALE and self.reach.last_seen
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
        reason=self.reach.reason_at(now, status),
        last_seen_s=self.reach.last_seen_at(now, status),
        next_retry_s=self.reach.next_retry_at(now),
        headline=worst_headline(found),
        jobs=jobs_of_before(self.last),
    )


# ---- tui/views/fleet_rows.py --------------------------------------------------------------

OFF_SCREEN_REFRESH_S = 5.0
OFF_SCREEN_INTERVALS = 2.0


@dataclass(frozen=True)
class _KeptRow:
    revision: int
    status: HostStatus
    row: FleetRow
    built_at: float
    marks: tuple[tuple[object, Severity], ...]


def _finding_marks(host: HostState, now: float) -> tuple[tuple[object, Severity], ...]:
    return tuple((f.key, f.severity) for f in findings_before(host, host.status_at(now)))


def _retimed(host: HostState, row: FleetRow, now: float) -> FleetRow:
    status = host.status_at(now)
    return replace(
        row,
        stale_s=(now - host.reach.last_seen)
        if row.status is HostStatus.STALE and host.reach.last_seen else None,
        reason=host.reach.reason_at(now, status),
        last_seen_s=host.reach.last_seen_at(now, status),
        next_retry_s=host.reach.next_retry_at(now))


def _wait_s(host: HostState) -> float:
    return max(OFF_SCREEN_REFRESH_S, OFF_SCREEN_INTERVALS * host.spec.interval_s)


def _slot_after(built_at: float, wait_s: float, phase: float) -> float:
    return built_at + wait_s - (built_at - phase * wait_s) % wait_s


class FleetRowsBefore:
    def __init__(self, fleet: FleetState) -> None:
        self.fleet = fleet
        self.focus: frozenset[str] | None = None
        self.row_builds = 0
        self._rows: tuple[tuple[float, int], list[FleetRow]] | None = None
        self._totals: tuple[tuple[float, int], dict[str, int]] | None = None
        self._kept: dict[str, _KeptRow] = {}
        self._list: list[FleetRow] = []
        self._place = {name: i for i, name in enumerate(fleet.hosts)}
        self._phase = {name: i / max(1, len(fleet.hosts)) for i, name in enumerate(fleet.hosts)}
        self._seen = fleet.version
        self._waiting: dict[str, float] = {}
        self._timed: set[str] = set()
        self._stale_at: dict[str, float] = {}
        self._visited_at: float | None = None

    def row(self, host: HostState, now: float) -> FleetRow:
        name = host.name
        shown = host.shown_status_at(now)
        kept = self._kept.get(name)
        if kept is not None and kept.status is shown and (
                kept.revision == host.revision or self._may_wait(host, kept, now)):
            row = kept.row
            if kept.revision == host.revision:
                self._waiting.pop(name, None)
            else:
                self._waiting[name] = _slot_after(kept.built_at, _wait_s(host),
                                                  self._phase[name])
            if not timeless(row):
                row = _retimed(host, row, now)
        else:
            row = row_before(host, now)
            self.row_builds += 1
            self._kept[name] = _KeptRow(host.revision, shown, row, now,
                                        _finding_marks(host, now))
            self._waiting.pop(name, None)
        if timeless(row):
            self._timed.discard(name)
        else:
            self._timed.add(name)
        if shown is HostStatus.STREAMING and host.reach.last_seen is not None:
            self._stale_at[name] = host.reach.last_seen + host.stale_limit_s()
        else:
            self._stale_at.pop(name, None)
        return row

    def _may_wait(self, host: HostState, kept: _KeptRow, now: float) -> bool:
        return (self.focus is not None and host.name not in self.focus
                and kept.built_at <= now < _slot_after(kept.built_at, _wait_s(host),
                                                       self._phase[host.name])
                and kept.marks == _finding_marks(host, now))

    def rows(self, now: float) -> list[FleetRow]:
        key = (now, self.fleet.version)
        if self._rows is None or self._rows[0] != key:
            self._rows = (key, self._refreshed(now))
        return self._rows[1]

    def _refreshed(self, now: float) -> list[FleetRow]:
        fleet = self.fleet
        if not self._list or self._visited_at is None or now < self._visited_at:
            self._list = [self.row(h, now) for h in fleet.hosts.values()]
        else:
            focus = self.focus
            due = set(fleet.changed_since(self._seen)) | self._timed
            due.update(n for n, t in self._stale_at.items() if t < now)
            due.update(n for n, t in self._waiting.items()
                       if t <= now or focus is None or n in focus)
            hosts, place, out = fleet.hosts, self._place, self._list
            for name in due:
                out[place[name]] = self.row(hosts[name], now)
        self._seen = fleet.version
        self._visited_at = now
        return list(self._list)

    def totals(self, now: float) -> dict[str, int]:
        key = (now, self.fleet.version)
        if self._totals is not None and self._totals[0] == key:
            return dict(self._totals[1])
        out = count_rows(self.rows(now))
        self._totals = (key, out)
        return dict(out)
