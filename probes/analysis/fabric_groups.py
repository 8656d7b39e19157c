"""Several hosts failing together behind one switch or in one rack: one finding, not N.

Hosts whose IB ports went down, trained low or count errors through the same leaf switch
within ``fabric_group_window_s`` make one ``switch-suspect`` naming the switch and the hosts;
hosts of one rack throttling or running hot together make one ``rack-suspect`` (power,
cooling).  The members' own findings stay on their hosts (fleet row, host screen); here,
where the fleet's incidents are decided, they are replaced by the group, so triage leads with
the switch instead of N hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from probes.analysis.fabric_map import FabricMap
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.triage import Code, Severity, Step

SWITCH_CODES = frozenset({Code.IB_PORT_DOWN, Code.IB_LINK_DEGRADED, Code.IB_ERRORS_RISING})
RACK_CODES = frozenset({Code.CLOCKS_THROTTLED, Code.THROTTLED_WHILE_BUSY,
                        Code.TEMP_NEAR_SLOWDOWN, Code.POWER_PINNED, Code.CPU_THERMAL})
ACTION_SWITCH = ("Check the leaf switch first: its port counters and logs, its power and "
                 "fans, its uplinks (ibswitches, ibqueryerrors, the switch's own CLI); several "
                 "hosts failing behind one switch at once is rarely N bad cables")
ACTION_RACK = ("Check the rack's power (PDU, breakers, power capping) and cooling (inlet air, "
               "CRAH, blanking panels) before the hosts: many throttling together share a cause")


def _ports(f: Finding) -> list[str | None]:
    ports = f.details.ports
    if ports:
        return [p.split("/")[0] for p in ports]
    return [None]


def _cluster(members: list[Finding], window_s: float) -> list[Finding]:
    """The members whose onsets lie within ``window_s`` of the first of the run that spans
    the most hosts (every member of that span, not just those that made the count)."""
    ordered = sorted(members, key=lambda f: f.ts or 0.0)
    best, best_start, start = 0, 0, 0
    for end in range(len(ordered)):
        while (ordered[end].ts or 0.0) - (ordered[start].ts or 0.0) > window_s:
            start += 1
        hosts = len({f.host for f in ordered[start:end + 1]})
        if hosts > best:
            best, best_start = hosts, start
    t0 = ordered[best_start].ts or 0.0 if ordered else 0.0
    return [f for f in ordered[best_start:] if (f.ts or 0.0) - t0 <= window_s]


def _group(findings: Sequence[Finding], codes: frozenset[Code],
           where: Callable[[Finding], list[str]], limits: DetectorLimits
           ) -> list[tuple[str, list[Finding]]]:
    by: dict[str, list[Finding]] = {}
    for f in findings:
        if f.code in codes:
            for place in dict.fromkeys(where(f)):
                by.setdefault(place, []).append(f)
    out = []
    for place, members in sorted(by.items()):
        run = _cluster(members, limits.fabric_group_window_s)
        if len({f.host for f in run}) >= limits.fabric_group_min_hosts:
            out.append((place, run))
    return out


def _suspect(code: Code, kind: str, place: str, run: list[Finding], action: str,
             what: str) -> Finding:
    hosts = list(dict.fromkeys(f.host for f in sorted(run, key=lambda f: f.ts or 0.0)))
    first = min(run, key=lambda f: f.ts or 0.0)
    worst = max((f.severity for f in run), key=lambda s: s.rank)
    shown = ", ".join(hosts[:6]) + (f" and {len(hosts) - 6} more" if len(hosts) > 6 else "")
    return Finding(Step.GPU, code, worst if worst is not Severity.INFO else Severity.WARNING,
                   f"{kind} {place}: {len(hosts)} hosts {what} together ({shown})", first.host,
                   evidence="; ".join(f"{f.host}: {f.summary}" for f in _worst_per_host(run)[:8]
                                      )[:1000],
                   ts=first.ts, action=action, clock=first.clock,
                   extra={kind: place, "hosts": hosts,
                          "codes": sorted({str(f.code) for f in run})})


def _worst_per_host(run: list[Finding]) -> list[Finding]:
    """Each host's worst member (its earliest among equals), hosts in order of onset."""
    out: dict[str, Finding] = {}
    for f in run:
        kept = out.get(f.host)
        if kept is None or f.severity.rank > kept.severity.rank:
            out[f.host] = f
    return list(out.values())


def grouped(findings: Sequence[Finding], where: FabricMap,
            limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """``findings`` with each switch's and rack's joint failures folded into one finding."""
    def switches(f: Finding) -> list[str]:
        return [s for hca in _ports(f) if (s := where.switch_of(f.host, hca)) is not None]

    def racks(f: Finding) -> list[str]:
        rack = where.rack_of(f.host)
        return [rack] if rack is not None else []

    out = list(findings)
    for code, kind, codes, place_of, action, what in (
            (Code.SWITCH_SUSPECT, "switch", SWITCH_CODES, switches, ACTION_SWITCH,
             "lost IB ports or count link errors"),
            (Code.RACK_SUSPECT, "rack", RACK_CODES, racks, ACTION_RACK,
             "throttle or run hot")):
        while groups := _group(out, codes, place_of, limits):
            place, run = groups[0]  # a host on two switches counts for the first only
            gone = {id(f) for f in run}
            out = [f for f in out if id(f) not in gone]
            out.append(_suspect(code, kind, place, run, action, what))
    return out
