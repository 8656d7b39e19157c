"""Alerts: which findings deserve a notification now, and the operator's hook command.

A finding alerts once when it appears.  It may alert again only after it has been gone for
``clear_after_s`` (hysteresis), so a temperature hovering at its threshold, or a link that
retrains every few seconds, pages once rather than a hundred times.  The hook is an argument
list from the settings file, run without a shell; the finding reaches it in environment
variables and as JSON on stdin, never inside a command string (``probes.analysis.hook``
runs it, within bounds).

A host that cannot be watched alerts once per outage: its reachability findings (unreachable,
then auth-failed on the next retry …) share one alert key.  An outage (a host down, a fault
of the watcher itself, the fleet down, a host flapping) is over when its finding is gone: its
end is sent as a recovery, and the next outage pages again however soon it comes.  A host
whose outages come too often to page each is ``flapping``: that finding pages once, with the
count, and its outages page no more until it holds.  A changed host key alerts on its own, as
possible interception.  When most of the fleet goes down in one update (a rack's power, the
bastion, the console's own network) that is one grouped alert for host ``fleet``, "9 of 9
hosts down", instead of nine pages.  A collector or a Prometheus at fault is one finding about
the source (``probes.analysis.watcher``): one page, never one per host it hides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from probes.analysis.findings import Finding
from probes.analysis.reachability import DOWN_CODES
from probes.analysis.watcher import SOURCE_CODES
from probes.triage import Code, Severity, Step

MAX_NAMED = 32
"""Hosts a grouped alert names in its evidence (all are in ``extra["hosts"]``)."""
FLEET_HOST = "fleet"
"""The host name of a grouped alert about the whole fleet."""
GROUPED_CODES = DOWN_CODES - {Code.HOST_KEY_CHANGED}
"""Down findings a fleet-wide outage groups; a changed key always alerts on its own."""
OUTAGE_CODES = GROUPED_CODES | SOURCE_CODES | {Code.FLEET_DOWN, Code.HOST_FLAPPING}
"""Alerts about something being out: each pages once per outage, and its end is a recovery."""
ACTION_FLEET_DOWN = ("Many hosts at once is rarely the hosts: check this console's own network "
                     "and any jump host or bastion (ssh -v to one host), then power and the "
                     "rack's switch")


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
    group_share: float = 1.0
    """Down hosts, as a share of the fleet, that make one grouped "fleet" alert."""
    group_min_hosts: int = 2
    """Fewer down hosts than this always alert one by one."""


AlertEvent = Literal["alert", "recovery"]


@dataclass(frozen=True)
class Alert:
    """One finding that crossed into alerting, or the end of an outage that did."""

    finding: Finding
    at: float
    """Console wall time the alert was raised."""
    event: AlertEvent = "alert"
    """``recovery``: the outage paged before is over (the finding is its ``recovered`` mark,
    ``extra["recovers"]`` the code that paged)."""

    def to_json(self) -> dict[str, object]:
        """The document a hook reads on stdin."""
        f = self.finding
        return {"version": 1, "event": self.event, "raised_at": self.at, "host": f.host,
                "step": f.step.value, "code": f.code, "severity": f.severity.value,
                "summary": f.summary, "gpu": f.gpu, "xid": f.xid, "evidence": f.evidence,
                "action": f.action, "ts": f.ts, "source": f.source, "count": f.count,
                "recovers": f.details.recovers}

    def environment(self) -> dict[str, str]:
        """``RIGWATCH_*`` variables for the hook (empty strings for unknown values)."""
        f = self.finding
        values: Mapping[str, object | None] = {
            "HOST": f.host, "STEP": f.step.value, "CODE": f.code,
            "SEVERITY": f.severity.value, "SUMMARY": f.summary, "GPU": f.gpu, "XID": f.xid,
            "ACTION": f.action, "TS": f.ts, "EVENT": self.event,
            "RECOVERS": f.details.recovers}
        return {f"RIGWATCH_{k}": "" if v is None else str(v) for k, v in values.items()}


AlertKey = tuple[str, tuple[str, str, int | None, int | None]]
_REACHABILITY_KEY = (Step.GPU.value, "reachability", None, None)
_WATCHER_KEY = (Step.GPU.value, "watcher", None, None)
_FLEET_KEY: AlertKey = (FLEET_HOST, (Step.GPU.value, Code.FLEET_DOWN.value, None, None))


def alert_key(f: Finding) -> AlertKey:
    """What makes an alert the same alert: one per host outage, whatever each retry says."""
    if f.code in GROUPED_CODES:
        return (f.host, _REACHABILITY_KEY)
    if f.code in SOURCE_CODES:  # stalled, then died: one outage of the source
        return (f.host, _WATCHER_KEY)
    return (f.host, f.key)


def _lasted(seconds: float) -> str:
    s = max(0.0, seconds)
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def recovery_finding(paged: Finding, now: float) -> Finding:
    """The mark of an outage's end: what paged, and how long it lasted."""
    lasted = now - paged.ts if paged.ts is not None else None
    how_long = f" after {_lasted(lasted)}" if lasted is not None else ""
    verdict = paged.summary.split(" · ", 1)[0]
    return Finding(paged.step, Code.RECOVERED, Severity.INFO,
                   f"RECOVERED · {verdict} over{how_long}", paged.host,
                   evidence=f"was: {paged.summary}", ts=now, gpu=paged.gpu,
                   extra={"recovers": paged.code, "onset": paged.ts, "lasted_s": lasted})


def fleet_down_finding(down: list[Finding], hosts: int) -> Finding:
    """The grouped alert's finding: how many hosts, which, and since when."""
    names = sorted({f.host for f in down})
    onsets = [f.ts for f in down if f.ts is not None]
    shown = ", ".join(names[:MAX_NAMED]) + \
        (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
    return Finding(Step.GPU, Code.FLEET_DOWN, Severity.CRITICAL,
                   f"{len(names)} of {hosts} hosts down", FLEET_HOST,
                   evidence=f"down: {shown}", ts=min(onsets) if onsets else None,
                   action=ACTION_FLEET_DOWN, extra={"hosts": names, "of": hosts})


@dataclass
class AlertTracker:
    """Remembers what has alerted, so each incident alerts once per appearance."""

    policy: AlertPolicy = field(default_factory=AlertPolicy)
    _active: dict[AlertKey, float] = field(default_factory=dict)
    """Alerted findings and when each was last seen."""
    _paged: dict[AlertKey, Finding] = field(default_factory=dict)
    """Outages that paged and are not over: their end is a recovery."""

    def update(self, findings: Iterable[Finding], now: float,
               hosts: int | None = None) -> list[Alert]:
        """The alerts to raise for the findings present at ``now``.

        ``hosts`` is the fleet's size, for the grouped alert; without it nothing is grouped
        (a healthy host has no finding, so the findings cannot say how big the fleet is).
        """
        new: list[Alert] = []
        seen: set[AlertKey] = set()
        findings = list(findings)
        flapping = {f.host for f in findings if f.code == Code.HOST_FLAPPING}
        for f in findings:
            if f.severity.rank < self.policy.min_severity.rank:
                continue
            key = alert_key(f)
            if key in seen:
                continue
            seen.add(key)
            if f.code in GROUPED_CODES and f.host in flapping:
                continue  # counted by the host's one flapping alert
            if key not in self._active:
                new.append(Alert(f, now))
            self._active[key] = now
        new = self._grouped(new, findings, now, hosts, seen)
        self._paged.update((alert_key(a.finding), a.finding) for a in new
                           if a.finding.code in OUTAGE_CODES)
        for key, last in list(self._active.items()):
            if key in seen:
                continue
            paged = self._paged.pop(key, None)
            if paged is not None:  # the outage is over: say so; the next one pages again
                del self._active[key]
                if not (paged.code in GROUPED_CODES and paged.host in flapping):
                    new.append(Alert(recovery_finding(paged, now), now, "recovery"))
            elif key[1] in (_REACHABILITY_KEY, _WATCHER_KEY) or now - last >= \
                    self.policy.clear_after_s:
                del self._active[key]
        return new

    def _grouped(self, new: list[Alert], findings: list[Finding], now: float,
                 hosts: int | None, seen: set[AlertKey]) -> list[Alert]:
        """Many hosts down at once: their new alerts become one ``fleet`` alert."""
        if hosts is None:
            return new
        down = [f for f in findings if f.code in DOWN_CODES]
        count = len({f.host for f in down})
        least = max(self.policy.group_min_hosts, 1)
        # it starts at the share and lasts while the group stays a group: a fleet coming
        # back host by host is one outage ending, not a recovery and seven new pages
        if count < least or (count < self.policy.group_share * hosts
                             and _FLEET_KEY not in self._active):
            return new
        seen.add(_FLEET_KEY)
        fresh = _FLEET_KEY not in self._active
        self._active[_FLEET_KEY] = now
        # Hosts that join an outage already paged for are part of it, not news.
        kept = [a for a in new if a.finding.code not in GROUPED_CODES]
        if not fresh:
            return kept
        return [Alert(fleet_down_finding(down, max(hosts, count)), now), *kept]

    @property
    def active(self) -> int:
        """Incidents that have alerted and not yet cleared."""
        return len(self._active)
