"""The host panels' view models, computed from one host's state: pure, no Textual widgets.

Charts read the tiered history with a bounded number of points (what a panel is wide), so a
24-hour window costs the same as five minutes.
"""

from __future__ import annotations

from probes.fleet_state import HostState
from probes.history import disk_key, gpu_key, proc_key
from probes.rules.parsers.topo import parse_topo
from tui.views.trends import slope_per_hour
from widgets.host_stats import HostView
from widgets.iostat_panel import DiskRow, IostatView
from widgets.memory_growth import GpuMemoryTrend, MemoryGrowthView, ProcessMemory
from widgets.process_table import ProcessRow
from widgets.thermal_panel import GpuThermal, ThermalView
from widgets.topo_matrix import GpuLink, TopoView

REASON_NAMES = {
    "gpu_idle": "GPU idle", "applications_clocks_setting": "Applications clocks setting",
    "sw_power_cap": "SW power cap", "hw_slowdown": "HW slowdown",
    "sync_boost": "Sync boost", "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown", "hw_power_brake_slowdown": "HW power brake",
    "display_clock_setting": "Display clock setting",
}
"""NVML's clock-event reason names as ``nvidia-smi -q`` prints them."""
CHART_POINTS = 240
STRIP_POINTS = 60
IOSTAT_WINDOW_S = 600.0


def window_label(window_s: float) -> str:
    """``5 min``, ``1 h``, ``24 h``, ``all``."""
    if window_s <= 0:
        return "all"
    if window_s < 3600:
        return f"{window_s / 60:.0f} min"
    return f"{window_s / 3600:.0f} h"


def _since(state: HostState, window_s: float) -> float | None:
    last = state.history.last_ts
    return None if last is None or window_s <= 0 else last - window_s


def memory_growth_view(state: HostState, window_s: float,
                       selected: int | None) -> MemoryGrowthView:
    """Panel 1: per-GPU memory over the window, slopes, time to full; the selected GPU's
    processes."""
    since = _since(state, window_s)
    leaks = {f.gpu: f for f in state.findings() if f.code == "memory-leak"}
    totals = {g.index: g.mem_total_mib for g in state.last.gpus} if state.last else {}
    gpus = []
    for index in state.history.gpu_indices():
        series = state.history.series(gpu_key(index, "mem_used_mib"))
        if series is None:
            continue
        pts = series.points(since=since, max_points=CHART_POINTS)
        if not pts:
            continue
        points = tuple((p.t, p.mean) for p in pts)
        latest = series.latest()
        current = latest.mean if latest is not None else points[-1][1]
        total = totals.get(index)
        leak = leaks.get(index)
        slope: float | None
        if leak is not None and isinstance(leak.extra.get("slope_mib_h"), int | float):
            slope = float(leak.extra["slope_mib_h"])  # type: ignore[arg-type]
        else:
            slope = slope_per_hour(points)
        hours = None
        if slope is not None and slope > 0 and total:
            hours = max(0.0, (total - current) / slope)
        gpus.append(GpuMemoryTrend(index, points, total, current, max(p.hi for p in pts),
                                   slope, hours, leaking=leak is not None))
    if selected is None and gpus:
        selected = next((g.index for g in gpus if g.leaking), gpus[0].index)
    procs = []
    if state.last is not None and selected is not None:
        for g in state.last.gpus:
            if g.index != selected:
                continue
            for p in g.processes or ():
                if p.pid is None:
                    continue
                ps = state.history.series(proc_key(selected, p.pid))
                pts = ps.points(since=since, max_points=CHART_POINTS) if ps is not None else ()
                pslope = slope_per_hour([(q.t, q.mean) for q in pts]) if pts else None
                procs.append(ProcessMemory(p.pid, p.user or "?", p.name or "?", p.used_mib,
                                           pslope, leaking=selected in leaks))
    return MemoryGrowthView(window_label(window_s), tuple(gpus), selected, tuple(procs))


def thermal_view(state: HostState) -> ThermalView:
    """Panel 2: temperature against slowdown, power against limit, clocks, reasons."""
    if state.last is None:
        return ThermalView()
    infos = {g.index: g for g in state.hello.facts.gpus} if state.hello else {}
    since = _since(state, 900.0)
    out = []
    for g in state.last.gpus:
        if g.index < 0:
            continue
        info = infos.get(g.index)
        series = state.history.series(gpu_key(g.index, "temp_c"))
        temps = tuple(p.mean for p in series.points(since=since, max_points=STRIP_POINTS)) \
            if series is not None else ()
        # the agent does not sample fan speed (data-centre GPUs are cooled by the chassis)
        out.append(GpuThermal(g.index, g.temp_c, info.temp_slowdown_c if info else None,
                              g.temp_mem_c, g.power_w, g.power_limit_w, g.sm_clock_mhz,
                              g.sm_clock_max_mhz,
                              tuple(REASON_NAMES.get(r, r) for r in g.clock_reasons), None,
                              temps))
    return ThermalView(tuple(out))


def topo_view(state: HostState) -> TopoView | None:
    """Panel 3: the topology matrix and each GPU's link against what it can do."""
    if state.hello is None:
        return None
    links = []
    chains = state.hello.pcie
    samples = {g.index: g for g in state.last.gpus} if state.last else {}
    for info in state.hello.facts.gpus:
        s = samples.get(info.index)
        note = None
        chain = chains.get(info.bus_id or "", ())
        for link in chain[1:]:
            if link.width and link.max_width and link.width < link.max_width:
                note = f"bridge {link.address} at x{link.width} of x{link.max_width}"
                break
        links.append(GpuLink(info.index, s.pcie_gen if s else None,
                             s.pcie_gen_max if s else None, s.pcie_width if s else None,
                             s.pcie_width_max if s else None, info.bus_id, note))
    if not state.hello.topo_text:
        return TopoView(gpus=tuple(f"GPU{g.index}" for g in state.hello.facts.gpus),
                        links_state=tuple(links))
    return TopoView.from_matrix(parse_topo(state.hello.topo_text.splitlines()), tuple(links))


def iostat_view(state: HostState) -> IostatView:
    """Panel 4: disks now and over ten minutes, beside the GPUs' utilisation."""
    since = _since(state, IOSTAT_WINDOW_S)
    disks = []
    for d in state.last.disks if state.last else ():
        series = state.history.series(disk_key(d.name, "util"))
        pts = tuple(p.mean for p in series.points(since=since, max_points=STRIP_POINTS)) \
            if series is not None else ()
        disks.append(DiskRow(d.name, d.r_s, d.w_s, d.rkb_s, d.wkb_s, d.r_await, d.w_await,
                             d.aqu_sz, d.util, pts))
    util = []
    for index in state.history.gpu_indices():
        series = state.history.series(gpu_key(index, "util_pct"))
        if series is not None:
            util.append((index, tuple(p.mean for p in
                                      series.points(since=since, max_points=STRIP_POINTS))))
    return IostatView(tuple(disks), tuple(util), window_label(IOSTAT_WINDOW_S))


def process_rows(state: HostState) -> tuple[ProcessRow, ...]:
    """Panel 5: every compute process on every GPU."""
    return tuple(ProcessRow(p.pid, p.user, p.name, g.index, p.used_mib)
                 for g in (state.last.gpus if state.last else ()) for p in g.processes or ())


def host_view(state: HostState) -> HostView | None:
    """Panel 6: CPU, memory, swap, load, and the host's findings."""
    if state.last is None:
        return None
    facts = state.hello.facts if state.hello else None
    return HostView.from_stats(
        state.last.host, cores_physical=facts.cpu_cores_physical if facts else None,
        cores_logical=facts.cpu_cores_logical if facts else None,
        gpu_count=len(state.last.gpus), findings=tuple(state.findings()))
