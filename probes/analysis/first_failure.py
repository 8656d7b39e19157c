"""The first failure of each incident, and the culprit it names: one decision for every
surface (fleet and host triage, the job view, reports, ``snapshot``, ``explain``).

An incident is what went wrong inside one failure domain (``probes.analysis.domains``: a
job, a communicator, or a host on its own); findings of different jobs are never each
other's cause.  Inside a domain the root is found by time *and* by cause:

1. A GPU or kernel fault that came before a communication or model error, or within
   ``slack_s`` of a collective's start (a collective is issued, then the GPU under it dies),
   explains it: hardware and environment first.
2. Otherwise, in a collective, the ranks whose watchdog timed out are the waiting ones.  The
   culprit is a rank of the same job that failed before the first of them timed out (CUDA
   OOM, illegal access, assert, a CUDA error surfaced through NCCL, a transport error, a
   process that died); the earliest such failure, in event time and line order, is the root.
3. When no rank failed first, the watchdog timeout leads, and the culprit is a rank that
   never reported the collective (missing from the timeout set of ``nranks``), or the one
   whose last completed work is oldest; else the culprit is unknown, and "Do now" says what
   would tell.

Times are event times on the console's clock (the line's own stamp, line order, the host's
clock corrected for its skew), never when rigwatch read them.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from probes.analysis.do_now import TRACE_HINT, culprit_do_now, do_now
from probes.analysis.domains import Domain, group, hosts_of
from probes.analysis.findings import Finding
from probes.analysis.incident_text import (
    brief,
    describe,
    explain_earliest,
    explain_root,
    headline_earliest,
    headline_root,
)
from probes.analysis.job_ranks import RankIndex, RankPlace
from probes.analysis.onsets import (
    CAUSE_STEPS,
    SAME_MOMENT_S,
    Clocks,
    all_on_console,
    clock_of,
    incidents,
    on_console,
    onset,
    order_key,
    same_event,
    step_index,
)
from probes.analysis.watcher import SOURCE_CODES
from probes.triage import Code, OnsetClock, Severity, Step

DEFAULT_SLACK_S = 120.0
"""How long after a collective began a hardware fault still counts as what hung it."""
WAITING_CODES = frozenset({Code.NCCL_TIMEOUT, Code.COLLECTIVE_HANG})
"""A watchdog timeout: the rank that printed it was waiting on the others."""
CARRIER_CODES = frozenset({Code.NCCL_ERROR, Code.RANK_FAILED})
"""Codes that carry another failure on the same line (NCCL wrapping a CUDA error, a launcher
reporting a dead rank): at the same line, the failure they carry is named."""
MOST_MISSING_NAMED = 4
"""A collective missing more ranks than this (or a quarter of them) names none: a whole
node or a mismatched group, not one stalled rank."""


@dataclass(frozen=True)
class Culprit:
    """The rank, host and GPU an incident's root points at, and how that was found."""

    known: bool
    why: str
    """How it was told: ``failed first (line 12)``, ``never reached the collective``, or,
    when unknown, what would tell."""
    rank: int | None = None
    host: str | None = None
    gpu: int | None = None
    bus_id: str | None = None
    serial: str | None = None

    @property
    def where(self) -> str:
        """``rank 1 on n2 GPU1 (0000:19:00.0)``; as much as is known."""
        return self.place + (f" ({self.bus_id})" if self.bus_id else "")

    @property
    def place(self) -> str:
        """``rank 1 on n2 GPU1``: the rank and where it runs, without the bus id."""
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.host:
            on = f"on {self.host}" + (f" GPU{self.gpu}" if self.gpu is not None else "")
            parts.append(on if parts else on[3:])
        return " ".join(parts) or "an unknown rank"

    def to_json(self) -> dict[str, object]:
        """The ``culprit`` object of reports and snapshots."""
        return {"known": self.known, "why": self.why, "rank": self.rank, "host": self.host,
                "gpu": self.gpu, "bus_id": self.bus_id, "serial": self.serial}


@dataclass(frozen=True)
class FirstFailure:
    """An incident's root as far as the evidence goes, and the findings it explains."""

    finding: Finding
    consequences: tuple[Finding, ...]
    explanation: str
    """The full sentence, for reports: the root, when, and what follows from it."""
    headline: str = ""
    """The root named once, with its onset and what follows, short enough for one line."""
    do_now: str = ""
    """The one thing to do now, in one line ("drain gpu-b02, reboot it; RMA GPU6 if …")."""
    same_event: tuple[Finding, ...] = ()
    """Other findings that are the root itself seen by another probe (the samples losing
    the GPU, the kernel's "fallen off the bus"): named once, never as consequences."""
    others: tuple[Finding, ...] = ()
    """Faults the root does not explain: other hosts' GPU or kernel faults in the same
    domain, and, for the lead incident, the roots of the other incidents."""
    domain: Domain | None = None
    """Where the incident lies: a Slurm job, a communicator, or a host on its own."""
    culprit: Culprit | None = None
    """The rank, host and GPU to look at."""
    waiting: tuple[int, ...] = ()
    """Ranks whose watchdog timed out waiting (victims, not culprits)."""
    incident_id: str = ""
    """A short stable name for the incident (``3f2a9c1b``): the same root in the same domain
    gets the same id on every screen and refresh, so a drain's reason, the audit trail and
    a report can name it (:func:`incident_key`)."""

    @property
    def is_failure(self) -> bool:
        """A critical root broke something; a warning root is only the earliest condition."""
        return self.finding.severity is Severity.CRITICAL

    @property
    def clock(self) -> OnsetClock:
        """Which clock the root's time came from."""
        return clock_of(self.finding)

    def to_json(self) -> dict[str, object]:
        """``first_failure`` as reports and ``snapshot --json`` write it: code, host, rank,
        GPU, bus id, onset (ISO 8601), which clock, the domain, the culprit, and do-now."""
        f = self.finding
        c = self.culprit
        return {
            "code": str(f.code), "severity": f.severity.value, "summary": f.summary,
            "host": c.host if c is not None and c.host else f.host,
            "rank": c.rank if c is not None else None,
            "gpu": c.gpu if c is not None and c.gpu is not None else f.gpu,
            "bus_id": c.bus_id if c is not None else None,
            "onset": _iso(onset(f)) if f.ts else None,  # 0: an input with no stamps
            "clock": self.clock.value,
            "domain": self.domain.label if self.domain is not None else None,
            "job": self.domain.job if self.domain is not None else None,
            "culprit": c.to_json() if c is not None else None,
            "waiting_ranks": list(self.waiting),
            "xid": f.xid, "source": f.source, "line": f.line,
            "headline": self.headline, "do_now": self.do_now,
            "incident": self.incident_id or None,
        }


@dataclass(frozen=True)
class Diagnosis:
    """Every incident of what was looked at, the one to act on first leading."""

    incidents: tuple[FirstFailure, ...]

    @property
    def first(self) -> FirstFailure | None:
        """The lead incident (critical first, then earliest), None when nothing happened."""
        return self.incidents[0] if self.incidents else None

    def of_job(self, job: str) -> FirstFailure | None:
        """The incident of a Slurm job, None when the job has none."""
        return next((i for i in self.incidents
                     if i.domain is not None and i.domain.job == job), None)


def incident_key(domain: Domain | None, root: Finding, culprit: Culprit | None) -> str:
    """8 hex digits of a hash of the domain, the root's host, code, Xid, GPU and onset (agent
    time, whole seconds): what tells one incident from another, and nothing that changes
    while it is watched (the clock it is shown on, its consequences, the headline)."""
    host = culprit.host if culprit is not None and culprit.host else root.host
    when = int(onset(root)) if root.ts is not None else 0
    key = "|".join((domain.label if domain is not None else "", host, str(root.code),
                    str(root.xid), str(root.gpu), str(when)))
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:8]


def _hhmmss(ts: float) -> str:
    import time

    return time.strftime("%H:%M:%S", time.gmtime(ts))


def _iso(ts: float) -> str:
    import time

    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):
        return "?"


def diagnose(findings: Sequence[Finding], index: RankIndex | None = None,
             slack_s: float = DEFAULT_SLACK_S, clocks: Clocks | None = None) -> Diagnosis:
    """Every incident's first failure, the lead first.

    Args:
        findings: every finding looked at (job-log ones placed by ``job_ranks.placed``),
            with times on the console's clock (each host's skew already taken off).
        index: where the ranks run and which jobs each host runs; None: every finding is
            its host's own (no jobs known).
        slack_s: how long after a collective began a hardware fault still counts as its cause.
        clocks: simulated hosts' faster clocks, mapped back for what is returned.
    """
    events = incidents(findings)
    if not events:
        return Diagnosis(())
    out: list[FirstFailure] = []
    for domain, members in group(events, index).items():
        found = _incident(domain, members, index, slack_s, clocks)
        if found is not None:
            out.append(found)
    # a failure seen on a host leads one of the watcher's own (a stalled collector, a
    # Prometheus down): those hide hosts, they do not break them, and are said after
    out.sort(key=lambda i: (not i.is_failure, i.finding.code in SOURCE_CODES,
                            onset(_agent(i, events)), step_index(i.finding), i.finding.host))
    out = _distinct(out)
    if out and not out[0].is_failure:
        # nothing critical anywhere: the earliest warning, and how many others stand
        lead = out[0]
        rest = all_on_console([f for f in events if not (
            f.key == lead.finding.key and f.host == lead.finding.host)], clocks)
        out[0] = _with(lead, explanation=explain_earliest(lead.finding, rest),
                       headline=headline_earliest(lead.finding, rest))
        return Diagnosis(tuple(out))
    if len(out) > 1:
        lead = out[0]
        also = tuple(i.finding for i in out[1:] if i.is_failure or not lead.is_failure)
        if also:
            headline = lead.headline + _also_phrase(lead, also)
            told = "; ".join(f"{describe(f)} at {_hhmmss(f.ts or 0.0)}" for f in also[:8])
            more = f" and {len(also) - 8} more" if len(also) > 8 else ""
            explanation = (lead.explanation.rstrip(".")
                           + f". Separate incidents (other jobs or hosts): {told}{more}.")
            out[0] = _with(lead, others=lead.others + also, headline=headline,
                           explanation=explanation)
    return Diagnosis(tuple(out))


def first_failure(findings: Sequence[Finding], slack_s: float = DEFAULT_SLACK_S,
                  clocks: Clocks | None = None,
                  index: RankIndex | None = None) -> FirstFailure | None:
    """The lead incident's first failure (see :func:`diagnose`)."""
    return diagnose(findings, index, slack_s, clocks).first


def _agent(incident: FirstFailure, events: Sequence[Finding]) -> Finding:
    """The root as judged (agent time), for ordering incidents across hosts."""
    root = incident.finding
    return next((f for f in events if f.key == root.key and f.host == root.host), root)


def _distinct(incidents_: list[FirstFailure]) -> list[FirstFailure]:
    """One incident per root: a host fault in two jobs' domains leads both, said once."""
    seen: set[tuple[str, object]] = set()
    out = []
    for i in incidents_:
        key = (i.finding.host, i.finding.key)
        if key in seen:
            continue
        seen.add(key)
        out.append(i)
    return out


def _with(i: FirstFailure, **changes: object) -> FirstFailure:
    from dataclasses import replace

    return replace(i, **changes)  # type: ignore[arg-type]


def _also_phrase(lead: FirstFailure, also: Sequence[Finding]) -> str:
    if "; also " in lead.headline:
        return ""
    first = also[0]
    text = f"; also {brief(first)}"
    return text + (f" and {len(also) - 1} more" if len(also) > 1 else "")


def _incident(domain: Domain, members: list[Finding], index: RankIndex | None,
              slack_s: float, clocks: Clocks | None) -> FirstFailure | None:
    critical = [f for f in members if f.severity is Severity.CRITICAL]
    if not critical:
        root = min(members, key=order_key)
        rest = [f for f in members if f is not root]
        shown = on_console(root, clocks)
        rest_shown = all_on_console(rest, clocks)
        placed = _placed_culprit(root, domain, index, "earliest warning")
        return FirstFailure(shown, (), explain_earliest(shown, rest_shown),
                            headline_earliest(shown, rest_shown), do_now(root), domain=domain,
                            culprit=placed, incident_id=incident_key(domain, root, placed))
    events = critical
    root, waiting = _root(events, slack_s)
    causes = [f for f in events if f.step in CAUSE_STEPS]
    same = [f for f in events if f is not root and same_event(root, f)]
    skip = {id(root)} | {id(f) for f in same}
    others: list[Finding] = []
    named = {root.host}
    for f in sorted(causes, key=lambda f: (onset(f), f.xid is None, step_index(f))):
        # another host's GPU or kernel fault is a fault of its own, never a consequence
        if id(f) not in skip and f.host not in named:
            named.add(f.host)
            others.append(f)
    skip |= {id(f) for f in causes if f.host != root.host}
    faults = sorted((onset(c), i) for i, c in enumerate((root, *others)))
    starts = [t for t, _ in faults]

    def explained(f: Finding) -> bool:
        if f.host == root.host and order_key(f) >= order_key(root):
            return True
        if f.step in CAUSE_STEPS or (order_key(f) < order_key(root) and f not in waiting):
            return False
        if root.step in CAUSE_STEPS:  # the nearest hardware fault is what hung it
            return _nearest_fault(faults, starts, onset(f), slack_s) == 0
        return True  # a rank's own failure explains what its job printed after it

    later = [f for f in events if id(f) not in skip and explained(f)]
    culprit = _culprit(root, domain, events, waiting, index)
    shown = on_console(root, clocks)
    later_shown = sorted(all_on_console(later, clocks), key=lambda f: f.ts or 0.0)
    others_shown = all_on_console(others, clocks)
    ranks = tuple(sorted({r for f in waiting for r in _ranks(f)}))
    root_waits = root in waiting
    now = culprit_do_now(root, culprit, ranks, root_waits) or do_now(root)
    headline = headline_root(shown, later_shown, bool(causes), others_shown)
    if root_waits:
        headline += f"; culprit {culprit.where}" if culprit.known else "; culprit unknown"
    explanation = explain_root(shown, later_shown, bool(causes), others_shown,
                               culprit.where if culprit.known else None, ranks)
    spin = next((on_console(f, clocks) for f in members if f.code == Code.COLLECTIVE_HANG),
                None)
    if spin is not None and spin.ts is not None:
        explanation += (f" The GPUs of {spin.host} spun busy at idle power from "
                        f"{_hhmmss(spin.ts)}: the hung collective's NCCL spin.")
    return FirstFailure(shown, tuple(later_shown), explanation,
                        headline, now, tuple(all_on_console(same, clocks)), tuple(others_shown),
                        domain, culprit, ranks, incident_key(domain, root, culprit))


def _nearest_fault(faults: list[tuple[float, int]], starts: list[float], at: float,
                   slack_s: float) -> int:
    """Which fault (by index; 0 is the root) a symptom that began ``at`` belongs to: the
    one nearest in time, at most ``slack_s`` after it.  A host down for an hour did not
    hang a collective that began a second ago; the GPU that died a second later did."""
    i = bisect.bisect_right(starts, at + slack_s)
    if i == 0:
        return 0
    j = bisect.bisect_right(starts, at)
    near = [faults[j]] if j < i else []
    if j > 0:  # every fault at the latest time before it: at a tie the root wins
        near += faults[bisect.bisect_left(starts, starts[j - 1]):j]
    return min(near, key=lambda fi: (abs(fi[0] - at), fi[1]))[1]


def _root(events: list[Finding], slack_s: float) -> tuple[Finding, list[Finding]]:
    """The domain's root among its critical events, and its waiting (timed-out) findings."""
    causes = sorted((f for f in events if f.step in CAUSE_STEPS),
                    key=lambda f: (onset(f), f.xid is None, step_index(f)))
    symptoms = [f for f in events if f.step not in CAUSE_STEPS]
    waiting = sorted((f for f in symptoms if f.code in WAITING_CODES), key=order_key)
    failed = sorted((f for f in symptoms if f.code not in WAITING_CODES),
                    key=lambda f: (*order_key(f)[:3], f.code in CARRIER_CODES, step_index(f)))
    if causes:
        cause = causes[0]
        # a model error is explained only by a fault at the same moment or before it; a hang
        # by a fault up to slack_s after the collective began
        failed_before = bool(failed) and (failed[0].ts or 0.0) < onset(cause) - SAME_MOMENT_S
        hang_before = bool(waiting) and onset(cause) > onset(waiting[0]) + slack_s
        if not failed_before and not hang_before:
            return cause, waiting
    if failed:
        first_wait = waiting[0].ts if waiting else None
        early = [f for f in failed if first_wait is None or (f.ts or 0.0) <= first_wait]
        if early:
            return early[0], waiting
    if waiting:
        return waiting[0], waiting
    return min(events, key=order_key), waiting


def _ranks(f: Finding) -> list[int]:
    """The ranks a finding names (``rank``, ``ranks``)."""
    out = []
    rank = f.details.rank
    if rank is not None:
        out.append(rank)
    out.extend(f.details.ranks or ())
    return out


def _place_of(index: RankIndex | None, job: str | None, rank: int) -> RankPlace | None:
    if index is None:
        return None
    return index.locate(job, rank)


def _placed_culprit(root: Finding, domain: Domain, index: RankIndex | None,
                    why: str) -> Culprit:
    """The rank, host and GPU of a root that is itself the failure."""
    rank = root.details.rank
    host = root.details.rank_host
    gpu = root.details.rank_gpu
    bus = root.details.rank_bus_id
    serial = root.details.rank_serial
    from_log = (root.source or "").startswith("job:")
    if not isinstance(host, str):
        host = None if from_log else root.host
        if from_log and index is not None and domain.kind == "job":
            hosts = hosts_of(domain, [], index)
            host = hosts[0] if len(hosts) == 1 else None  # a one-node job: that node
    if not isinstance(gpu, int) or isinstance(gpu, bool):
        gpu = None if from_log else root.gpu
    if rank is None and not from_log and gpu is not None and index is not None \
            and domain.job is not None:
        for p in index.ranks_of(domain.job):
            if p.host == root.host and p.gpu == gpu:
                rank, bus, serial = p.rank, p.bus_id, p.serial
                break
    return Culprit(host is not None or rank is not None, why, rank, host, gpu,
                   bus if isinstance(bus, str) else None,
                   serial if isinstance(serial, str) else None)


def _culprit(root: Finding, domain: Domain, events: list[Finding], waiting: list[Finding],
             index: RankIndex | None) -> Culprit:
    """Who broke first: the root's own rank, or, when the root is a watchdog timeout, the
    rank that never reported the collective."""
    if root not in waiting:
        where = f" (line {root.line})" if root.line else ""
        why = ("failed first" + where if root.step not in CAUSE_STEPS
               else "the hardware fault under the job")
        return _placed_culprit(root, domain, index, why)
    waited = {r for f in waiting for r in _ranks(f)}
    failed = {r for f in events if f not in waiting for r in _ranks(f)}
    nranks = _nranks(waiting, domain, index)
    if nranks:
        missing = sorted(set(range(nranks)) - waited - failed)
        if missing and len(missing) <= max(MOST_MISSING_NAMED, nranks // 4):
            rank = missing[0]
            p = _place_of(index, domain.job, rank)
            others = f" (also {', '.join(str(r) for r in missing[1:])})" if len(missing) > 1 \
                else ""
            why = (f"never reported the collective: {len(waited)} of {nranks} ranks timed "
                   f"out waiting, rank {rank}{others} did not")
            return Culprit(True, why, rank, p.host if p else None, p.gpu if p else None,
                           p.bus_id if p else None, p.serial if p else None)
    laggard = _oldest_progress(waiting)
    if laggard is not None:
        rank, done = laggard
        p = _place_of(index, domain.job, rank)
        return Culprit(True, f"its last completed work ({done}) is the oldest of the ranks",
                       rank, p.host if p else None, p.gpu if p else None,
                       p.bus_id if p else None, p.serial if p else None)
    told = (f"{len(waited)} rank{'s' if len(waited) != 1 else ''} timed out waiting"
            if waited else "the ranks timed out")
    why = (f"unknown: {told} and none failed before them; "
           + ("every rank of the collective timed out" if nranks and not missing_any(
               nranks, waited) else "the log does not say how many ranks the job has")
           + f"; {TRACE_HINT}")
    return Culprit(False, why)


def missing_any(nranks: int, waited: set[int]) -> bool:
    """Whether some rank of ``nranks`` did not time out."""
    return len(waited) < nranks


def _nranks(waiting: list[Finding], domain: Domain, index: RankIndex | None) -> int | None:
    for f in waiting:
        n = f.details.nranks
        if n is not None and n > 0:
            return n
    if index is not None:
        key = domain.job if domain.kind == "job" else None
        n = index.nranks.get(key)
        if n:
            return n
    return None


def _oldest_progress(waiting: list[Finding]) -> tuple[int, int] | None:
    """(rank, last completed work) of the rank furthest behind, when the ranks differ."""
    done: dict[int, int] = {}
    for f in waiting:
        done.update(f.details.last_completed)
    if len(set(done.values())) < 2:
        return None
    rank = min(done, key=lambda r: (done[r], r))
    return rank, done[rank]


def is_waiting(f: Finding) -> bool:
    """Whether ``f`` says its rank waited on others (a watchdog timeout)."""
    return f.code in WAITING_CODES and f.step is Step.NCCL
