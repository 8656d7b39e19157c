"""How a host's kernel log is read, as triage's second step needs to know it.

A kernel log the agent cannot read leaves the system-log step blind: that is a finding of
its own, and triage's "what was checked" says how the log was read (or why not).
"""

from __future__ import annotations

from probes.analysis.findings import Finding
from probes.triage import Code, Severity, Step
from probes.wire.samples import KERNEL_SOURCE, LogSourceState, LogSourceStatus

KERNEL_LOG_UNREADABLE = Code.KERNEL_LOG_UNREADABLE
ACTION_KERNEL_LOG = ("Read the kernel log by hand (sudo dmesg -T | grep -E 'NVRM|AER|Out of "
                     "memory') until the agent's user may read it")


def kernel_log_summary(src: LogSourceState | None, simulated: bool) -> str:
    """How this host's kernel log is read, for triage's "what was checked"."""
    if src is None:
        return "simulated" if simulated else "not reported by the agent"
    if src.state is LogSourceStatus.OK:
        read = f"read via {src.via}" if src.via else "read"
        return f"{read} ({src.note})" if src.note else read
    if src.state is LogSourceStatus.OFF:
        return f"not read: {src.detail}" if src.detail else "not read (kernel log off)"
    if src.state is LogSourceStatus.SIMULATED:
        return "simulated"
    word = "refused" if src.state is LogSourceStatus.DENIED else "unavailable"
    return f"{word}: {src.fix}" if src.fix else f"{word}: {src.detail or 'no source'}"


def log_source_findings(host: str, src: LogSourceState | None) -> list[Finding]:
    """A kernel log the agent cannot read leaves triage's second step blind: say so."""
    if src is None or src.state not in (LogSourceStatus.DENIED, LogSourceStatus.UNAVAILABLE):
        return []
    word = "refused" if src.state is LogSourceStatus.DENIED else "unavailable"
    action = ACTION_KERNEL_LOG + (f"; to let the agent read it: {src.fix}" if src.fix else "")
    return [Finding(Step.SYSLOG, KERNEL_LOG_UNREADABLE, Severity.WARNING,
                    f"kernel log {word}: Xid, AER and OOM-killer lines cannot be seen",
                    host, evidence=src.detail or None, ts=src.ts, action=action,
                    source=KERNEL_SOURCE)]
