"""Guided triage over the fleet's findings: the four steps, what each checked and found, the
operator's verdicts, and the step to look at next.

The ops rule is fixed: GPU state, then the system log, then NCCL, then model code.  The
first failure of each incident, and what follows from it, is decided once in
``probes.analysis.first_failure``; this module re-exports it for the screens.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from probes.analysis.do_now import do_now
from probes.analysis.findings import Finding
from probes.analysis.first_failure import (
    Culprit,
    Diagnosis,
    FirstFailure,
    diagnose,
    first_failure,
)
from probes.analysis.incident_text import (
    describe,
    explain_earliest,
    explain_root,
    headline_earliest,
    headline_root,
)
from probes.analysis.onsets import (
    CAUSE_STEPS,
    DEFAULT_NCCL_TIMEOUT_S,
    DOWN_CODES,
    GPU_LOSS_CODES,
    LAYOUT_CODES,
    SAME_EVENT_S,
    STEP_ORDER,
    STEP_TITLES,
    Clocks,
    HostClock,
    all_on_console,
    incidents,
    on_console,
    onset,
    same_event,
)
from probes.triage import Severity, Step

__all__ = [
    "CAUSE_STEPS", "DEFAULT_NCCL_TIMEOUT_S", "DOWN_CODES", "GPU_LOSS_CODES", "LAYOUT_CODES",
    "SAME_EVENT_S", "STEP_ORDER", "STEP_TITLES", "Clocks", "Culprit", "Diagnosis",
    "FirstFailure", "HostClock", "HostView", "StepCount", "StepReview", "TriageRecord",
    "Verdict", "all_on_console", "count", "describe", "diagnose", "do_now", "explain_earliest",
    "explain_root", "first_failure", "headline_earliest", "headline_root", "incidents",
    "on_console", "onset", "propose_next", "review", "same_event",
]


class Verdict(str, Enum):
    """What the operator decided about a step."""

    OPEN = "open"
    CLEAR = "clear"
    SUSPECT = "suspect"


@dataclass(frozen=True)
class StepReview:
    """One triage step as the screen shows it: what was checked and what was found."""

    step: Step
    title: str
    checked: tuple[str, ...]
    findings: tuple[Finding, ...]
    verdict: Verdict = Verdict.OPEN
    note: str = ""

    @property
    def worst(self) -> Severity | None:
        """The most urgent finding's severity, None when the step found nothing."""
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)




@dataclass
class TriageRecord:
    """The operator's side of a triage: verdicts and notes per step, and when it began."""

    started: float = field(default_factory=time.time)
    verdicts: dict[Step, Verdict] = field(default_factory=dict)
    notes: dict[Step, str] = field(default_factory=dict)

    def mark(self, step: Step, verdict: Verdict) -> None:
        """Set a step's verdict; marking it again with the same verdict reopens it."""
        same = self.verdicts.get(step) is verdict
        self.verdicts[step] = Verdict.OPEN if same else verdict

    def verdict(self, step: Step) -> Verdict:
        """The step's verdict, OPEN until the operator decides."""
        return self.verdicts.get(step, Verdict.OPEN)


def _names(items: Sequence[str], most: int = 4) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _checked(step: Step, hosts: Sequence[HostView], findings: Sequence[Finding]
             ) -> tuple[str, ...]:
    if step is Step.GPU:
        return _checked_gpus(hosts)
    if step is Step.SYSLOG:
        out = []
        by_via: dict[str, list[str]] = {}
        for h in hosts:
            by_via.setdefault(h.kernel_log, []).append(h.name)
        for via, names in sorted(by_via.items()):
            out.append(f"kernel log {via}: {_names(names)}")
        return tuple(out)
    # a job-log finding proves its log is followed, whatever the inventory says
    read = {h.name for h in hosts if h.job_logs}
    read |= {f.host for f in findings if f.source and f.source.startswith("job:")}
    if not read:
        return ("no job logs are followed: add `logs:` globs to the inventory to check this step",)
    what = "collective timeouts, transport and NCCL errors, failed ranks" if step is Step.NCCL \
        else "CUDA OOM, illegal memory access, device-side asserts, NaN loss, loss-scale overflow"
    return (f"job logs on {len(read)} of {len(hosts)} hosts: {what}",)


def _checked_gpus(hosts: Sequence[HostView]) -> tuple[str, ...]:
    """What the GPU step looked at, which hosts it could not, and why."""
    streaming = [h for h in hosts if h.streaming]
    gpus = sum(h.gpus for h in streaming)
    expected = sum(max(h.gpus, h.expected_gpus or 0) for h in streaming)
    count = f"{gpus} of {expected} GPUs answer" if expected > gpus else f"{gpus} GPUs"
    normal = sum(1 for h in streaming if h.normal_topology)
    layout = (f"topology (each GPU has a local NIC on {normal} of {len(streaming)} hosts)"
              if normal else "topology")
    out = [f"{count} on {len(streaming)} of {len(hosts)} hosts: state, clocks and throttle "
           f"reasons, memory and ECC, PCIe links, NVLink, {layout}, disks"]
    down = [f"{h.name} ({h.down or 'no data yet'})" for h in hosts if not h.streaming]
    if down:
        out.append(f"nothing on {_names(down)}")
    skipped = sorted((h for h in hosts if h.skipped_samples), key=lambda h: -h.skipped_samples)
    if skipped:
        out.append(f"{sum(h.skipped_samples for h in skipped)} samples skipped (the console "
                   f"fell behind; each host's newest kept) on "
                   f"{_names([f'{h.name} ({h.skipped_samples})' for h in skipped])}")
    lost = [h for h in hosts if h.skipped_lines]
    if lost:
        out.append(f"{sum(h.skipped_lines for h in lost)} lines dropped past the "
                   f"collector's bound (log lines first) while the console fell behind, on "
                   f"{_names([h.name for h in lost])}")
    return tuple(out)


@dataclass(frozen=True)
class HostView:
    """What triage needs to know about a host besides its findings."""

    name: str
    streaming: bool
    gpus: int
    kernel_log: str
    """How its kernel log is read (``via journalctl``, ``denied: …``, ``simulated``)."""
    job_logs: tuple[str, ...]
    """Job logs followed: the inventory's globs and any job log a line came from."""
    expected_gpus: int | None = None
    """GPUs the host should have (``expect_gpus``, or the hello's list)."""
    down: str | None = None
    """Why it cannot be checked ("unreachable", "auth-failed: …"); None when it can."""
    normal_topology: bool | None = None
    """Every GPU has a local NIC (the normal HGX layout); None when unknown."""
    skipped_samples: int = 0
    """Samples its collector skipped while the console did not read (``relay``)."""
    skipped_lines: int = 0
    """Its other lines the collector dropped meanwhile, past its bound."""


@dataclass(frozen=True)
class StepCount:
    """How many findings a step holds and how many at its worst severity; the step list
    and the "Next:" line both say these numbers, so they agree."""

    total: int
    worst: Severity | None
    at_worst: int

    @property
    def text(self) -> str:
        """``8 (2 crit)``; ``3 warn`` when all share the worst severity; ``none``."""
        if self.worst is None:
            return "none"
        short = SEVERITY_SHORT[self.worst]
        if self.at_worst == self.total:
            return f"{self.total} {short}"
        return f"{self.total} ({self.at_worst} {short})"


SEVERITY_SHORT: Mapping[Severity, str] = {Severity.CRITICAL: "crit", Severity.WARNING: "warn",
                                          Severity.INFO: "info"}


def count(r: StepReview) -> StepCount:
    """The step's findings counted for the step list and the proposal."""
    worst = r.worst
    return StepCount(len(r.findings), worst,
                     sum(1 for f in r.findings if f.severity is worst))


def review(findings: Sequence[Finding], hosts: Sequence[HostView],
           record: TriageRecord) -> list[StepReview]:
    """The four steps in order, each with its findings (worst, then earliest, first)."""
    out = []
    for step in STEP_ORDER:
        mine = sorted((f for f in findings if f.step is step),
                      key=lambda f: (-f.severity.rank, f.ts if f.ts is not None else float("inf"),
                                     f.host))
        out.append(StepReview(step, STEP_TITLES[step], _checked(step, hosts, findings),
                              tuple(mine), record.verdict(step), record.notes.get(step, "")))
    return out


def propose_next(reviews: Sequence[StepReview]) -> tuple[Step | None, str]:
    """The step to look at now and why, following the fixed order.

    A suspect step stops the walk: its fault most likely explains every later step.
    """
    for r in reviews:
        if r.verdict is Verdict.SUSPECT:
            return r.step, (f"{r.title} is marked suspect: act on it first; findings in later "
                            "steps are most likely its consequences")
        if r.verdict is Verdict.CLEAR:
            continue
        serious = [f for f in r.findings if f.severity is not Severity.INFO]
        if serious:
            n = count(r)
            level = n.worst.value if n.worst else ""
            of = "" if n.at_worst == n.total else f", {n.at_worst} {level}"
            return r.step, (f"{r.title}: {n.total} finding{'s' if n.total > 1 else ''}{of} "
                            f"(worst: {describe(serious[0])}); look here first")
        return r.step, (f"{r.title} shows nothing above info: check what was looked at, "
                        "then mark it clear to go on")
    return None, "every step is marked clear: the cause is not in what rigwatch can see"

