"""The watcher's own faults, and hosts that keep dropping: findings that are not one host's
outage.

A collector that stalls or dies, or a Prometheus that is down or slow, leaves the hosts
behind it unseen: that says nothing about them.  Each such fault is one finding about the
source ("collector 2", "prometheus"), naming the hosts it leaves unwatched, so it pages once
as a monitoring outage; the hosts themselves read "unknown".

A host that goes down and comes back again and again (a bad cable, a rebooting BMC, sshd
restarted by a watchdog) would page per outage or, once an outage is paged, never again:
three outages within ``FLAP_WINDOW_S`` make one ``flapping`` finding with the count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from probes.analysis.findings import Finding
from probes.analysis.fleet_row import HostStatus
from probes.errors import WatcherFault
from probes.triage import Code, Severity, Step
from probes.wire.events import SourceHealth

FLAP_MIN = 3
"""Outages within ``FLAP_WINDOW_S`` that make a host flapping."""
FLAP_WINDOW_S = 600.0
"""A host flaps while ``FLAP_MIN`` of its outages began within this long."""
MAX_NAMED = 16
"""Hosts a source finding names in its summary's evidence (all are in ``extra["hosts"]``)."""

SOURCE_CODES = frozenset({Code.COLLECTOR_STALLED, Code.COLLECTOR_DIED, Code.SOURCE_DOWN,
                          Code.SOURCE_SLOW})
"""Findings about the watcher itself (one per source, never per host)."""

ACTION_COLLECTOR_STALLED = (
    "A collector process of this console stopped answering (frozen, stopped with SIGSTOP, or "
    "starved of CPU): its hosts are not watched, not down. Check the console machine's load "
    "(uptime, top) and the collector's state (ps -o pid,stat,wchan -p <pid>); the console "
    "restarts it if it stays silent")
ACTION_COLLECTOR_DIED = (
    "A collector process of this console exited and is being restarted: its hosts are not "
    "watched meanwhile, not down. Read its last message in the evidence; if it keeps dying, "
    "check the console machine's memory (dmesg | grep -i oom) and run with --collectors 0")
ACTION_SOURCE_DOWN = (
    "The metrics server does not answer: the hosts it reports are not watched, not down. "
    "Check Prometheus itself (curl <url>/-/ready, its log, its disk) and the network to it; "
    "watch critical hosts over SSH (--inventory) meanwhile")
ACTION_SOURCE_SLOW = (
    "The metrics server answers slower than the console refreshes: the hosts' numbers are "
    "late, not gone. Check Prometheus's load (its query log, rule evaluation, disk), or raise "
    "--refresh")
ACTION_FLAPPING = (
    "The host keeps dropping off and coming back: check its network link (ethtool, switch "
    "port errors), its power and BMC log (ipmitool sel list), and whether sshd or the host is "
    "restarting (journalctl -u ssh, last -x); drain it from training until it holds")

_VERDICT: Mapping[WatcherFault, tuple[str, str]] = {
    WatcherFault.COLLECTOR_STALLED: ("COLLECTOR STALLED", ACTION_COLLECTOR_STALLED),
    WatcherFault.COLLECTOR_DIED: ("COLLECTOR DIED", ACTION_COLLECTOR_DIED),
    WatcherFault.SOURCE_DOWN: ("METRICS SOURCE DOWN", ACTION_SOURCE_DOWN),
    WatcherFault.SOURCE_SLOW: ("METRICS SOURCE SLOW", ACTION_SOURCE_SLOW),
}


def follow_source(status: HostStatus, watch: SourceHealth | None, item: SourceHealth
                  ) -> tuple[HostStatus, SourceHealth | None]:
    """A host's status and source fault after ``item``: one onset for a fault even as it
    changes (stalled, then died); seen again, a stale host is judged afresh (its silence
    was the source's)."""
    if item.fault is None:
        return (HostStatus.STREAMING if status is HostStatus.STALE else status), None
    if item.fault is WatcherFault.COLLECTOR_DIED:
        status = HostStatus.CONNECTING  # its session died with the collector
    if watch is not None and watch.source == item.source:
        item = replace(item, ts=watch.ts)
    return status, item


def unknown_reason(health: SourceHealth) -> str:
    """A host's reason while its source is at fault: the source's words, said of the source."""
    word = health.fault.value.split("-", 1)[1] if health.fault is not None else "fine"
    return f"{health.source} {word}: {health.reason}" if health.reason else \
        f"{health.source} {word}"


def source_findings(unseen: Mapping[str, SourceHealth],
                    hosts: Iterable[str] | None = None) -> list[Finding]:
    """One critical finding per source at fault, from each unseen host's last health.

    ``hosts`` limits them to the sources that cover at least one of those hosts (a host's
    triage shows the fault that hides it).
    """
    by_source: dict[str, list[tuple[str, SourceHealth]]] = {}
    for host, health in unseen.items():
        by_source.setdefault(health.source, []).append((host, health))
    wanted = None if hosts is None else set(hosts)
    out = []
    for source, lost in by_source.items():
        if wanted is not None and not any(h in wanted for h, _ in lost):
            continue
        out.append(_source_finding(source, lost))
    return out


def _source_finding(source: str, lost: Sequence[tuple[str, SourceHealth]]) -> Finding:
    newest = max((h for _, h in lost), key=lambda h: h.ts)
    fault = newest.fault or WatcherFault.SOURCE_DOWN
    verdict, action = _VERDICT[fault]
    names = sorted(h for h, _ in lost)
    shown = ", ".join(names[:MAX_NAMED]) + \
        (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
    many = "host" if len(names) == 1 else "hosts"
    return Finding(Step.GPU, Code(fault.value), Severity.CRITICAL,
                   f"{verdict} · {source}: {len(names)} {many} not watched (unknown, not down)",
                   source, evidence=f"{newest.reason}; not watched: {shown}",
                   ts=min(h.ts for _, h in lost), action=action,
                   extra={"hosts": names, "source": source, "reason": newest.reason})


def flapping_finding(host: str, onsets: Iterable[float], now: float) -> Finding | None:
    """``flapping`` when ``FLAP_MIN`` or more of the host's outages began within
    ``FLAP_WINDOW_S`` before ``now``; its count is the outages in the window."""
    recent = sorted(t for t in onsets if 0.0 <= now - t <= FLAP_WINDOW_S)
    if len(recent) < FLAP_MIN:
        return None
    span = max(recent[-1] - recent[0], 1.0)
    minutes = f"{span / 60:.0f} min" if span >= 90 else f"{span:.0f} s"
    return Finding(Step.GPU, Code.HOST_FLAPPING, Severity.CRITICAL,
                   f"FLAPPING · {len(recent)} outages in {minutes}: the host keeps dropping "
                   "off and coming back", host,
                   evidence=f"{len(recent)} outages began within {FLAP_WINDOW_S / 60:g} min",
                   ts=recent[0], action=ACTION_FLAPPING, count=len(recent),
                   extra={"outages": len(recent), "window_s": FLAP_WINDOW_S})
