"""The host panels' view models, computed from one host's state: pure, no Textual widgets.

Charts read the tiered history with a bounded number of points (what a panel is wide), so a
24-hour window costs the same as five minutes.
"""

from __future__ import annotations

import time
from dataclasses import replace

from probes.analysis.fabric import beside, marks
from probes.analysis.findings import Finding
from probes.analysis.host_clock import clock_skewed
from probes.analysis.judge import (
    GpuJudgement,
    TempLevel,
    disk_saturated,
    gpus_present,
    host_health,
    judge_gpu,
    judge_gpus,
    link_verdict,
    peer_link,
)
from probes.analysis.slope import growth
from probes.fleet_state import FleetRow, HostState, HostStatus
from probes.history import Series, disk_key, gpu_key, proc_key
from probes.rules.fabric import ACTIVE, LinkView, port_state
from probes.rules.parsers.topo import parse_topo
from probes.triage import Code
from probes.wire.clock_reasons import REASON_NAMES
from probes.wire.samples import GpuProcess, GpuSample
from widgets.gpu_table import GpuRow
from widgets.host_facts import FindingLine, GpuCount, StaleNotice
from widgets.host_stats import HostView
from widgets.iostat_panel import DiskRow, IostatView
from widgets.memory_growth import GpuMemoryTrend, MemoryGrowthView, ProcessMemory
from widgets.network_panel import GpuLinks, NetworkView, PortRow
from widgets.process_table import ProcessRow
from widgets.thermal_panel import GpuThermal, ThermalView
from widgets.topo_matrix import GpuLink, TopoView

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


def _slope(series: Series | None, since: float | None, bins: int) -> float | None:
    """The panel's slope over its window by the leak detector's estimator."""
    if series is None:
        return None
    c = series.columns(since=since, max_points=bins)
    fit = growth(c.t, c.lo, c.t[-1]) if c.t else None
    return fit.slope_mib_h if fit is not None else None


def judgements(state: HostState) -> tuple[GpuJudgement, ...]:
    """Every GPU the host has or should have (``expect_gpus``), as the core judges it."""
    return judge_gpus(state.last, state.hello, state.findings(), state.limits.detectors,
                      expected=state.spec.expect_gpus)


def _judged(state: HostState) -> dict[int, GpuJudgement]:
    return {j.index: j for j in judgements(state)}


def clock_time(ts: float | None) -> str | None:
    """An agent timestamp as the event log prints it (local ``16:14:40``)."""
    return None if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def gpu_rows(state: HostState) -> tuple[GpuRow, ...]:
    """The GPU table: every GPU the host reported or should have, with the core's verdict;
    a lost or missing one keeps its row with its bus id, serial and when it went."""
    if state.last is None:
        return ()
    infos = {g.index: g for g in state.hello.facts.gpus} if state.hello else {}
    samples = {g.index: g for g in state.last.gpus if g.index >= 0}
    rows = []
    for j in judgements(state):
        info = infos.get(j.index)
        g = samples.get(j.index)
        rows.append(GpuRow(g, j, info.bus_id if info else None,
                           info.serial if info else None, clock_time(j.since),
                           gpu_work(g) if g is not None else None))
    # a lost GPU known only by its bus id: its own row unless the hello names it (then the
    # row at its index already says LOST)
    named = {(i.bus_id or "").lower() for i in infos.values()}
    for g in state.last.gpus:
        if g.index < 0 and (g.bus_id or "").lower() not in named:
            rows.append(GpuRow(g, judge_gpu(g, None, (), None, state.limits.detectors),
                               g.bus_id))
    return tuple(rows)


def gpu_count(state: HostState) -> GpuCount | None:
    """``7/8`` for the header: GPUs answering against those expected (or ever reported)."""
    if state.last is None:
        return None
    judged = judgements(state)
    return GpuCount(gpus_present(judged), max(len(judged), state.spec.expect_gpus or 0))


def top_findings(state: HostState) -> tuple[FindingLine, ...]:
    """The host's findings worst first, one line per incident for the top of its screen:
    every finding about one GPU folds into the line of its worst, led by the GPU's verdict
    (``GPU6 LOST · Xid 79 · …``); a host-wide finding is a line of its own."""
    found = state.findings()
    verdicts = _judged(state)
    by_gpu: dict[int, list[Finding]] = {}
    order: list[int | Finding] = []
    for f in found:
        if f.gpu is None or f.gpu < 0:
            order.append(f)
            continue
        if f.gpu not in by_gpu:
            order.append(f.gpu)
        by_gpu.setdefault(f.gpu, []).append(f)
    lines = []
    for item in order:
        if isinstance(item, Finding):
            lines.append(FindingLine(item.severity, "", item.summary))
            continue
        group = by_gpu[item]
        j = verdicts.get(item)
        lead = f"GPU{item}" + (f" {j.verdict.value.upper()}" if j is not None
                               and j.verdict.value != "ok" else "")
        xid = next((f.xid for f in group if f.xid is not None), None)
        summary = (f"Xid {xid} · " if xid is not None else "") + group[0].summary
        lines.append(FindingLine(group[0].severity, lead, summary, len(group) - 1))
    return tuple(lines)


def stale_notice(state: HostState, row: FleetRow) -> StaleNotice | None:
    """Above the table when the values are old: how old, why, and when the next try is.

    The age is the core's (of the last agent data: a retry's own failure is no sighting),
    None for a host never reached; the host's down reason stands in when the row has none.
    """
    if row.status not in (HostStatus.STALE, HostStatus.UNKNOWN) and not row.status.is_down:
        return None
    return StaleNotice(row.status.value, row.last_seen_s, row.reason or state.reach.down_reason,
                       row.next_retry_s)


def _gone(j: GpuJudgement | None) -> str | None:
    return j.verdict.value if j is not None and j.gone else None


def memory_growth_view(state: HostState, window_s: float,
                       selected: int | None) -> MemoryGrowthView:
    """Panel 1: per-GPU memory over the window, slopes, time to full; the selected GPU's
    processes."""
    since = _since(state, window_s)
    bins = state.limits.detectors.leak_bins
    leaks = {f.gpu: f for f in state.findings() if f.code == Code.MEMORY_LEAK}
    totals = {g.index: g.mem_total_mib for g in state.last.gpus} if state.last else {}
    judged = _judged(state)
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
        slope = leak.slope_mib_h if leak is not None else None
        if slope is None:
            slope = _slope(series, since, bins)
        hours = None
        if slope is not None and slope > 0 and total:
            hours = max(0.0, (total - current) / slope)
        gpus.append(GpuMemoryTrend(index, points, total, current, max(p.hi for p in pts),
                                   slope, hours, leaking=leak is not None,
                                   urgency=leak.severity if leak is not None else None,
                                   gone=_gone(judged.get(index))))
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
                pslope = _slope(state.history.series(proc_key(selected, p.pid)), since, bins)
                procs.append(ProcessMemory(p.pid, p.user or "?", p.name or "?", p.used_mib,
                                           pslope, leaking=selected in leaks))
    return MemoryGrowthView(window_label(window_s), tuple(gpus), selected, tuple(procs))


def thermal_view(state: HostState) -> ThermalView:
    """Panel 2: temperature against slowdown, power against limit, clocks, reasons."""
    if state.last is None:
        return ThermalView()
    infos = {g.index: g for g in state.hello.facts.gpus} if state.hello else {}
    judged = _judged(state)
    since = _since(state, 900.0)
    out = []
    for g in state.last.gpus:
        if g.index < 0:
            continue
        info = infos.get(g.index)
        series = state.history.series(gpu_key(g.index, "temp_c"))
        temps = tuple(p.mean for p in series.points(since=since, max_points=STRIP_POINTS)) \
            if series is not None else ()
        j = judged.get(g.index)
        out.append(GpuThermal(
            g.index, g.temp_c, info.temp_slowdown_c if info else None, g.temp_mem_c,
            g.power_w, g.power_limit_w, g.sm_clock_mhz, g.sm_clock_max_mhz,
            tuple(REASON_NAMES.get(r, r) for r in g.clock_reasons), temps,
            throttled=j is not None and j.throttled,
            throttling_reasons=tuple(REASON_NAMES.get(r, r) for r in j.slowing) if j else (),
            temp_level=j.temp if j else TempLevel.UNKNOWN,
            mem_temp_level=j.mem_temp if j else TempLevel.UNKNOWN,
            gone=j.verdict.value if j is not None and j.gone else None,
            power_high=j is not None and j.power_high))
    sampled = {t.index for t in out}
    out += [GpuThermal(j.index, None, infos[j.index].temp_slowdown_c if j.index in infos
                       else None, None, None, None, None, None, gone=j.verdict.value)
            for j in judged.values() if j.gone and j.index not in sampled]
    return ThermalView(tuple(sorted(out, key=lambda t: t.index)))


def topo_view(state: HostState) -> TopoView | None:
    """Panel 3: the topology matrix and each GPU's link against what it can do."""
    if state.hello is None:
        return None
    links = []
    chains = state.hello.pcie
    samples = {g.index: g for g in state.last.gpus if g.index >= 0} if state.last else {}
    peers = peer_link(samples.values())
    for info in state.hello.facts.gpus:
        s = samples.get(info.index)
        note = None
        chain = chains.get(info.bus_id or "", ())
        for link in chain[1:]:
            if link.width and link.max_width and link.width < link.max_width:
                note = f"bridge {link.address} at x{link.width} of x{link.max_width}"
                break
        judged = link_verdict(s, state.limits.detectors, peers) if s else None
        links.append(GpuLink(info.index, s.pcie_gen if s else None,
                             judged.gen_cap if judged else None, s.pcie_width if s else None,
                             judged.width_cap if judged else None, info.bus_id, note,
                             gen_low=judged is not None and judged.gen_low,
                             width_low=judged is not None and judged.width_low,
                             shortfall=judged.shortfall if judged else None))
    if not state.hello.topo_text:
        return TopoView(gpus=tuple(f"GPU{g.index}" for g in state.hello.facts.gpus),
                        links_state=tuple(links))
    return TopoView.from_matrix(parse_topo(state.hello.topo_text.splitlines()), tuple(links))


def iostat_view(state: HostState) -> IostatView:
    """Panel 4: disks now and over ten minutes, beside the GPUs' utilisation."""
    since = _since(state, IOSTAT_WINDOW_S)
    limits = state.limits.detectors
    disks = []
    for d in state.last.disks if state.last else ():
        series = state.history.series(disk_key(d.name, "util"))
        pts = tuple(p.mean for p in series.points(since=since, max_points=STRIP_POINTS)) \
            if series is not None else ()
        disks.append(DiskRow(d.name, d.r_s, d.w_s, d.rkb_s, d.wkb_s, d.r_await, d.w_await,
                             d.aqu_sz, d.util, pts, disk_saturated(d.util, limits),
                             tuple(disk_saturated(p, limits) for p in pts)))
    util = []
    for index in state.history.gpu_indices():
        series = state.history.series(gpu_key(index, "util_pct"))
        if series is not None:
            util.append((index, tuple(p.mean for p in
                                      series.points(since=since, max_points=STRIP_POINTS))))
    return IostatView(tuple(disks), tuple(util), window_label(IOSTAT_WINDOW_S))


def process_rows(state: HostState) -> tuple[ProcessRow, ...]:
    """Panel 5: every compute process on every GPU, with what it works for."""
    return tuple(ProcessRow(p.pid, p.user, p.name, g.index, p.used_mib, work_label(p))
                 for g in (state.last.gpus if state.last else ()) for p in g.processes or ())


def gpu_work(gpu: GpuSample) -> str | None:
    """The GPU table's ``Job / rank`` cell: its process's work, ``+N`` for more of them."""
    labels = list(dict.fromkeys(w for p in gpu.processes or () if (w := work_label(p))))
    if not labels:
        return None
    return labels[0] + (f" +{len(labels) - 1}" if len(labels) > 1 else "")


def work_label(p: GpuProcess) -> str | None:
    """``job 48211.0 rank 3/16``, ``docker 3f1c2a9d8e7b``, ``pod 0a1b2c3d rank 2``: the
    Slurm job and step, else the container or pod, then the rank; None when unknown."""
    parts = []
    if p.slurm_job:
        parts.append(f"job {p.slurm_job}" + (f".{p.slurm_step}" if p.slurm_step else ""))
    elif p.pod:
        parts.append(f"pod {p.pod[:8]}")
    elif p.container:
        parts.append(f"{p.runtime or 'container'} {p.container[:12]}")
    if p.rank is not None:
        parts.append(f"rank {p.rank}" + (f"/{p.world_size}" if p.world_size else ""))
    return " ".join(parts) or None


def host_view(state: HostState) -> HostView | None:
    """Panel 6: CPU, memory, swap, load, and the host's findings."""
    if state.last is None:
        return None
    facts = state.hello.facts if state.hello else None
    physical = facts.cpu_cores_physical if facts else None
    logical = facts.cpu_cores_logical if facts else None
    gpus = len(state.last.gpus)
    view = HostView.from_stats(
        state.last.host, cores_physical=physical, cores_logical=logical, gpu_count=gpus,
        findings=tuple(state.findings()),
        health=host_health(state.last.host, physical, logical, gpus, state.limits.preflight,
                           state.limits.detectors),
        speeds=state.logs.speed.speeds(state.limits.detectors))
    if state.clock is None:
        return view
    return replace(view, clock_offset_s=state.clock.offset_s,
                   clock_skewed=clock_skewed(state.clock, state.limits.detectors))


def network_view(state: HostState) -> NetworkView:
    """Panel 7: the host's IB/RoCE ports and NVLinks, each with the core's verdict."""
    fab = state.fabric
    window = window_label(state.limits.detectors.ib_errors_window_s)
    if fab.ts is None:
        return NetworkView(window=window)
    port_word, gpu_word = marks(state.findings_kept.fabric)
    near = beside(state.hello)
    recent = fab.recent(fab.ts, state.limits.detectors.ib_errors_window_s)
    rows = []
    for p in fab.ports:
        name = f"{p.hca}/{p.port}" if p.port is not None else p.hca
        st = port_state(p.state)
        gpus, how = near.get(p.hca, ((), ""))
        errs = recent.get(name, {})
        flaps = errs.get("link_downed", 0)
        told = [f"+{v} {k}" for k, v in sorted(errs.items(), key=lambda kv: -kv[1])
                if k != "link_downed"] + ([f"{flaps} flap{'s' if flaps > 1 else ''}"]
                                          if flaps else [])
        rows.append(PortRow(
            name, "Active" if st == ACTIVE else f"{st or '?'} {p.phys_state or ''}".strip(),
            p.rate_gbs, {"infiniband": "IB", "ethernet": "RoCE"}.get(
                (p.link_layer or "").lower(), p.link_layer), p.rx_bytes_s, p.tx_bytes_s,
            ", ".join(told), ("GPU" + ",".join(map(str, gpus)) + (" (NUMA)" if how == "numa"
                                                                  else "")) if gpus else "",
            port_word.get(name, "ok"), bool(p.unknown)))
    by_gpu: dict[int, list[LinkView]] = {}
    for lk in fab.links:
        by_gpu.setdefault(lk.gpu, []).append(lk)
    links = []
    for gpu, own in sorted(by_gpu.items()):
        sums = {k: sum(getattr(lk, k) or 0 for lk in own) for k in ("replay", "recovery", "crc")}
        links.append(GpuLinks(gpu, sum(1 for lk in own if lk.active), len(own),
                              max((lk.speed_gbs for lk in own if lk.active and lk.speed_gbs),
                                  default=None),
                              ", ".join(f"{v} {k}" for k, v in sums.items() if v),
                              gpu_word.get(gpu, "ok")))
    return NetworkView(tuple(rows), tuple(links), window)
