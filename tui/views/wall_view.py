"""The fleet wall's view model from the fleet state: one cell per GPU, by the chosen metric.

Every cell's verdict and temperature level come from the host's fleet row, which the core
judged (``probes.analysis.judge``); nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.analysis.judge import GpuVerdict
from probes.fleet_state import FleetRow, FleetState, HostState, HostStatus
from probes.wire.samples import GpuSample
from widgets._wall_layout import WallGpu, WallHost, WallView
from widgets.fleet_table import is_old, row_reason, timing_text

_STATUS = {HostStatus.STREAMING: "streaming", HostStatus.STALE: "stale",
           HostStatus.CONNECTING: "connecting", HostStatus.UNKNOWN: "unknown"}


def _value(g: GpuSample | None, metric: str) -> float | None:
    if g is None:
        return None
    if metric == "mem":
        return _mem_pct(g)
    if metric == "temp":
        return g.temp_c
    if metric == "util":
        return g.util_pct
    return None


def _mem_pct(g: GpuSample) -> float | None:
    if g.mem_used_mib is None or not g.mem_total_mib:
        return None
    return 100.0 * g.mem_used_mib / g.mem_total_mib


_MISSING = WallGpu(None, GpuVerdict.MISSING)
_new_gpu = tuple.__new__
"""``WallGpu``'s fields straight into the tuple: its generated ``__new__`` is a Python call
per GPU, and the wall shown at a thousand hosts builds eight thousand."""


def wall_host(state: HostState, metric: str, now: float, row: FleetRow | None = None) -> WallHost:
    """One host's cells; ``row`` is its fleet row at ``now`` when the caller has it already
    (computing it again costs as much as the rest of the cell)."""
    row = row if row is not None else state.row(now)
    last = state.last
    judged = row.gpus
    if last is None or metric == "status":
        # without a sample, or on the status wall, no GPU has a value
        gpus = [_new_gpu(WallGpu, (None, j.verdict, j.temp, j.mem_high)) for j in judged]
    else:
        samples = {g.index: g for g in last.gpus}
        get = samples.get
        if metric == "mem":
            gpus = [_new_gpu(WallGpu, (None if (g := get(j.index)) is None else _mem_pct(g),
                                       j.verdict, j.temp, j.mem_high)) for j in judged]
        elif metric == "temp":  # the field read here, not through ``_value`` a GPU
            gpus = [_new_gpu(WallGpu, (None if (g := get(j.index)) is None else g.temp_c,
                                       j.verdict, j.temp, j.mem_high)) for j in judged]
        elif metric == "util":
            gpus = [_new_gpu(WallGpu, (None if (g := get(j.index)) is None else g.util_pct,
                                       j.verdict, j.temp, j.mem_high)) for j in judged]
        else:
            gpus = [_new_gpu(WallGpu, (_value(get(j.index), metric), j.verdict, j.temp,
                                       j.mem_high)) for j in judged]
    expected = row.gpus_expected or 0
    # before the first sample nothing is judged: the slots the inventory promises read missing
    if expected > len(gpus):
        gpus += [_MISSING] * (expected - len(gpus))
    tags = state.spec.tags
    worst = row.worst
    return WallHost(state.name, tags[0] if tags else "",
                    _STATUS.get(row.status, "down"), tuple(gpus),
                    worst.value if worst else None, _note(row, state.reach.down_reason))


def _note(row: FleetRow, down_reason: str | None) -> str:
    """The status line's tail: the reason and timing of a host that is not streaming, else
    its worst finding (the same words as the table's detail line)."""
    reason = row_reason(row, down_reason)
    if reason and is_old(row):
        timing = timing_text(row)
        return f"{reason} · {timing}" if timing else reason
    return row.headline or row.worst_summary or ""


KeptHosts = dict[str, tuple[FleetRow, str, str | None, WallHost]]
"""Each host's cells as last built, with the row, metric and session reason they were built
from (``wall_view``'s ``kept``)."""


def wall_view(fleet: FleetState, metric: str, now: float,
              names: list[str] | None = None,
              rows: Sequence[FleetRow] | None = None, empty: str = "no hosts yet",
              kept: KeptHosts | None = None) -> WallView:
    """The wall for ``names``, or for the hosts of ``rows`` (their fleet rows at ``now``,
    in the order shown), or for every host in inventory order; ``empty`` says why there
    are none.

    ``kept`` (with ``rows``): a host whose row is the same object as when its cells were
    last built (and the metric and its session's reason) keeps them.  The console hands
    back a host's row unchanged while nothing was folded for it, or while it is off the
    wall's screen and its numbers wait (``FleetRows.focus``): its readings off screen are
    then not read again (a v2 tick's GPUs built for it, every tick, at a thousand hosts),
    and come with its row when it comes on screen."""
    limits = fleet.limits.detectors
    margins = (limits.temp_margin_c, limits.temp_warm_margin_c)
    if rows is not None:
        states = fleet.hosts
        if kept is None:
            cells = tuple(wall_host(states[r.name], metric, now, r) for r in rows)
        else:
            out = []
            for r in rows:
                state = states[r.name]
                reason = state.reach.down_reason
                was = kept.get(r.name)
                if was is not None and was[0] is r and was[1] == metric and was[2] == reason:
                    out.append(was[3])
                    continue
                host = wall_host(state, metric, now, r)
                kept[r.name] = (r, metric, reason, host)
                out.append(host)
            cells = tuple(out)
        return WallView(metric, cells, margins, empty, limits.mem_high_pct)
    hosts = [fleet.hosts[n] for n in names] if names is not None else fleet.hosts.values()
    return WallView(metric, tuple(wall_host(h, metric, now) for h in hosts), margins, empty,
                    limits.mem_high_pct)
