"""The fleet wall's view model from the fleet state: one cell per GPU, by the chosen metric."""

from __future__ import annotations

from collections.abc import Sequence

from probes.fleet_state import FleetRow, FleetState, HostState, HostStatus
from probes.wire.samples import GpuSample, GpuState
from widgets.fleet_wall import WallGpu, WallHost, WallView

METRICS = ("mem", "temp", "util", "status")
_STATUS = {HostStatus.STREAMING: "streaming", HostStatus.STALE: "stale",
           HostStatus.CONNECTING: "connecting"}
_THROTTLE_CODES = frozenset({"clocks-throttled", "throttled-while-busy"})
_LEAK_CODES = frozenset({"memory-leak"})


def _value(g: GpuSample, metric: str) -> float | None:
    if metric == "mem":
        if g.mem_used_mib is None or not g.mem_total_mib:
            return None
        return 100.0 * g.mem_used_mib / g.mem_total_mib
    if metric == "temp":
        return g.temp_c
    if metric == "util":
        return g.util_pct
    return None


def wall_host(state: HostState, metric: str, now: float, row: FleetRow | None = None) -> WallHost:
    """One host's cells; ``row`` is its fleet row at ``now`` when the caller has it already
    (computing it again costs as much as the rest of the cell)."""
    row = row if row is not None else state.row(now)
    found = state.findings()
    throttled = {f.gpu for f in found if f.code in _THROTTLE_CODES}
    leaking = {f.gpu for f in found if f.code in _LEAK_CODES}
    gpus = []
    for g in state.last.gpus if state.last else ():
        if g.index < 0:
            continue
        if g.state is GpuState.LOST:
            word = "lost"
        elif g.state is GpuState.UNRESPONSIVE:
            word = "unresponsive"
        elif g.index in leaking:
            word = "leaking"
        elif g.index in throttled:
            word = "throttled"
        else:
            word = "ok"
        gpus.append(WallGpu(_value(g, metric), word))
    expected = row.gpus_expected or 0
    gpus += [WallGpu(None, "lost")] * max(0, expected - len(gpus))  # dropped off the bus
    return WallHost(state.name, state.spec.tags[0] if state.spec.tags else "",
                    _STATUS.get(row.status, "down"), tuple(gpus),
                    row.worst.value if row.worst else None)


def wall_view(fleet: FleetState, metric: str, now: float,
              names: list[str] | None = None,
              rows: Sequence[FleetRow] | None = None) -> WallView:
    """The wall for ``names``, or for the hosts of ``rows`` (their fleet rows at ``now``,
    in the order shown), or for every host in inventory order."""
    if rows is not None:
        return WallView(metric, tuple(wall_host(fleet.hosts[r.name], metric, now, r)
                                      for r in rows))
    hosts = [fleet.hosts[n] for n in names] if names is not None else fleet.hosts.values()
    return WallView(metric, tuple(wall_host(h, metric, now) for h in hosts))
