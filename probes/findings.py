"""Findings: what rigwatch tells the operator, tagged with the triage step it belongs to.

This is the first cut of the rules: instant checks on one sample and a few log-line
patterns.  Codes and steps follow ``shared/EXPLAIN-CONTRACT.md``; detectors over
history (leaks, starvation) and the full Xid / NCCL catalogs build on this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from probes.samples import GpuSample, GpuState, Hello, HostSample, LogEvent


class Step(str, Enum):
    """The fixed triage order: GPU state, then system log, then NCCL, then model code."""

    GPU = "gpu"
    SYSLOG = "syslog"
    NCCL = "nccl"
    MODEL = "model"


class Severity(str, Enum):
    """How urgent a finding is."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is worse; for sorting and "worst finding" columns."""
        return {"critical": 3, "warning": 2, "info": 1}[self.value]


@dataclass(frozen=True)
class Finding:
    """One thing wrong (or worth knowing) on one host."""

    step: Step
    code: str
    severity: Severity
    summary: str
    host: str
    gpu: int | None = None
    xid: int | None = None
    evidence: str | None = None
    ts: float | None = None

    @property
    def key(self) -> tuple[str, str, int | None, int | None]:
        """Identity for de-duplication: one incident on many lines is one finding."""
        return (self.step.value, self.code, self.gpu, self.xid)


THROTTLE_REASONS = frozenset({
    "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown",
})
"""Reasons that slow a GPU whatever its load; ``sw_power_cap`` counts only when busy."""
BUSY_UTIL_PCT = 50.0
DISK_SATURATED_UTIL = 90.0


def sample_findings(host: str, hello: Hello | None, sample: HostSample) -> list[Finding]:
    """Instant findings from one sample (and the GPU list the hello promised).

    Args:
        host: the host's name in the fleet.
        hello: the agent's hello, for the GPUs that should be there; None if not seen yet.
        sample: the newest sample.

    Returns:
        Findings, worst first.
    """
    out: list[Finding] = []
    seen = {g.index for g in sample.gpus}
    if hello is not None:
        for info in hello.facts.gpus:
            if info.index not in seen:
                out.append(Finding(Step.GPU, "gpu-lost", Severity.CRITICAL,
                                   f"GPU {info.index} ({info.bus_id or '?'}) is missing from "
                                   "the samples", host, gpu=info.index, ts=sample.ts))
    for gpu in sample.gpus:
        out.extend(_gpu_findings(host, gpu, sample.ts))
    for disk in sample.disks:
        if disk.util is not None and disk.util >= DISK_SATURATED_UTIL:
            out.append(Finding(Step.GPU, "disk-saturated", Severity.WARNING,
                               f"{disk.name} {disk.util:.0f}% busy, queue {disk.aqu_sz or 0:.1f}",
                               host, ts=sample.ts))
    out.sort(key=lambda f: -f.severity.rank)
    return out


def _gpu_findings(host: str, gpu: GpuSample, ts: float) -> list[Finding]:
    out: list[Finding] = []
    if gpu.state is GpuState.LOST:
        name = str(gpu.index) if gpu.index >= 0 else (gpu.bus_id or "?")
        out.append(Finding(Step.GPU, "gpu-lost", Severity.CRITICAL,
                           f"GPU {name} is lost", host, gpu=gpu.index, ts=ts))
        return out
    if gpu.state is GpuState.UNRESPONSIVE:
        out.append(Finding(Step.GPU, "gpu-unresponsive", Severity.WARNING,
                           f"GPU {gpu.index}: probe call hung", host, gpu=gpu.index, ts=ts))
        return out
    busy = gpu.util_pct is not None and gpu.util_pct >= BUSY_UTIL_PCT
    active = set(gpu.clock_reasons) & THROTTLE_REASONS
    if busy and "sw_power_cap" in gpu.clock_reasons:
        active.add("sw_power_cap")
    if active:
        clocks = ""
        if gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz:
            clocks = f" at {gpu.sm_clock_mhz:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
        out.append(Finding(Step.GPU, "clocks-throttled", Severity.WARNING,
                           f"GPU {gpu.index} throttled: {', '.join(sorted(active))}{clocks}",
                           host, gpu=gpu.index, ts=ts))
    if gpu.pcie_width is not None and gpu.pcie_width_max and gpu.pcie_width < gpu.pcie_width_max:
        out.append(Finding(Step.GPU, "pcie-link-downgraded", Severity.WARNING,
                           f"GPU {gpu.index} PCIe x{gpu.pcie_width} (capable "
                           f"x{gpu.pcie_width_max})", host, gpu=gpu.index, ts=ts))
    elif busy and gpu.pcie_gen is not None and gpu.pcie_gen_max and gpu.pcie_gen < gpu.pcie_gen_max:
        out.append(Finding(Step.GPU, "pcie-link-downgraded", Severity.INFO,
                           f"GPU {gpu.index} PCIe Gen{gpu.pcie_gen} under load (capable "
                           f"Gen{gpu.pcie_gen_max})", host, gpu=gpu.index, ts=ts))
    return out


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+|\.\.\.)\): (\d+)")
_OFF_BUS = re.compile(r"fallen off the bus", re.IGNORECASE)
_NCCL_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout")
CRITICAL_XIDS = frozenset({48, 62, 64, 74, 79, 92, 94, 95, 109, 119, 120, 140, 143})


def event_findings(host: str, event: LogEvent) -> list[Finding]:
    """Findings from one log line: the handful of patterns the first cut knows.

    Args:
        host: the host's name in the fleet.
        event: a log line from the agent.

    Returns:
        Zero or more findings for that line.
    """
    line = event.line
    m = _XID.search(line)
    if m:
        xid = int(m.group(2))
        sev = Severity.CRITICAL if xid in CRITICAL_XIDS else Severity.WARNING
        return [Finding(Step.SYSLOG, "xid", sev, f"Xid {xid} on {m.group(1)}", host, xid=xid,
                        evidence=line, ts=event.ts)]
    if _OFF_BUS.search(line):
        return [Finding(Step.SYSLOG, "gpu-fallen-off-bus", Severity.CRITICAL,
                        "a GPU has fallen off the bus", host, evidence=line, ts=event.ts)]
    if _NCCL_TIMEOUT.search(line):
        return [Finding(Step.NCCL, "nccl-timeout", Severity.CRITICAL,
                        "NCCL collective watchdog timeout", host, evidence=line, ts=event.ts)]
    return []
