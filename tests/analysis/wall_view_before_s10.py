"""The fleet wall's view model as it was before session 10 (main ``001268f``): the reference
``tests/tui/test_wall_view_equivalent.py`` holds ``tui.views.wall_view`` to, host by host and
cell by cell, and ``tests/bench/bench_wall_view.py`` times against.

``wall_view``, ``wall_host`` and ``_note`` copied unchanged, with ``WallGpu`` and ``WallHost``
as they were (frozen dataclasses) renamed ``WallGpuBefore``/``WallHostBefore``; ``WallView``
as ``WallViewBefore``. Not imported by the console."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from probes.analysis.judge import GpuVerdict, TempLevel
from probes.fleet_state import FleetRow, FleetState, HostState, HostStatus
from probes.wire.samples import GpuSample
from widgets.fleet_table import FleetLine, is_old, reason_of, timing_text


@dataclass(frozen=True)
class WallGpuBefore:
    """One GPU's reading for the wall's current metric."""

    value: float | None
    """Memory used %, temperature °C or utilisation % (whichever the view shows); unused for
    ``status``; None when the GPU reported nothing."""
    state: GpuVerdict = GpuVerdict.OK
    """The GPU's verdict from the core, the same word every screen shows."""
    temp: TempLevel = TempLevel.UNKNOWN
    """Its temperature against its own slowdown threshold."""
    mem_high: bool = False
    """Its memory used at or above the operator's ``mem_high_pct`` (the core's verdict)."""


@dataclass(frozen=True)
class WallHostBefore:
    """A host's cells; ``status`` decides whether its GPU readings are shown at all."""

    name: str
    tag: str
    status: str
    """``streaming``, ``stale``, ``down`` or ``connecting``."""
    gpus: tuple[WallGpuBefore, ...] = ()
    worst: str | None = None
    """Worst open finding: ``critical``, ``warning``, ``info`` or None."""
    note: str = ""
    """What the status line adds for this host: why it is down and when it is retried, or
    its worst finding led by the verdict."""



@dataclass(frozen=True)
class WallViewBefore:
    """Everything the wall draws; replaced as a whole, so an equal one costs no redraw."""

    metric: str = "mem"
    """``mem``, ``temp``, ``util`` or ``status``."""
    hosts: tuple[WallHostBefore, ...] = ()
    temp_margins: tuple[float, float] = field(default=(5.0, 15.0))
    """°C below each board's slowdown threshold at which it reads hot, warm (the legend)."""
    empty: str = "no hosts yet"
    """What the wall says with no hosts to show (a filter that matches none says so)."""
    mem_high_pct: float = 95.0
    """The operator's ``mem_high_pct``, for the legend only (cells carry their verdict)."""


_STATUS = {HostStatus.STREAMING: "streaming", HostStatus.STALE: "stale",
           HostStatus.CONNECTING: "connecting", HostStatus.UNKNOWN: "unknown"}


def _value(g: GpuSample | None, metric: str) -> float | None:
    if g is None:
        return None
    if metric == "mem":
        if g.mem_used_mib is None or not g.mem_total_mib:
            return None
        return 100.0 * g.mem_used_mib / g.mem_total_mib
    if metric == "temp":
        return g.temp_c
    if metric == "util":
        return g.util_pct
    return None


def wall_host_before(state: HostState, metric: str, now: float,
                     row: FleetRow | None = None) -> WallHostBefore:
    """One host's cells; ``row`` is its fleet row at ``now`` when the caller has it already
    (computing it again costs as much as the rest of the cell)."""
    row = row if row is not None else state.row(now)
    samples = {g.index: g for g in state.last.gpus} if state.last else {}
    gpus = [WallGpuBefore(_value(samples.get(j.index), metric), j.verdict, j.temp, j.mem_high)
            for j in row.gpus]
    expected = row.gpus_expected or 0
    # before the first sample nothing is judged: the slots the inventory promises read missing
    gpus += [WallGpuBefore(None, GpuVerdict.MISSING)] * max(0, expected - len(gpus))
    return WallHostBefore(state.name, state.spec.tags[0] if state.spec.tags else "",
                    _STATUS.get(row.status, "down"), tuple(gpus),
                    row.worst.value if row.worst else None, _note(row, state.reach.down_reason))


def _note(row: FleetRow, down_reason: str | None) -> str:
    """The status line's tail: the reason and timing of a host that is not streaming, else
    its worst finding (the same words as the table's detail line)."""
    line = FleetLine(row, down_reason)
    reason = reason_of(line)
    if reason and is_old(row):
        timing = timing_text(row)
        return f"{reason} · {timing}" if timing else reason
    return row.headline or row.worst_summary or ""


def wall_view_before(fleet: FleetState, metric: str, now: float,
                     names: list[str] | None = None,
                     rows: Sequence[FleetRow] | None = None,
                     empty: str = "no hosts yet") -> WallViewBefore:
    """The wall for ``names``, or for the hosts of ``rows`` (their fleet rows at ``now``,
    in the order shown), or for every host in inventory order; ``empty`` says why there
    are none."""
    limits = fleet.limits.detectors
    margins = (limits.temp_margin_c, limits.temp_warm_margin_c)
    if rows is not None:
        return WallViewBefore(metric, tuple(wall_host_before(fleet.hosts[r.name], metric, now, r)
                                            for r in rows), margins, empty, limits.mem_high_pct)
    hosts = [fleet.hosts[n] for n in names] if names is not None else fleet.hosts.values()
    return WallViewBefore(metric, tuple(wall_host_before(h, metric, now) for h in hosts),
                          margins, empty, limits.mem_high_pct)
