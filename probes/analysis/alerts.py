"""Alerts: which findings deserve a notification now, and the operator's hook command.

A finding alerts once when it appears.  It may alert again only after it has been gone for
``clear_after_s`` (hysteresis), so a temperature hovering at its threshold, or a link that
retrains every few seconds, pages once rather than a hundred times.  The hook is an argument
list from the settings file, run without a shell; the finding reaches it in environment
variables and as JSON on stdin, never inside a command string (``probes.analysis.hook``
runs it, within bounds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from probes.analysis.findings import Finding
from probes.triage import Severity


@dataclass(frozen=True)
class AlertPolicy:
    """How findings become alerts; settable under ``alerts:`` in the settings YAML."""

    notify: bool = True
    """In-app notifications (off for tests that compare screens)."""
    min_severity: Severity = Severity.WARNING
    clear_after_s: float = 120.0
    """A finding must stay away this long before it can alert again."""
    bell: bool = True
    hook: tuple[str, ...] = ()
    """Command and arguments run for every alert (empty: none)."""
    hook_timeout_s: float = 10.0
    """The hook and every process it started get this long in all, then are killed."""
    hook_at_once: int = 4
    """Hook runs at the same time; more wait."""
    hook_waiting: int = 16
    """Hook runs that may wait for a slot; beyond that they are dropped, with a note."""


@dataclass(frozen=True)
class Alert:
    """One finding that crossed into alerting."""

    finding: Finding
    at: float
    """Console wall time the alert was raised."""

    def to_json(self) -> dict[str, object]:
        """The document a hook reads on stdin."""
        f = self.finding
        return {"version": 1, "raised_at": self.at, "host": f.host, "step": f.step.value,
                "code": f.code, "severity": f.severity.value, "summary": f.summary,
                "gpu": f.gpu, "xid": f.xid, "evidence": f.evidence, "action": f.action,
                "ts": f.ts, "source": f.source, "count": f.count}

    def environment(self) -> dict[str, str]:
        """``RIGWATCH_*`` variables for the hook (empty strings for unknown values)."""
        f = self.finding
        values: Mapping[str, object | None] = {
            "HOST": f.host, "STEP": f.step.value, "CODE": f.code,
            "SEVERITY": f.severity.value, "SUMMARY": f.summary, "GPU": f.gpu, "XID": f.xid,
            "ACTION": f.action, "TS": f.ts}
        return {f"RIGWATCH_{k}": "" if v is None else str(v) for k, v in values.items()}


AlertKey = tuple[str, tuple[str, str, int | None, int | None]]


@dataclass
class AlertTracker:
    """Remembers what has alerted, so each incident alerts once per appearance."""

    policy: AlertPolicy = field(default_factory=AlertPolicy)
    _active: dict[AlertKey, float] = field(default_factory=dict)
    """Alerted findings and when each was last seen."""

    def update(self, findings: Iterable[Finding], now: float) -> list[Alert]:
        """The alerts to raise for the findings present at ``now``."""
        new: list[Alert] = []
        seen: set[AlertKey] = set()
        for f in findings:
            if f.severity.rank < self.policy.min_severity.rank:
                continue
            key = (f.host, f.key)
            seen.add(key)
            if key not in self._active:
                new.append(Alert(f, now))
            self._active[key] = now
        for key, last in list(self._active.items()):
            if key not in seen and now - last >= self.policy.clear_after_s:
                del self._active[key]
        return new

    @property
    def active(self) -> int:
        """Incidents that have alerted and not yet cleared."""
        return len(self._active)
