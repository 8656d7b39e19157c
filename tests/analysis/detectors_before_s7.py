"""The detectors that read their windows together since session 7 (``HostHistory.windows``),
as they were before (main ``8b3ea60``: ``clocks.py``, ``memory.py`` and ``host.py`` of
``probes/analysis/detectors``): the reference ``tests/analysis/test_detector_windows.py``
holds the new ones to, finding by finding.  Copied unchanged but for these imports (the
three modules' in one block); not imported by the console."""

from __future__ import annotations

from probes.analysis.detectors.window import (
    all_above,
    all_below,
    bins,
    cols,
    covered,
    first_at_least,
    fmt,
    latest_ts,
    merged,
    points,
    sample_gpu,
    share_at_least,
    slack,
    step_latest,
    wmean,
)
from probes.analysis.findings import Finding
from probes.analysis.judge import SLOWING_REASONS, leak_urgency, temp_thresholds
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.slope import Growth, growth
from probes.history import (
    REASON_BITS,
    Columns,
    HostHistory,
    Series,
    SeriesKey,
    StepSeries,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
)
from probes.triage import Code, Severity, Step
from probes.wire.samples import Hello, HostSample

# --- clocks.py ----------------------------------------------------------------

_SLOWING_BITS = sum(REASON_BITS[r] for r in SLOWING_REASONS)
"""While busy (the only time this detector looks), the power cap slows a GPU too."""


def _mask_share(steps: StepSeries | None, t0: float, t1: float, bits: int) -> float:
    """Share of [t0, t1) during which any of ``bits`` was set."""
    if steps is None or t1 <= t0:
        return 0.0
    on = sum(b - a for a, b, v in steps.segments(t0, t1) if int(v) & bits)
    return on / (t1 - t0)


def _never_slowed(steps: StepSeries | None, t0: float, now: float) -> bool:
    """No slowing reason held at any time a busy bucket's share is read over: [t0, now]
    and the microsecond after it (``_mask_share`` of a bucket starting at ``now``)."""
    if steps is None:
        return True
    return not any(v != v or int(v) & _SLOWING_BITS
                   for _, _, v in steps.segments(t0, max(now, t0) + 1e-6 + slack(now)))


def _unthrottled(reasons: StepSeries | None, cp: Columns | None, clock_max: float | None,
                 t0: float, now: float, limits: DetectorLimits) -> bool:
    """No slowing reason held from ``t0`` on, and every clock point above the low-clock line
    (or none to judge): no busy bucket of the window can count as throttled."""
    return _never_slowed(reasons, t0, now) and (
        cp is None or not clock_max or all_above(cp, limits.throttle_clock_share * clock_max))


_UNREAD = Columns([], [], [], [], [])
"""A GPU's clock points not read yet."""


def _busy_now(history: HostHistory, key: SeriesKey, limits: DetectorLimits) -> bool:
    """Whether the newest util sample is busy: which test to try first (either order gives
    the same verdict; this one reads the fewest windows)."""
    p = history.series(key)
    last = p.latest() if p is not None else None
    return last is not None and last.mean >= limits.throttle_busy_util_pct


def detect_throttled_while_busy(host: str, history: HostHistory, hello: Hello | None,
                                sample: HostSample | None = None,
                                limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A busy GPU slowed for most of the window: thermal or hardware slowdown, power brake,
    the power cap, or SM clocks well under their maximum."""
    now = latest_ts(history)
    if now is None:
        return []
    sample = sample or history.last_sample
    window = limits.throttle_window_s
    since = now - window
    out = []
    nb = bins(window)
    pruned = limits.throttle_min_share > 0
    for idx in history.gpu_indices():
        util_key = gpu_key(idx, "util_pct")
        clock_max = step_latest(history, idx, "sm_clock_max_mhz")
        reasons = history.steps(gpu_key(idx, "clock_reasons"))
        cp: Columns | None = None
        if pruned and _busy_now(history, util_key, limits):
            # A busy GPU is most often one never slowed: proved from its clocks and reasons
            # over the whole window (a superset of the one from its first util point), its
            # util's window is not read (whatever it says, the GPU is skipped below too).
            cp = points(history.series(gpu_key(idx, "sm_clock_mhz")), since, nb)
            if _unthrottled(reasons, cp, clock_max, since, now, limits):
                continue
        else:
            cp = _UNREAD
        up = points(history.series(util_key), since, nb)
        if up is None or not covered(up, now, window, limits):
            continue
        if pruned and all_below(up, limits.throttle_busy_util_pct):
            continue  # never busy: nothing throttled
        if cp is _UNREAD:
            cp = points(history.series(gpu_key(idx, "sm_clock_mhz")), since, nb)
        if pruned and _unthrottled(reasons, cp, clock_max, up.t[0], now, limits):
            continue  # busy and never slowed: nothing throttled
        util = merged(up, nb)
        clock = merged(cp, nb) if cp is not None else None
        clocks = dict(zip(clock.t, clock.mean, strict=True)) if clock is not None else {}
        total = sum(util.n)
        hit = 0.0
        busy_n = 0
        first: float | None = None
        ends = [*util.t[1:], now]
        for t, end, mean, n in zip(util.t, ends, util.mean, util.n, strict=True):
            if mean < limits.throttle_busy_util_pct:
                continue
            busy_n += n
            share = _mask_share(reasons, t, max(end, t + 1e-6), _SLOWING_BITS)
            c = clocks.get(t)
            if c is not None and clock_max and c < limits.throttle_clock_share * clock_max:
                share = 1.0
            if share > 0 and first is None:
                first = t
            hit += share * n
        frac = hit / total if total else 0.0
        if frac < limits.throttle_min_share:
            continue
        g = sample_gpu(sample, idx)
        names = sorted(set(g.clock_reasons) & SLOWING_REASONS) \
            if g is not None else []
        busy_pct = wmean(util)
        what = ", ".join(names) if names else "SM clock low"
        detail = ""
        if g is not None and g.sm_clock_mhz is not None and g.sm_clock_max_mhz:
            detail = f"; SM {fmt(g.sm_clock_mhz)} of {fmt(g.sm_clock_max_mhz)} MHz"
        if g is not None and g.temp_c is not None:
            detail += f" at {g.temp_c:.0f} °C"
        thermal = any("thermal" in n for n in names)
        power = any("power" in n for n in names)
        if thermal:
            action = (f"Check cooling for GPU{idx}: fans, inlet temperature, airflow blocked "
                      "by cabling or a missing blank; compare its temperature with its "
                      "neighbours (nvidia-smi -q -d TEMPERATURE,PERFORMANCE)")
        elif power:
            action = (f"GPU{idx} is held at its power limit: check the enforced limit and the "
                      "PSU/power-brake state (nvidia-smi -q -d POWER,PERFORMANCE)")
        else:
            action = (f"Read GPU{idx}'s clock-event reasons (nvidia-smi -q -d PERFORMANCE) "
                      "and compare its clocks with the other GPUs under the same load")
        out.append(Finding(
            Step.GPU, Code.THROTTLED_WHILE_BUSY, Severity.WARNING,
            f"GPU{idx} throttled {frac:.0%} of the last {window / 60:.0f} min while "
            f"{busy_pct:.0f}% busy: {what}{detail}", host, gpu=idx, ts=first, action=action,
            extra={"throttled_share": round(frac, 3), "reasons": names,
                   "window_s": window}))
    return out


def detect_temp_near_slowdown(host: str, history: HostHistory, hello: Hello | None,
                              sample: HostSample | None = None,
                              limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU sitting within ``temp_margin_c`` of its slowdown threshold (from the hello)."""
    now = latest_ts(history)
    if now is None or hello is None:
        return []
    window = limits.temp_window_s
    out = []
    for info in hello.facts.gpus:
        if info.temp_slowdown_c is None:
            continue
        near, _ = temp_thresholds(info.temp_slowdown_c, limits)
        nb = bins(window)
        p = points(history.series(gpu_key(info.index, "temp_c")), now - window, nb)
        if p is None or not covered(p, now, window, limits):
            continue
        if limits.temp_min_share > 0 and all_below(p, near):
            continue  # no bin near the threshold: its share is 0
        c = merged(p, nb)
        share = share_at_least(c, near)
        if share < limits.temp_min_share:
            continue
        hot = max(c.hi)
        slowdown = info.temp_slowdown_c
        if hot >= slowdown:  # not "near" any more: it reached the threshold
            where = f"at/past its {slowdown:.0f} °C slowdown"
            action = (f"GPU{info.index} reached its slowdown temperature: the driver slows it "
                      "down there. Check its cooling now: fans, inlet air, dust, blocked "
                      "airflow; compare with its neighbours, and drain it if it stays there")
        else:
            where = f"within {limits.temp_margin_c:.0f} °C of its {slowdown:.0f} °C slowdown"
            action = (f"Check GPU{info.index}'s cooling before it starts slowing down: fans, "
                      "inlet air, dust, blocked airflow; compare with its neighbours")
        out.append(Finding(
            Step.GPU, Code.TEMP_NEAR_SLOWDOWN, Severity.WARNING,
            f"GPU{info.index} at {c.mean[-1]:.0f} °C (peak {hot:.0f} °C) for {share:.0%} of "
            f"the last {window / 60:.0f} min, {where}", host, gpu=info.index,
            ts=first_at_least(c, near), action=action,
            extra={"temp_c": c.mean[-1], "slowdown_c": slowdown, "reached": hot >= slowdown}))
    return out


def detect_power_pinned(host: str, history: HostHistory, hello: Hello | None,
                        sample: HostSample | None = None,
                        limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU drawing its full power limit most of the time: its speed is set by the limit."""
    now = latest_ts(history)
    if now is None:
        return []
    window = limits.power_window_s
    out = []
    for idx in history.gpu_indices():
        limit = step_latest(history, idx, "power_limit_w")
        if not limit:
            continue
        nb = bins(window)
        p = points(history.series(gpu_key(idx, "power_w")), now - window, nb)
        if p is None or not covered(p, now, window, limits):
            continue
        pinned = limits.power_pinned_share * limit
        if limits.power_min_share > 0 and all_below(p, pinned):
            continue  # no bin at the limit: its share is 0
        c = merged(p, nb)
        share = share_at_least(c, pinned)
        if share < limits.power_min_share:
            continue
        out.append(Finding(
            Step.GPU, Code.POWER_PINNED, Severity.INFO,
            f"GPU{idx} at {wmean(c):.0f} W of its {limit:.0f} W limit for {share:.0%} of the "
            f"last {window / 60:.0f} min", host, gpu=idx,
            ts=first_at_least(c, pinned),
            action=(f"GPU{idx}'s speed is set by its power limit: check the limit is the "
                    "default (nvidia-smi -q -d POWER) and compare its clocks with the others"),
            extra={"power_w": round(wmean(c), 1), "limit_w": limit}))
    return out

# --- memory.py ----------------------------------------------------------------


def leak_estimate(series: Series | None, now: float,
                  limits: DetectorLimits = DEFAULT_LIMITS) -> Growth | None:
    """Growth of a memory series over the leak window, by ``probes.analysis.slope``.

    The window is merged into ``leak_bins`` bins; their minima are the lower envelope.

    Returns None with too little data or no rise at all.
    """
    c = cols(series, now - limits.leak_window_s, limits.leak_bins)
    if c is None or len(c.t) < 6 or now - c.t[0] < limits.leak_min_data_s:
        return None
    need = limits.leak_min_mib_h * limits.leak_half_share
    return growth(c.t, c.lo, now, need)


def _surely_flat(p: Columns, nbins: int, need: float) -> bool:
    """The window's points alone prove ``growth`` finds its floor flat (slope 0): the floor
    rises at most from the lowest point's low to the newest's (the last bin holds the
    newest point; every bin's minimum is at least the lowest low), over at least
    ``(nbins - 1) / nbins`` of the points' span (the last bin starts no earlier)."""
    rise = p.lo[-1] - min(p.lo)
    if rise <= 0:
        return True
    share = (nbins - 1) / nbins if len(p.t) > nbins > 0 else 1.0
    span_h = (p.t[-1] - p.t[0]) / 3600.0 * share * (1 - 1e-6)
    return rise < need * span_h - slack(need * span_h)


def _is_leak(e: Growth | None, limits: DetectorLimits) -> bool:
    need = limits.leak_min_mib_h * limits.leak_half_share
    return (e is not None and e.slope_mib_h >= limits.leak_min_mib_h
            and e.first_half_mib_h >= need and e.second_half_mib_h >= need)


def detect_memory_leak(host: str, history: HostHistory, hello: Hello | None,
                       sample: HostSample | None = None,
                       limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """GPU memory that grows steadily and would fill the GPU within ``leak_max_hours_to_full``."""
    now = latest_ts(history)
    if now is None:
        return []
    sample = sample or history.last_sample
    out = []
    for idx in history.gpu_indices():
        series = history.series(gpu_key(idx, "mem_used_mib"))
        if limits.leak_min_mib_h > 0:
            p = points(series, now - limits.leak_window_s, limits.leak_bins)
            if p is None or _surely_flat(p, limits.leak_bins,
                                         limits.leak_min_mib_h * limits.leak_half_share):
                continue
        est = leak_estimate(series, now, limits)
        if est is None or not _is_leak(est, limits):
            continue
        latest = series.latest() if series is not None else None
        total = step_latest(history, idx, "mem_total_mib") or _hello_total(hello, idx)
        if latest is None or not total:
            continue
        used = latest.mean
        slope = est.slope_mib_h
        hours = max(0.0, total - used) / slope
        if hours >= limits.leak_max_hours_to_full:
            continue
        extra: dict[str, object] = {"slope_mib_h": round(slope, 1),
                                    "hours_to_full": round(hours, 1),
                                    "used_mib": used, "total_mib": total}
        summary = (f"GPU{idx} memory grows {fmt(slope)} MiB/h; full in ~{hours:.0f} h "
                   f"(at {fmt(used)} of {fmt(total)} MiB)")
        who = _leaking_process(history, idx, now, slope, limits, sample)
        if who is not None:
            pid, name, pslope = who
            extra.update(pid=pid, process=name, process_slope_mib_h=round(pslope, 1))
            summary += f"; pid {pid} ({name or '?'}) grows {fmt(pslope)} MiB/h"
        out.append(Finding(
            Step.GPU, Code.MEMORY_LEAK, leak_urgency(hours, limits), summary,
            host, gpu=idx, ts=est.start_ts, extra=extra,
            action=(f"Find what keeps growing in the job on GPU{idx} (torch.cuda."
                    "memory_summary() between steps; tensors kept across iterations, growing "
                    "caches, lists of losses with graphs); checkpoint and restart it before it "
                    "runs out of memory")))
    return out


def _hello_total(hello: Hello | None, idx: int) -> float | None:
    if hello is None:
        return None
    for g in hello.facts.gpus:
        if g.index == idx:
            return g.mem_total_mib
    return None


def _leaking_process(history: HostHistory, idx: int, now: float, gpu_slope: float,
                     limits: DetectorLimits, sample: HostSample | None
                     ) -> tuple[int, str | None, float] | None:
    best: tuple[int, str | None, float] | None = None
    for pid in history.processes(idx):
        e = leak_estimate(history.series(proc_key(idx, pid)), now, limits)
        if e is None or e.slope_mib_h < limits.leak_process_share * gpu_slope:
            continue
        if best is None or e.slope_mib_h > best[2]:
            g = sample_gpu(sample, idx)
            name = next((p.name for p in (g.processes or ()) if p.pid == pid), None) \
                if g is not None else None
            best = (pid, name, e.slope_mib_h)
    return best

# --- host.py ------------------------------------------------------------------


def detect_data_starvation(host: str, history: HostHistory, hello: Hello | None,
                           sample: HostSample | None = None,
                           limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """GPUs that idle in regular gaps between busy stretches while a disk or the CPU is
    saturated: the input pipeline cannot keep up.

    The suspect (a busy disk, or the CPU) is checked first from 15 s buckets; only then are
    the GPUs' raw utilisation samples read for the saw-tooth.
    """
    now = latest_ts(history)
    if now is None:
        return []
    window = limits.starve_window_s
    since = now - window
    suspects: list[tuple[float, str, dict[str, object]]] = []
    nb = bins(window)
    for name in history.disks():
        up = points(history.series(disk_key(name, "util")), since, nb)
        if up is None or not covered(up, now, window, limits):
            continue
        ap = points(history.series(disk_key(name, "await")), since, nb)
        if all_below(up, limits.starve_disk_util_pct) and (
                all_below(ap, limits.starve_disk_await_ms) if ap is not None
                else limits.starve_disk_await_ms > 0.0):
            continue  # both window means under their limits: not a suspect
        util = merged(up, nb)
        aw = merged(ap, nb) if ap is not None else None
        q = cols(history.series(disk_key(name, "aqu_sz")), since, nb)
        u, a = wmean(util), wmean(aw) if aw is not None else 0.0
        if u >= limits.starve_disk_util_pct or a >= limits.starve_disk_await_ms:
            holds = [d.path for d in (hello.datasets if hello is not None else ())
                     if d.device == name]
            what = f"{name} is {u:.0f}% busy (await {a:.0f} ms"
            if q is not None:
                what += f", queue {wmean(q):.0f}"
            what += ")"
            if holds:
                what += f", holding {', '.join(holds)}"
            suspects.append((u + a, what, {"disk": name, "disk_util": round(u, 1),
                                           "disk_await_ms": round(a, 1)}))
    suspects.sort(key=lambda s: -s[0])
    cp = points(history.series(host_key("cpu_pct")), since, nb)
    cpu = merged(cp, nb) if cp is not None and not all_below(cp, limits.starve_cpu_pct) \
        else None
    if cpu is not None and covered(cpu, now, window, limits) and \
            wmean(cpu) >= limits.starve_cpu_pct:
        suspects.append((0.0, f"host CPU is {wmean(cpu):.0f}% busy (a CPU-bound data loader)",
                         {"cpu_pct": round(wmean(cpu), 1)}))
    if not suspects:
        return []
    gpus = history.gpu_indices()
    starving: list[int] = []
    idle_shares = []
    first: float | None = None
    judged = 0
    for idx in gpus:
        c = cols(history.series(gpu_key(idx, "util_pct")), since)
        if c is None or not covered(c, now, window, limits):
            continue
        judged += 1
        idle = busy = gaps = 0
        was_busy = False
        first_idle = None
        for t, v in zip(c.t, c.mean, strict=True):
            if v < limits.starve_idle_util_pct:
                idle += 1
                if was_busy:
                    gaps += 1
                    if first_idle is None:
                        first_idle = t
                was_busy = False
            elif v >= limits.starve_busy_util_pct:
                busy += 1
                was_busy = True
        n = len(c.t)
        if (idle / n >= limits.starve_min_idle_share and busy / n >= limits.starve_min_busy_share
                and gaps >= limits.starve_min_gaps):
            starving.append(idx)
            idle_shares.append(idle / n)
            if first_idle is not None and (first is None or first_idle < first):
                first = first_idle
    if not judged or len(starving) < limits.starve_min_gpu_share * judged:
        return []
    idle_pct = sum(idle_shares) / len(idle_shares)
    _, what, extra = suspects[0]
    extra = dict(extra, idle_share=round(idle_pct, 3), gpus=starving)
    disk = extra.get("disk")
    action = (f"Check iostat -x 1 on {disk}; move the dataset to faster or local storage, "
              "cache it, or raise DataLoader prefetch" if disk else
              "Raise DataLoader num_workers, move decoding/augmentation to the GPU, or pin "
              "the loader to the GPU's NUMA node")
    return [Finding(
        Step.GPU, Code.DATA_STARVATION, Severity.WARNING,
        f"GPUs idle {idle_pct:.0%} of the last {window / 60:.0f} min in gaps between busy "
        f"stretches ({len(starving)} of {judged} GPUs) while {what}: the input pipeline is "
        "starving them", host, ts=first, action=action, extra=extra)]


def detect_swap_activity(host: str, history: HostHistory, hello: Hello | None,
                         sample: HostSample | None = None,
                         limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """The host swapping in or out for most of the last minute."""
    now = latest_ts(history)
    if now is None:
        return []
    window = limits.swap_window_s
    since = now - window
    si = cols(history.series(host_key("swap_in_pages_s")), since)
    so = cols(history.series(host_key("swap_out_pages_s")), since)
    base = si or so
    if base is None or not covered(base, now, window, limits):
        return []
    ins = dict(zip(si.t, si.mean, strict=True)) if si is not None else {}
    outs = dict(zip(so.t, so.mean, strict=True)) if so is not None else {}
    times = sorted(set(ins) | set(outs))
    thr = limits.swap_pages_s
    hot = [t for t in times if ins.get(t, 0.0) >= thr or outs.get(t, 0.0) >= thr]
    if not times or len(hot) / len(times) < limits.swap_min_share:
        return []
    mi = sum(ins.values()) / len(ins) if ins else 0.0
    mo = sum(outs.values()) / len(outs) if outs else 0.0
    mib_s = (mi + mo) * 4096 / 2 ** 20
    return [Finding(
        Step.GPU, Code.SWAP_ACTIVITY, Severity.WARNING,
        f"host swapping {fmt(mi)} pages/s in, {fmt(mo)} out over the last "
        f"{window:.0f} s (~{mib_s:.1f} MiB/s)", host, ts=hot[0],
        action=("Find what pushed the host into swap (ps aux --sort=-rss; DataLoader "
                "workers, pinned-memory buffers, page cache pressure); reduce workers or "
                "prefetch, or add RAM; swapping stalls the input pipeline"),
        extra={"swap_in_pages_s": round(mi, 1), "swap_out_pages_s": round(mo, 1)})]
