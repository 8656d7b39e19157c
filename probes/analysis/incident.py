"""Guided triage over the fleet's findings: the four steps, the operator's verdicts, and the
first failure in time with what follows from it.

The ops rule is fixed: GPU state, then the system log, then NCCL, then model code.  Most
failures start in the environment or the hardware and show up later as NCCL timeouts or
crashed ranks everywhere, so the first failure is found by time *and* by cause: a GPU or
kernel fault that precedes a communication or model error explains it, even when the
communication error is what most hosts print.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from probes.analysis.findings import Finding
from probes.triage import Code, Severity, Step

STEP_ORDER: tuple[Step, ...] = (Step.GPU, Step.SYSLOG, Step.NCCL, Step.MODEL)
STEP_TITLES: Mapping[Step, str] = {
    Step.GPU: "GPU state",
    Step.SYSLOG: "System log",
    Step.NCCL: "NCCL",
    Step.MODEL: "Model code",
}
CAUSE_STEPS = frozenset({Step.GPU, Step.SYSLOG})
"""Steps whose faults (hardware, driver, kernel) cause the later steps' symptoms."""
LAYOUT_CODES = frozenset({"topology-cross-numa", "kernel-log-unreadable"})
"""How a host is built or watched, not something that happened: never a first failure."""
DEFAULT_NCCL_TIMEOUT_S = 600.0
"""torch.distributed's NCCL default; used when a timeout line does not say its own."""


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


@dataclass(frozen=True)
class FirstFailure:
    """The incident's root as far as the evidence goes, and the findings it explains."""

    finding: Finding
    consequences: tuple[Finding, ...]
    explanation: str

    @property
    def is_failure(self) -> bool:
        """A critical root broke something; a warning root is only the earliest condition."""
        return self.finding.severity is Severity.CRITICAL


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


def incidents(findings: Iterable[Finding]) -> list[Finding]:
    """Findings that are events in time: warnings and worse, with a time, not layout facts."""
    return [f for f in findings
            if f.ts is not None and f.severity is not Severity.INFO and f.code not in LAYOUT_CODES]


def onset(f: Finding) -> float:
    """When the trouble a finding reports began.

    A watchdog timeout is printed when the timeout expires; the collective hung that long
    before, so its onset is the print time minus the timeout.
    """
    assert f.ts is not None
    if f.code == Code.NCCL_TIMEOUT:
        waited = next((v for v in (f.ran_ms, f.timeout_ms) if v is not None),
                      DEFAULT_NCCL_TIMEOUT_S * 1000.0)
        return f.ts - waited / 1000.0
    return f.ts


def _step_index(f: Finding) -> int:
    return STEP_ORDER.index(f.step)


def first_failure(findings: Sequence[Finding], slack_s: float = 120.0) -> FirstFailure | None:
    """The root incident across hosts, or None when nothing has happened.

    Only critical incidents compete when there are any: warnings such as a narrow link are
    chronic conditions, not what broke the run.  A GPU or kernel fault is the root when it came
    no later than ``slack_s`` after the onset of the earliest communication or model symptom (a
    collective is issued, then the GPU under it dies); otherwise the earliest incident by onset
    is.  At the same moment an Xid, which says why, wins over the GPU-state finding it explains.

    Args:
        findings: every host's findings.
        slack_s: how long after a symptom's onset a hardware fault still counts as its cause.

    Returns:
        The root, the later findings it explains, and a sentence saying so.
    """
    events = incidents(findings)
    if not events:
        return None
    critical = [f for f in events if f.severity is Severity.CRITICAL]
    if critical:
        # a narrow link or a busy disk is a chronic condition, not what broke the run
        events = critical
    causes = sorted((f for f in events if f.step in CAUSE_STEPS),
                    key=lambda f: (onset(f), f.xid is None, _step_index(f)))
    symptoms = sorted((f for f in events if f.step not in CAUSE_STEPS),
                      key=lambda f: (onset(f), _step_index(f)))
    root: Finding
    if causes and (not symptoms or onset(causes[0]) <= onset(symptoms[0]) + slack_s):
        root = causes[0]
    else:
        root = min(events, key=lambda f: (onset(f), _step_index(f)))
    assert root.ts is not None
    if root.severity is not Severity.CRITICAL:
        # a narrow link does not make another host's disk busy: warnings explain nothing
        others = [f for f in events if f is not root]
        return FirstFailure(root, (), explain_earliest(root, others))
    later = [f for f in events if f is not root and (f.ts or 0.0) >= root.ts
             and (f.host == root.host or _step_index(f) > _step_index(root))]
    return FirstFailure(root, tuple(sorted(later, key=lambda f: f.ts or 0.0)),
                        explain_root(root, later, bool(causes)))


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def describe(f: Finding) -> str:
    """``Xid 79 on gpu017 GPU3``: what and where, for sentences and timelines."""
    what = f"Xid {f.xid}" if f.xid is not None else f.code
    where = f.host + (f" GPU{f.gpu}" if f.gpu is not None else "")
    return f"{what} on {where}"


def _consequence_phrase(code: str, group: list[Finding]) -> str:
    hosts = sorted({f.host for f in group})
    start = min(f.ts or 0.0 for f in group)
    names = {"nccl-timeout": "NCCL watchdog timeouts", "nccl-error": "NCCL errors",
             "nccl-net-error": "NCCL transport errors", "rank-failed": "failed ranks",
             "gpu-lost": "lost GPUs", "xid": "Xids"}
    what = names.get(code, f"{code} findings")
    on = (f"{len(hosts)} hosts" if len(hosts) > 3 else ", ".join(hosts))
    return f"{what} on {on} from {_clock(start)}"


def explain_root(root: Finding, later: Sequence[Finding], hardware_seen: bool) -> str:
    """One sentence for the operator: the root, when, and what follows from it."""
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    by_code: dict[str, list[Finding]] = {}
    for f in later:
        by_code.setdefault(f.code, []).append(f)
    if by_code:
        parts = [_consequence_phrase(code, group) for code, group in
                 sorted(by_code.items(), key=lambda kv: min(f.ts or 0.0 for f in kv[1]))]
        verb = "are its consequence" if len(parts) == 1 else "are its consequences"
        head += "; " + "; ".join(parts) + " " + verb
    if root.step not in CAUSE_STEPS:
        head += (". No GPU or kernel fault precedes it" if not hardware_seen else
                 ". GPU and kernel faults came later")
        head += f": read {root.host}'s job log and model code"
    return head + "."


def explain_earliest(root: Finding, others: Sequence[Finding]) -> str:
    """The earliest warning when nothing critical happened, and how many others stand."""
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    if others:
        hosts = sorted({f.host for f in others})
        on = f"{len(hosts)} hosts" if len(hosts) > 3 else ", ".join(hosts)
        head += f"; {len(others)} more warning{'s' if len(others) > 1 else ''} on {on}"
    return head + "; nothing critical so far."


def _checked(step: Step, hosts: Sequence[HostView]) -> tuple[str, ...]:
    streaming = [h for h in hosts if h.streaming]
    gpus = sum(h.gpus for h in streaming)
    if step is Step.GPU:
        return (f"{gpus} GPUs on {len(streaming)} of {len(hosts)} hosts: state, clocks and "
                "throttle reasons, memory and ECC, PCIe links, NVLink, topology, disks",)
    if step is Step.SYSLOG:
        out = []
        by_via: dict[str, list[str]] = {}
        for h in hosts:
            by_via.setdefault(h.kernel_log, []).append(h.name)
        for via, names in sorted(by_via.items()):
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            out.append(f"kernel log {via}: {shown}")
        return tuple(out)
    with_logs = [h for h in hosts if h.job_logs]
    if not with_logs:
        return ("no job logs are followed: add `logs:` globs to the inventory to check this step",)
    what = "collective timeouts, transport and NCCL errors, failed ranks" if step is Step.NCCL \
        else "CUDA OOM, illegal memory access, device-side asserts, NaN loss, loss-scale overflow"
    return (f"job logs on {len(with_logs)} of {len(hosts)} hosts: {what}",)


@dataclass(frozen=True)
class HostView:
    """What triage needs to know about a host besides its findings."""

    name: str
    streaming: bool
    gpus: int
    kernel_log: str
    """How its kernel log is read (``via journalctl``, ``denied: …``, ``simulated``)."""
    job_logs: tuple[str, ...]


def review(findings: Sequence[Finding], hosts: Sequence[HostView],
           record: TriageRecord) -> list[StepReview]:
    """The four steps in order, each with its findings (worst, then earliest, first)."""
    out = []
    for step in STEP_ORDER:
        mine = sorted((f for f in findings if f.step is step),
                      key=lambda f: (-f.severity.rank, f.ts if f.ts is not None else float("inf"),
                                     f.host))
        out.append(StepReview(step, STEP_TITLES[step], _checked(step, hosts), tuple(mine),
                              record.verdict(step), record.notes.get(step, "")))
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
            worst = serious[0]
            return r.step, (f"{r.title} has {len(serious)} finding"
                            f"{'s' if len(serious) > 1 else ''} (worst: {worst.summary}); "
                            "look here before the later steps")
        return r.step, (f"{r.title} shows nothing above info: check what was looked at, "
                        "then mark it clear to go on")
    return None, "every step is marked clear: the cause is not in what rigwatch can see"
