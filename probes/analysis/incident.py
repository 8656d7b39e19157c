"""Guided triage over the fleet's findings: the four steps, the operator's verdicts, and the
first failure in time with what follows from it.

The ops rule is fixed: GPU state, then the system log, then NCCL, then model code.  Most
failures start in the environment or the hardware and show up later as NCCL timeouts or
crashed ranks everywhere, so the first failure is found by time *and* by cause: a GPU or
kernel fault that precedes a communication or model error explains it, even when the
communication error is what most hosts print.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from probes.analysis.findings import Finding
from probes.analysis.job_ranks import rank_where
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
SAME_EVENT_S = 300.0
"""Findings on one GPU this close to the root's onset are the root seen by another probe."""
GPU_LOSS_CODES = frozenset({"xid", "gpu-fallen-off-bus", "gpu-lost", "gpu-dropout",
                            "gpu-unresponsive", "pcie-aer", "rm-init-adapter-failed",
                            "gpu-count-short"})
"""One GPU going away, as the kernel log, the samples and the detectors each report it."""
DOWN_CODES = frozenset({"host-unreachable", "host-auth-failed", "host-key-changed",
                        "host-key-refused", "agent-failed", "host-down", "host-stale",
                        "fleet-down", "gpu-count-short"})
"""A host that cannot be watched (or shows fewer GPUs than it should), as one event."""


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
    """The full sentence, for reports: the root, when, and what follows from it."""
    headline: str = ""
    """The root named once, with its onset and what follows, short enough for one line."""
    do_now: str = ""
    """The one thing to do now, in one line ("drain gpu-b02, reboot it; RMA GPU6 if …")."""
    same_event: tuple[Finding, ...] = ()
    """Other findings that are the root itself seen by another probe (the samples losing
    the GPU, the kernel's "fallen off the bus"): named once, never as consequences."""
    others: tuple[Finding, ...] = ()
    """Later GPU or kernel faults on other hosts that the root does not explain (a host
    down does not make another host's GPU fall off the bus): one per host, each its own
    incident, so the banner does not hide them."""

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


@dataclass(frozen=True)
class HostClock:
    """How a host's agent time maps onto the console's clock.

    A simulated host runs its clock ``speed`` times faster from ``start`` (its hello): the
    demo's hosts live an hour of incidents in a minute.  Judgements run on agent time (a
    600 s watchdog is 600 agent seconds); what the operator reads and pastes into a ticket
    is on the console's clock, so a report written at 16:51 lists nothing at 18:24.
    """

    start: float
    speed: float = 1.0

    def console(self, ts: float) -> float:
        """``ts`` (agent time) on the console's clock."""
        if self.speed == 1.0 or ts <= self.start:
            return ts
        return self.start + (ts - self.start) / self.speed


Clocks = Mapping[str, HostClock]
"""Per host; a host not in it keeps its own time (a real host's clock is the console's)."""


def on_console(f: Finding, clocks: Clocks | None) -> Finding:
    """``f`` with its time on the console's clock."""
    clock = clocks.get(f.host) if clocks else None
    if clock is None or f.ts is None:
        return f
    ts = clock.console(f.ts)
    return f if ts == f.ts else replace(f, ts=ts)


def all_on_console(findings: Iterable[Finding], clocks: Clocks | None) -> list[Finding]:
    """Every finding with its time on the console's clock (for screens and reports)."""
    return [on_console(f, clocks) for f in findings]


def _step_index(f: Finding) -> int:
    return STEP_ORDER.index(f.step)


def first_failure(findings: Sequence[Finding], slack_s: float = 120.0,
                  clocks: Clocks | None = None) -> FirstFailure | None:
    """The root incident across hosts, or None when nothing has happened.

    Only critical incidents compete when there are any: warnings such as a narrow link are
    chronic conditions, not what broke the run.  A GPU or kernel fault is the root when it came
    no later than ``slack_s`` after the onset of the earliest communication or model symptom (a
    collective is issued, then the GPU under it dies); otherwise the earliest incident by onset
    is.  At the same moment an Xid, which says why, wins over the GPU-state finding it explains.
    A host that cannot be watched is a GPU-state fault like any other: it can be the root.

    Args:
        findings: every host's findings, on agent time (the judgement is made there).
        slack_s: how long after a symptom's onset a hardware fault still counts as its cause.
        clocks: how each host's time maps onto the console's, for what is returned.

    Returns:
        The root, the findings that are the same event, the later findings it explains,
        and the sentences saying so, with every time on the console's clock.
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
    shown = on_console(root, clocks)
    if root.severity is not Severity.CRITICAL:
        # a narrow link does not make another host's disk busy: warnings explain nothing
        rest = [f for f in events if f is not root]
        return FirstFailure(shown, (), explain_earliest(shown, rest),
                            headline_earliest(shown, rest), do_now(root))
    same = [f for f in events if f is not root and same_event(root, f)]
    skip = {id(root)} | {id(f) for f in same}
    # another host's GPU or kernel fault is its own incident: only communication and
    # model errors spread across hosts (a rank that vanished hangs the collective)
    later = [f for f in events if id(f) not in skip and (f.ts or 0.0) >= root.ts
             and f.host == root.host]
    skip |= {id(f) for f in later}
    others: list[Finding] = []
    named = {root.host}
    for f in sorted((f for f in events if id(f) not in skip and f.step in CAUSE_STEPS),
                    key=lambda f: (onset(f), f.xid is None, _step_index(f))):
        if f.host not in named:
            named.add(f.host)
            others.append(f)
    faults = sorted((onset(c), i) for i, c in enumerate((root, *others)))
    starts = [t for t, _ in faults]
    for f in events:
        if (id(f) in skip or f.step in CAUSE_STEPS or (f.ts or 0.0) < root.ts
                or _step_index(f) <= _step_index(root)):
            continue
        if _nearest_fault(faults, starts, onset(f), slack_s) == 0:
            later.append(f)
    later_shown = sorted(all_on_console(later, clocks), key=lambda f: f.ts or 0.0)
    others_shown = all_on_console(others, clocks)
    return FirstFailure(shown, tuple(later_shown),
                        explain_root(shown, later_shown, bool(causes), others_shown),
                        headline_root(shown, later_shown, bool(causes), others_shown),
                        do_now(root), tuple(all_on_console(same, clocks)),
                        tuple(others_shown))


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


def same_event(root: Finding, f: Finding) -> bool:
    """Whether ``f`` is ``root`` itself as another probe saw it (one GPU lost, one host down)."""
    if f.host != root.host:
        return False
    if root.code in DOWN_CODES:
        return f.code in DOWN_CODES
    if root.code not in GPU_LOSS_CODES or f.code not in GPU_LOSS_CODES:
        return False
    if root.gpu is not None and f.gpu is not None and root.gpu != f.gpu:
        return False
    return abs(onset(f) - onset(root)) <= SAME_EVENT_S


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def describe(f: Finding) -> str:
    """``Xid 79 on gpu017 GPU3``: what and where, for sentences and timelines."""
    what = f"Xid {f.xid}" if f.xid is not None else f.code
    ranked = rank_where(f)
    if ranked is not None:  # a job log's finding: where the rank runs, not who read the log
        return f"{what} {ranked}"
    where = f.host + (f" GPU{f.gpu}" if f.gpu is not None else "")
    return f"{what} on {where}"


_NAMES = {"nccl-timeout": ("NCCL watchdog timeout", "NCCL watchdog timeouts"),
          "nccl-error": ("NCCL error", "NCCL errors"),
          "nccl-net-error": ("NCCL transport error", "NCCL transport errors"),
          "rank-failed": ("failed rank", "failed ranks"),
          "gpu-lost": ("lost GPU", "lost GPUs"), "xid": ("Xid", "Xids")}
_SHORT = {"nccl-timeout": ("NCCL timeout", "NCCL timeouts")}


def _hosts_phrase(group: Sequence[Finding]) -> str:
    hosts = sorted({f.host for f in group})
    return f"{len(hosts)} hosts" if len(hosts) > 3 else ", ".join(hosts)


def _name(code: str, n: int, short: bool = False) -> str:
    one, many = (_SHORT.get(code) if short else None) or _NAMES.get(
        code, (f"{code} finding", f"{code} findings"))
    return one if n == 1 else many


def _consequence_phrase(code: str, group: list[Finding]) -> str:
    start = min(f.ts or 0.0 for f in group)
    return f"{_name(code, len(group))} on {_hosts_phrase(group)} from {_clock(start)}"


def _by_code(later: Sequence[Finding]) -> list[tuple[str, list[Finding]]]:
    by_code: dict[str, list[Finding]] = {}
    for f in later:
        by_code.setdefault(f.code, []).append(f)
    return sorted(by_code.items(), key=lambda kv: min(f.ts or 0.0 for f in kv[1]))


def explain_root(root: Finding, later: Sequence[Finding], hardware_seen: bool,
                 others: Sequence[Finding] = ()) -> str:
    """One sentence for the operator: the root, when, and what follows from it."""
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    groups = _by_code(later)
    if groups:
        parts = [_consequence_phrase(code, group) for code, group in groups]
        single = len(groups) == 1 and len(groups[0][1]) == 1
        verb = "is its consequence" if single else (
            "are its consequence" if len(parts) == 1 else "are its consequences")
        head += "; " + "; ".join(parts) + " " + verb
    if root.step not in CAUSE_STEPS:
        head += (". No GPU or kernel fault precedes it" if not hardware_seen else
                 ". GPU and kernel faults came later")
        head += f": read {root.host}'s job log and model code"
    if others:
        head += ". Separate faults: " + "; ".join(
            f"{describe(o)} at {_clock(o.ts or 0.0)}" for o in others)
    return head + "."


def headline_root(root: Finding, later: Sequence[Finding], hardware_seen: bool,
                  others: Sequence[Finding] = ()) -> str:
    """The root once, with its onset, then what follows: ``16:14:40 Xid 79 on gpu-b02 GPU6,
    then NCCL timeout on gpu-b03`` (one line at 80 columns for a typical incident)."""
    assert root.ts is not None
    head = f"{_clock(root.ts)} {describe(root)}"
    groups = _by_code(later)
    if groups:
        code, group = groups[0]
        head += f", then {_name(code, len(group), short=True)} on {_hosts_phrase(group)}"
        rest = sum(len(g) for _, g in groups[1:])
        if rest:
            head += f" and {rest} more"
    if root.step not in CAUSE_STEPS:
        head += ("; no GPU or kernel fault before it" if not hardware_seen else
                 "; GPU and kernel faults came later")
    if others:
        head += f"; also {describe(others[0])}"
        if len(others) > 1:
            head += f" and {len(others) - 1} more"
    return head


def explain_earliest(root: Finding, others: Sequence[Finding]) -> str:
    """The earliest warning when nothing critical happened, and how many others stand."""
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    if others:
        head += (f"; {len(others)} more warning{'s' if len(others) > 1 else ''} on "
                 f"{_hosts_phrase(others)}")
    return head + "; nothing critical so far."


def headline_earliest(root: Finding, others: Sequence[Finding]) -> str:
    """``16:41:30 memory-leak on gpu-a02 GPU3; 5 more warnings, nothing critical``."""
    assert root.ts is not None
    more = f"{len(others)} more warning{'s' if len(others) != 1 else ''}, " if others else ""
    return f"{_clock(root.ts)} {describe(root)}; {more}nothing critical"


_RESET_XIDS = frozenset({48, 63, 64, 92, 94, 95})
"""Memory faults a GPU reset clears (ECC, row remap); the card goes back if they recur."""


def do_now(f: Finding) -> str:
    """The one action for the operator now, in one line.

    The finding's own action (from the rule or the Xid catalog) says everything and is
    shown with it; this is what to do first, so it names the host and the GPU.
    """
    host, gpu = f.host, (f"GPU{f.gpu}" if f.gpu is not None else "the GPU")
    code = f.code
    if f.xid == 79 or code in ("gpu-fallen-off-bus", "gpu-lost", "gpu-dropout"):
        return f"drain {host}, reboot it; RMA {gpu} if it recurs"
    if f.xid in _RESET_XIDS or code == "ecc-uncorrectable":
        return f"drain {host}, reset {gpu} (nvidia-smi -r); RMA it if it recurs"
    if code == "row-remap-failure":
        return f"drain {host}; RMA {gpu}: it has no spare rows left"
    if code == "gpu-unresponsive":
        return f"drain {host}; if {gpu} stays hung in nvidia-smi, reboot it"
    if code == "pcie-aer":
        return f"drain {host}; reseat {gpu}, check its riser and slot"
    if code in ("host-unreachable", "host-down", "fleet-down"):
        return f"check {host}'s power and network (ping, BMC console)"
    if code == "host-auth-failed":
        return f"fix the SSH login to {host} (user, key, agent)"
    if code in ("host-key-changed", "host-key-refused"):
        return f"verify {host}'s new host key out of band before trusting it"
    if code == "agent-failed":
        return f"read why the agent failed on {host} (below), fix it, then retry"
    if code == "host-stale":
        return f"check whether {host} is overloaded or hung (ssh in, top, dmesg)"
    if code == "gpu-count-short":
        return f"check the NVIDIA driver on {host} (nvidia-smi; lsmod | grep nvidia)"
    ranked = rank_where(f)
    if code in ("nccl-timeout", "nccl-error", "nccl-net-error", "rank-failed"):
        if ranked is not None and code == "rank-failed":
            return f"check {ranked} first (GPU state, kernel log), then its traceback"
        return f"find the stalled rank ({ranked or host}); set TORCH_NCCL_DUMP_ON_TIMEOUT=1"
    if f.step is Step.MODEL:
        if ranked is not None:
            return f"read the traceback of {ranked} in {host}'s job log, then the model code"
        return f"read {host}'s job log and model code"
    warning = _WARNING_DO.get(code)
    if warning is not None:
        where = host + (f" GPU{f.gpu}" if f.gpu is not None else "")
        return warning.format(host=host, gpu=gpu, where=where)
    if f.action:
        first = f.action.split(";")[0].split(". ")[0].split(" (")[0].strip().rstrip(".:")
        if first:
            if len(first) > 64:
                first = first[:64].rsplit(" ", 1)[0] + "…"
            return f"on {host}: {first[0].lower()}{first[1:]}"
    return f"look at {host} ({code})"


_WARNING_DO: Mapping[str, str] = {
    "memory-leak": "checkpoint the job on {where} before it runs out; find what grows",
    "clocks-throttled": "check the cooling and power of {where} (fans, inlet air)",
    "throttled-while-busy": "check the cooling and power of {where} (fans, inlet air)",
    "temp-near-slowdown": "check the cooling of {where} before it slows down",
    "power-pinned": "check {host}'s power cap (nvidia-smi -q -d POWER)",
    "pcie-link-downgraded": "reseat {gpu} on {host} at its next drain",
    "link-downgrade-appeared": "reseat {gpu} on {host} at its next drain",
    "nvlink-down": "drain {host}, reset {gpu}; RMA it if links stay down",
    "disk-saturated": "find what saturates {host}'s disk (iotop, iostat -x)",
    "data-starvation": "feed {host}'s GPUs faster (loader workers, data on local disk)",
    "host-swapping": "free memory on {host}: its GPUs wait on swap",
    "swap-activity": "free memory on {host}: its GPUs wait on swap",
    "ecc-increasing": "drain {host} soon; RMA {gpu} if its ECC errors keep rising",
    "remap-increasing": "drain {host} soon; RMA {gpu} if its row remaps keep rising",
    "row-remap-pending": "reset {gpu} on {host} (nvidia-smi -r) at its next drain",
    "retired-pages-pending": "reboot {host} at its next drain to retire the pages",
}
"""What to do first about a chronic condition when it is the earliest thing seen."""


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
