"""When a finding's trouble began, on which clock, and in what order findings happened.

Every finding carries the time its evidence was written (the log line's own stamp, its place
in the file, the first sample showing it), already on the console's clock: the session takes
each host's skew off before anything is folded.  A simulated host still runs its clock
faster; :class:`HostClock` maps it back for what the operator reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from probes.analysis.findings import Finding
from probes.triage import Code, OnsetClock, Severity, Step

STEP_ORDER: tuple[Step, ...] = (Step.GPU, Step.SYSLOG, Step.NCCL, Step.MODEL)
STEP_TITLES: Mapping[Step, str] = {
    Step.GPU: "GPU state",
    Step.SYSLOG: "System log",
    Step.NCCL: "NCCL",
    Step.MODEL: "Model code",
}
CAUSE_STEPS = frozenset({Step.GPU, Step.SYSLOG})
"""Steps whose faults (hardware, driver, kernel) cause the later steps' symptoms."""
LAYOUT_CODES = frozenset({Code.TOPOLOGY_CROSS_NUMA, Code.KERNEL_LOG_UNREADABLE, Code.CLOCK_SKEW,
                          Code.JOB_LOG_REFUSED})
"""How a host is built or watched, not something that happened: never a first failure."""
DEFAULT_NCCL_TIMEOUT_S = 600.0
"""torch.distributed's NCCL default; used when a timeout line does not say its own."""
SAME_EVENT_S = 300.0
"""Findings on one GPU this close to the root's onset are the root seen by another probe."""
GPU_LOSS_CODES = frozenset({Code.XID, Code.GPU_FALLEN_OFF_BUS, Code.GPU_LOST, Code.GPU_DROPOUT,
                            Code.GPU_UNRESPONSIVE, Code.PCIE_AER, Code.RM_INIT_ADAPTER_FAILED,
                            Code.GPU_COUNT_SHORT})
"""One GPU going away, as the kernel log, the samples and the detectors each report it."""
DOWN_CODES = frozenset({Code.HOST_UNREACHABLE, Code.HOST_AUTH_FAILED, Code.HOST_KEY_CHANGED,
                        Code.HOST_KEY_REFUSED, Code.AGENT_FAILED, Code.HOST_DOWN, Code.HOST_STALE,
                        Code.FLEET_DOWN, Code.GPU_COUNT_SHORT})
"""A host that cannot be watched (or shows fewer GPUs than it should), as one event."""


SAME_MOMENT_S = 5.0
"""A hardware fault this close after a model error may be its cause (an Xid 13 and the
illegal address the program saw are printed within a second of each other)."""


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


def step_index(f: Finding) -> int:
    """The finding's step in the fixed triage order (GPU state first)."""
    return STEP_ORDER.index(f.step)


def order_key(f: Finding) -> tuple[float, str, int, int]:
    """When ``f`` happened, for sorting: its time, then, at the same time, its place in its
    own source (line order is time order), then the triage order (a cause before what it
    explains)."""
    return (f.ts if f.ts is not None else float("inf"), f.source or "",
            f.line if f.line is not None else 0, step_index(f))


def clock_of(f: Finding) -> OnsetClock:
    """Which clock ``f``'s time came from (older findings: what their source implies)."""
    if f.clock is not None:
        return f.clock
    if f.code in DOWN_CODES and f.code != Code.GPU_COUNT_SHORT:
        return OnsetClock.CONSOLE
    if f.source == "kernel":
        return OnsetClock.KERNEL
    if f.source:
        return OnsetClock.READ
    return OnsetClock.SAMPLE


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

