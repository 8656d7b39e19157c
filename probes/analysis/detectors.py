"""Detectors over a host's history: trouble that only shows over minutes or hours.

Each detector is a pure function of the host's ``HostHistory`` (plus its hello and newest
sample) returning ``Finding`` objects; ``run_detectors`` runs them all.  They read downsampled
points (15 s buckets, merged bins) rather than raw samples where a bucket's min/max/mean
answers the question, so calling them every ~10 s per host stays cheap.  Only the saw-tooth
test of data starvation and the swap check read raw samples (5 min and 1 min of them).

Every threshold lives in ``DetectorLimits`` (flat floats, ints and bools, so it can be loaded
from YAML).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.history import (
    REASON_BITS,
    STATE_CODES,
    Columns,
    HostHistory,
    Series,
    StepSeries,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
)
from probes.triage import Severity, Step
from probes.wire.samples import GpuSample, GpuState, Hello, HostSample


@dataclass(frozen=True)
class DetectorLimits:
    """Every threshold the detectors use."""

    min_coverage: float = 0.8
    """Share of a detector's window that must hold data before it judges "sustained"."""

    leak_window_s: float = 3600.0
    """Window over which GPU (and process) memory growth is fitted."""
    leak_min_data_s: float = 1800.0
    """No leak verdict before this much of the window has data."""
    leak_min_mib_h: float = 256.0
    """Growth below this (MiB/h) is not reported."""
    leak_max_hours_to_full: float = 72.0
    """Only growth that would fill the GPU within this many hours is reported."""
    leak_critical_hours: float = 6.0
    """A leak that fills the GPU sooner than this is critical."""
    leak_half_share: float = 0.5
    """Each half of the window must grow at least this share of ``leak_min_mib_h``, so one
    step (an allocator reserving a block, then flat) is not a leak."""
    leak_bins: int = 40
    """Bins the window is merged into; the fit is Theil–Sen over their lower envelope."""
    leak_process_share: float = 0.5
    """A process growing at least this share of its GPU's rate is named as the cause."""

    throttle_window_s: float = 300.0
    """Window for throttled-while-busy."""
    throttle_busy_util_pct: float = 80.0
    """Utilisation at which a GPU counts as busy; idle GPUs with low clocks are fine."""
    throttle_clock_share: float = 0.85
    """SM clock below this share of its maximum counts as throttled (when busy)."""
    throttle_min_share: float = 0.6
    """Share of the window a busy GPU must be throttled to report it."""

    temp_margin_c: float = 5.0
    """Temperature within this many °C of the GPU's slowdown threshold counts as near it."""
    temp_window_s: float = 300.0
    temp_min_share: float = 0.8
    """Share of the window the GPU must be near its slowdown threshold."""

    power_pinned_share: float = 0.98
    """Power draw at or above this share of the enforced limit counts as pinned."""
    power_window_s: float = 600.0
    power_min_share: float = 0.8
    """Share of the window the GPU must be pinned at its limit."""

    ecc_corrected_min_increase: int = 100
    """Corrected (volatile) ECC errors gained during the run before it is worth a warning;
    uncorrectable ones count from the first."""

    starve_window_s: float = 600.0
    """Window for the data-starvation saw-tooth."""
    starve_idle_util_pct: float = 10.0
    """Utilisation below which a sample counts as an idle gap."""
    starve_busy_util_pct: float = 50.0
    """Utilisation from which a sample counts as a busy stretch."""
    starve_min_idle_share: float = 0.3
    """Share of the window a GPU must sit in idle gaps."""
    starve_min_busy_share: float = 0.2
    """…and in busy stretches (a GPU that is idle throughout is not starving, just idle)."""
    starve_min_gaps: int = 3
    """Idle gaps (busy-to-idle transitions) the window must hold to count as a saw-tooth."""
    starve_min_gpu_share: float = 0.5
    """Share of the host's GPUs that must show the saw-tooth."""
    starve_disk_util_pct: float = 80.0
    """Disk %util (window mean) that makes the disk a suspect."""
    starve_disk_await_ms: float = 50.0
    """Disk await (window mean, the worse of read and write) that makes the disk a suspect."""
    starve_cpu_pct: float = 90.0
    """Host CPU (window mean) that points at a CPU-bound input pipeline."""

    swap_pages_s: float = 32.0
    """Swap-in or swap-out rate (pages/s) that counts as swapping."""
    swap_window_s: float = 60.0
    swap_min_share: float = 0.8
    """Share of the window the host must be swapping."""


DEFAULT_LIMITS = DetectorLimits()

_SERIOUS = (REASON_BITS["hw_slowdown"] | REASON_BITS["hw_thermal_slowdown"]
            | REASON_BITS["hw_power_brake_slowdown"] | REASON_BITS["sw_thermal_slowdown"])
_POWER_CAP = REASON_BITS["sw_power_cap"]
_BUCKET_S = 15.0
"""Spacing asked of short windows: the default tier-1 resolution."""

Detector = Callable[[str, HostHistory, "Hello | None", "HostSample | None", DetectorLimits],
                    list[Finding]]


# ------------------------------------------------------------------------------- helpers

def _now(history: HostHistory) -> float | None:
    return history.last_ts


def _cols(series: Series | None, since: float, bins: int | None = None) -> Columns | None:
    if series is None:
        return None
    c = series.columns(since=since, max_points=bins)
    return c if c.t else None


def _covered(c: Columns, now: float, window: float, limits: DetectorLimits) -> bool:
    return now - c.t[0] >= window * limits.min_coverage


def _bins(window: float) -> int:
    return max(4, int(window / _BUCKET_S))


def _share_at_least(c: Columns, floor: float) -> float:
    """Sample-weighted share of the points whose mean is at least ``floor``."""
    total = sum(c.n)
    if not total:
        return 0.0
    return sum(n for m, n in zip(c.mean, c.n, strict=True) if m >= floor) / total


def _first_at_least(c: Columns, floor: float) -> float | None:
    for t, m in zip(c.t, c.mean, strict=True):
        if m >= floor:
            return t
    return None


def _wmean(c: Columns) -> float:
    total = sum(c.n)
    return sum(m * n for m, n in zip(c.mean, c.n, strict=True)) / total if total else 0.0


def _sample_gpu(sample: HostSample | None, idx: int) -> GpuSample | None:
    if sample is None:
        return None
    for g in sample.gpus:
        if g.index == idx:
            return g
    return None


def _step_latest(history: HostHistory, idx: int, field: str) -> float | None:
    st = history.steps(gpu_key(idx, field))
    p = st.latest() if st is not None else None
    return p.mean if p is not None else None


def _fmt(v: float) -> str:
    return f"{v:,.0f}"


def _theil_sen(x: Sequence[float], y: Sequence[float]) -> float:
    """Median of pairwise slopes: ignores up to ~29% outliers, unlike least squares."""
    slopes = []
    n = len(x)
    for i in range(n):
        xi, yi = x[i], y[i]
        for j in range(i + 1, n):
            dx = x[j] - xi
            if dx > 0:
                slopes.append((y[j] - yi) / dx)
    if not slopes:
        return 0.0
    slopes.sort()
    m = len(slopes)
    return slopes[m // 2] if m % 2 else 0.5 * (slopes[m // 2 - 1] + slopes[m // 2])


# ------------------------------------------------------------------------------- leak

@dataclass(frozen=True)
class LeakEstimate:
    """A memory series' growth over the leak window."""

    slope_mib_h: float
    """Theil–Sen slope of the lower envelope over the whole window."""
    first_half_mib_h: float
    second_half_mib_h: float
    start_ts: float
    """Where the envelope first rises: when the growth began (within the window)."""
    span_s: float


def leak_estimate(series: Series | None, now: float,
                  limits: DetectorLimits = DEFAULT_LIMITS) -> LeakEstimate | None:
    """Growth of a memory series, robust to an allocator's habits.

    The window is merged into ``leak_bins`` bins; each bin's minimum is the lower envelope
    (a caching allocator's saw-tooth and single spikes sit above it).  A bin lower than both
    neighbours is lifted (a one-off dip), then the envelope is made a running minimum from
    the right: the floor memory never went back under.  A leak raises that floor steadily;
    one step raises it once, which the per-half slopes catch.

    Returns None with too little data or no rise at all.
    """
    c = _cols(series, now - limits.leak_window_s, limits.leak_bins)
    if c is None or len(c.t) < 6 or now - c.t[0] < limits.leak_min_data_s:
        return None
    lo = list(c.lo)
    for i in range(1, len(lo) - 1):
        if lo[i] < lo[i - 1] and lo[i] < lo[i + 1]:
            lo[i] = min(lo[i - 1], lo[i + 1])
    floor = lo[:]
    for i in range(len(floor) - 2, -1, -1):
        if floor[i + 1] < floor[i]:
            floor[i] = floor[i + 1]
    t0 = c.t[0]
    hours = [(t - t0) / 3600.0 for t in c.t]
    span_h = hours[-1] or 1e-9
    need = limits.leak_min_mib_h * limits.leak_half_share
    if floor[-1] - floor[0] < need * span_h:
        return LeakEstimate(0.0, 0.0, 0.0, c.t[0], now - c.t[0])
    half = len(floor) // 2
    slope = _theil_sen(hours, floor)
    s1 = _theil_sen(hours[:half + 1], floor[:half + 1])
    s2 = _theil_sen(hours[half:], floor[half:])
    start = next((c.t[i - 1] for i in range(1, len(floor)) if floor[i] > floor[0]), c.t[0])
    return LeakEstimate(slope, s1, s2, start, now - c.t[0])


def _is_leak(e: LeakEstimate | None, limits: DetectorLimits) -> bool:
    need = limits.leak_min_mib_h * limits.leak_half_share
    return (e is not None and e.slope_mib_h >= limits.leak_min_mib_h
            and e.first_half_mib_h >= need and e.second_half_mib_h >= need)


def detect_memory_leak(host: str, history: HostHistory, hello: Hello | None,
                       sample: HostSample | None = None,
                       limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """GPU memory that grows steadily and would fill the GPU within ``leak_max_hours_to_full``."""
    now = _now(history)
    if now is None:
        return []
    sample = sample or history.last_sample
    out = []
    for idx in history.gpu_indices():
        series = history.series(gpu_key(idx, "mem_used_mib"))
        est = leak_estimate(series, now, limits)
        if est is None or not _is_leak(est, limits):
            continue
        latest = series.latest() if series is not None else None
        total = _step_latest(history, idx, "mem_total_mib") or _hello_total(hello, idx)
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
        summary = (f"GPU{idx} memory grows {_fmt(slope)} MiB/h; full in ~{hours:.0f} h "
                   f"(at {_fmt(used)} of {_fmt(total)} MiB)")
        who = _leaking_process(history, idx, now, slope, limits, sample)
        if who is not None:
            pid, name, pslope = who
            extra.update(pid=pid, process=name, process_slope_mib_h=round(pslope, 1))
            summary += f"; pid {pid} ({name or '?'}) grows {_fmt(pslope)} MiB/h"
        crit = hours < limits.leak_critical_hours
        out.append(Finding(
            Step.GPU, "memory-leak", Severity.CRITICAL if crit else Severity.WARNING, summary,
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
            g = _sample_gpu(sample, idx)
            name = next((p.name for p in (g.processes or ()) if p.pid == pid), None) \
                if g is not None else None
            best = (pid, name, e.slope_mib_h)
    return best


# ------------------------------------------------------------------------------- clocks

def _mask_share(steps: StepSeries | None, t0: float, t1: float, bits: int) -> float:
    """Share of [t0, t1) during which any of ``bits`` was set."""
    if steps is None or t1 <= t0:
        return 0.0
    on = sum(b - a for a, b, v in steps.segments(t0, t1) if int(v) & bits)
    return on / (t1 - t0)


def detect_throttled_while_busy(host: str, history: HostHistory, hello: Hello | None,
                                sample: HostSample | None = None,
                                limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A busy GPU slowed for most of the window: thermal or hardware slowdown, power brake,
    the power cap, or SM clocks well under their maximum."""
    now = _now(history)
    if now is None:
        return []
    sample = sample or history.last_sample
    window = limits.throttle_window_s
    since = now - window
    out = []
    for idx in history.gpu_indices():
        util = _cols(history.series(gpu_key(idx, "util_pct")), since, _bins(window))
        if util is None or not _covered(util, now, window, limits):
            continue
        clock = _cols(history.series(gpu_key(idx, "sm_clock_mhz")), since, _bins(window))
        clocks = dict(zip(clock.t, clock.mean, strict=True)) if clock is not None else {}
        clock_max = _step_latest(history, idx, "sm_clock_max_mhz")
        reasons = history.steps(gpu_key(idx, "clock_reasons"))
        total = sum(util.n)
        hit = 0.0
        busy_n = 0
        first: float | None = None
        ends = [*util.t[1:], now]
        for t, end, mean, n in zip(util.t, ends, util.mean, util.n, strict=True):
            if mean < limits.throttle_busy_util_pct:
                continue
            busy_n += n
            share = _mask_share(reasons, t, max(end, t + 1e-6), _SERIOUS | _POWER_CAP)
            c = clocks.get(t)
            if c is not None and clock_max and c < limits.throttle_clock_share * clock_max:
                share = 1.0
            if share > 0 and first is None:
                first = t
            hit += share * n
        frac = hit / total if total else 0.0
        if frac < limits.throttle_min_share:
            continue
        g = _sample_gpu(sample, idx)
        names = sorted(set(g.clock_reasons) & {"hw_slowdown", "hw_thermal_slowdown",
                                               "hw_power_brake_slowdown",
                                               "sw_thermal_slowdown", "sw_power_cap"}) \
            if g is not None else []
        busy_pct = _wmean(util)
        what = ", ".join(names) if names else "SM clock low"
        detail = ""
        if g is not None and g.sm_clock_mhz is not None and g.sm_clock_max_mhz:
            detail = f"; SM {_fmt(g.sm_clock_mhz)} of {_fmt(g.sm_clock_max_mhz)} MHz"
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
            Step.GPU, "throttled-while-busy", Severity.WARNING,
            f"GPU{idx} throttled {frac:.0%} of the last {window / 60:.0f} min while "
            f"{busy_pct:.0f}% busy: {what}{detail}", host, gpu=idx, ts=first, action=action,
            extra={"throttled_share": round(frac, 3), "reasons": names,
                   "window_s": window}))
    return out


def detect_temp_near_slowdown(host: str, history: HostHistory, hello: Hello | None,
                              sample: HostSample | None = None,
                              limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU sitting within ``temp_margin_c`` of its slowdown threshold (from the hello)."""
    now = _now(history)
    if now is None or hello is None:
        return []
    window = limits.temp_window_s
    out = []
    for info in hello.facts.gpus:
        if info.temp_slowdown_c is None:
            continue
        near = info.temp_slowdown_c - limits.temp_margin_c
        c = _cols(history.series(gpu_key(info.index, "temp_c")), now - window, _bins(window))
        if c is None or not _covered(c, now, window, limits):
            continue
        share = _share_at_least(c, near)
        if share < limits.temp_min_share:
            continue
        hot = max(c.hi)
        out.append(Finding(
            Step.GPU, "temp-near-slowdown", Severity.WARNING,
            f"GPU{info.index} at {c.mean[-1]:.0f} °C (peak {hot:.0f} °C) for {share:.0%} of "
            f"the last {window / 60:.0f} min, within {limits.temp_margin_c:.0f} °C of its "
            f"{info.temp_slowdown_c:.0f} °C slowdown", host, gpu=info.index,
            ts=_first_at_least(c, near),
            action=(f"Check GPU{info.index}'s cooling before it starts slowing down: fans, "
                    "inlet air, dust, blocked airflow; compare with its neighbours"),
            extra={"temp_c": c.mean[-1], "slowdown_c": info.temp_slowdown_c}))
    return out


def detect_power_pinned(host: str, history: HostHistory, hello: Hello | None,
                        sample: HostSample | None = None,
                        limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU drawing its full power limit most of the time: its speed is set by the limit."""
    now = _now(history)
    if now is None:
        return []
    window = limits.power_window_s
    out = []
    for idx in history.gpu_indices():
        limit = _step_latest(history, idx, "power_limit_w")
        if not limit:
            continue
        c = _cols(history.series(gpu_key(idx, "power_w")), now - window, _bins(window))
        if c is None or not _covered(c, now, window, limits):
            continue
        pinned = limits.power_pinned_share * limit
        share = _share_at_least(c, pinned)
        if share < limits.power_min_share:
            continue
        out.append(Finding(
            Step.GPU, "power-pinned", Severity.INFO,
            f"GPU{idx} at {_wmean(c):.0f} W of its {limit:.0f} W limit for {share:.0%} of the "
            f"last {window / 60:.0f} min", host, gpu=idx,
            ts=_first_at_least(c, pinned),
            action=(f"GPU{idx}'s speed is set by its power limit: check the limit is the "
                    "default (nvidia-smi -q -d POWER) and compare its clocks with the others"),
            extra={"power_w": round(_wmean(c), 1), "limit_w": limit}))
    return out


# ------------------------------------------------------------------------------- hardware

def detect_gpu_dropout(host: str, history: HostHistory, hello: Hello | None,
                       sample: HostSample | None = None,
                       limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU gone from the samples (vs the hello or earlier samples), lost or hung."""
    sample = sample or history.last_sample
    if sample is None:
        return []
    expected = set(history.gpu_indices())
    bus_of: dict[int, str | None] = {}
    if hello is not None:
        for info in hello.facts.gpus:
            expected.add(info.index)
            bus_of[info.index] = info.bus_id
    by_bus = {b.lower(): i for i, b in bus_of.items() if b}
    present = {g.index for g in sample.gpus if g.index >= 0}
    missing_since = history.gpus_missing_since()
    answering = sum(1 for g in sample.gpus if g.state is GpuState.OK)
    n_expected = max(len(expected), len(present))
    out = []
    reported: set[int] = set()
    action = ("Drain the node; check the kernel log for Xid 79/fallen off the bus, 48/94/95 "
              "and AER errors; reset the GPU (nvidia-smi -r) or reboot, and reseat/RMA it if "
              "it drops out again")
    for g in sample.gpus:
        if g.state not in (GpuState.LOST, GpuState.UNRESPONSIVE):
            continue
        idx = g.index if g.index >= 0 else by_bus.get((g.bus_id or "").lower())
        if idx is not None:
            reported.add(idx)
        st = history.steps(gpu_key(idx, "state")) if idx is not None else None
        since = st.latest() if st is not None else None
        name = f"GPU{idx}" if idx is not None else f"GPU {g.bus_id or '?'}"
        out.append(Finding(
            Step.GPU, "gpu-dropout", Severity.CRITICAL,
            f"{name} is {g.state.value}: {answering} of {n_expected} GPUs answer",
            host, gpu=idx, ts=since.t if since is not None and
            since.mean == STATE_CODES[g.state] else sample.ts, action=action,
            extra={"state": g.state.value, "answering": answering, "expected": n_expected}))
    for idx in sorted(expected - present - reported):
        ts = missing_since.get(idx, history.first_ts)
        bus = bus_of.get(idx)
        out.append(Finding(
            Step.GPU, "gpu-dropout", Severity.CRITICAL,
            f"GPU{idx}{f' ({bus})' if bus else ''} dropped out of the samples: "
            f"{answering} of {n_expected} GPUs answer", host, gpu=idx, ts=ts, action=action,
            extra={"answering": answering, "expected": n_expected}))
    return out


def detect_link_downgrade_appeared(host: str, history: HostHistory, hello: Hello | None,
                                   sample: HostSample | None = None,
                                   limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A PCIe link that trained narrower during the run than it was earlier in the run.

    Width only: links drop speed (generation) when idle, but lanes lost stay lost.  A link
    that has been narrow since boot is the layout check's finding, not this one.
    """
    out = []
    for idx in history.gpu_indices():
        st = history.steps(gpu_key(idx, "pcie_width"))
        now = st.latest() if st is not None else None
        if st is None or now is None or st.peak is None or now.mean >= st.peak:
            continue
        out.append(Finding(
            Step.GPU, "link-downgrade-appeared", Severity.WARNING,
            f"GPU{idx} PCIe link fell from x{st.peak:.0f} to x{now.mean:.0f} during the run",
            host, gpu=idx, ts=now.t,
            action=(f"Watch GPU{idx} for AER/Xid errors in the kernel log; reseat the GPU or "
                    "riser at the next maintenance window (lspci -vv shows LnkSta)"),
            extra={"width": int(now.mean), "earlier_width": int(st.peak)}))
    return out


def detect_counters_increasing(host: str, history: HostHistory, hello: Hello | None,
                               sample: HostSample | None = None,
                               limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """ECC error and row-remap counters that grew during the run (resets not counted)."""
    out = []
    for idx in history.gpu_indices():
        unc = history.steps(gpu_key(idx, "ecc_uncorrected_volatile"))
        cor = history.steps(gpu_key(idx, "ecc_corrected_volatile"))
        if unc is not None and unc.increase_total > 0:
            out.append(Finding(
                Step.GPU, "ecc-increasing", Severity.CRITICAL,
                f"GPU{idx}: uncorrectable ECC errors grew by {unc.increase_total:.0f} during "
                f"the run (now {_latest_value(unc):.0f})", host, gpu=idx,
                ts=unc.first_increase_ts,
                action=(f"Drain the node: jobs on GPU{idx} may have read corrupt memory; "
                        "reset the GPU to retire/remap the rows, run a memory test, RMA it if "
                        "errors come back"),
                extra={"increase": unc.increase_total, "kind": "uncorrectable"}))
        elif cor is not None and cor.increase_total >= limits.ecc_corrected_min_increase:
            out.append(Finding(
                Step.GPU, "ecc-increasing", Severity.WARNING,
                f"GPU{idx}: corrected ECC errors grew by {cor.increase_total:,.0f} during the "
                f"run (now {_latest_value(cor):,.0f})", host, gpu=idx,
                ts=cor.first_increase_ts,
                action=(f"Watch GPU{idx}'s memory: a climbing corrected count often precedes "
                        "uncorrectable errors; schedule a reset and a memory test"),
                extra={"increase": cor.increase_total, "kind": "corrected"}))
        grew = []
        first: float | None = None
        for field in ("remap_uncorrectable", "remap_correctable"):
            st = history.steps(gpu_key(idx, field))
            if st is not None and st.increase_total > 0:
                grew.append(f"{st.increase_total:.0f} {field.split('_')[1]}")
                if st.first_increase_ts is not None and (first is None
                                                         or st.first_increase_ts < first):
                    first = st.first_increase_ts
        if grew:
            out.append(Finding(
                Step.GPU, "remap-increasing", Severity.WARNING,
                f"GPU{idx}: rows remapped during the run ({', '.join(grew)})", host, gpu=idx,
                ts=first,
                action=(f"Reset GPU{idx} when the job allows so pending remaps apply; RMA it if "
                        "remapping keeps growing or a remap fails"),
                extra={"remapped": grew}))
    return out


def _latest_value(st: StepSeries) -> float:
    p = st.latest()
    return p.mean if p is not None else 0.0


# ------------------------------------------------------------------------------- host

def detect_data_starvation(host: str, history: HostHistory, hello: Hello | None,
                           sample: HostSample | None = None,
                           limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """GPUs that idle in regular gaps between busy stretches while a disk or the CPU is
    saturated: the input pipeline cannot keep up.

    The suspect (a busy disk, or the CPU) is checked first from 15 s buckets; only then are
    the GPUs' raw utilisation samples read for the saw-tooth.
    """
    now = _now(history)
    if now is None:
        return []
    window = limits.starve_window_s
    since = now - window
    suspects: list[tuple[float, str, dict[str, object]]] = []
    for name in history.disks():
        util = _cols(history.series(disk_key(name, "util")), since, _bins(window))
        if util is None or not _covered(util, now, window, limits):
            continue
        aw = _cols(history.series(disk_key(name, "await")), since, _bins(window))
        q = _cols(history.series(disk_key(name, "aqu_sz")), since, _bins(window))
        u, a = _wmean(util), _wmean(aw) if aw is not None else 0.0
        if u >= limits.starve_disk_util_pct or a >= limits.starve_disk_await_ms:
            holds = [d.path for d in (hello.datasets if hello is not None else ())
                     if d.device == name]
            what = f"{name} is {u:.0f}% busy (await {a:.0f} ms"
            if q is not None:
                what += f", queue {_wmean(q):.0f}"
            what += ")"
            if holds:
                what += f", holding {', '.join(holds)}"
            suspects.append((u + a, what, {"disk": name, "disk_util": round(u, 1),
                                           "disk_await_ms": round(a, 1)}))
    suspects.sort(key=lambda s: -s[0])
    cpu = _cols(history.series(host_key("cpu_pct")), since, _bins(window))
    if cpu is not None and _covered(cpu, now, window, limits) and \
            _wmean(cpu) >= limits.starve_cpu_pct:
        suspects.append((0.0, f"host CPU is {_wmean(cpu):.0f}% busy (a CPU-bound data loader)",
                         {"cpu_pct": round(_wmean(cpu), 1)}))
    if not suspects:
        return []
    gpus = history.gpu_indices()
    starving: list[int] = []
    idle_shares = []
    first: float | None = None
    judged = 0
    for idx in gpus:
        c = _cols(history.series(gpu_key(idx, "util_pct")), since)
        if c is None or not _covered(c, now, window, limits):
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
        Step.GPU, "data-starvation", Severity.WARNING,
        f"GPUs idle {idle_pct:.0%} of the last {window / 60:.0f} min in gaps between busy "
        f"stretches ({len(starving)} of {judged} GPUs) while {what}: the input pipeline is "
        "starving them", host, ts=first, action=action, extra=extra)]


def detect_swap_activity(host: str, history: HostHistory, hello: Hello | None,
                         sample: HostSample | None = None,
                         limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """The host swapping in or out for most of the last minute."""
    now = _now(history)
    if now is None:
        return []
    window = limits.swap_window_s
    since = now - window
    si = _cols(history.series(host_key("swap_in_pages_s")), since)
    so = _cols(history.series(host_key("swap_out_pages_s")), since)
    base = si or so
    if base is None or not _covered(base, now, window, limits):
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
        Step.GPU, "swap-activity", Severity.WARNING,
        f"host swapping {_fmt(mi)} pages/s in, {_fmt(mo)} out over the last "
        f"{window:.0f} s (~{mib_s:.1f} MiB/s)", host, ts=hot[0],
        action=("Find what pushed the host into swap (ps aux --sort=-rss; DataLoader "
                "workers, pinned-memory buffers, page cache pressure); reduce workers or "
                "prefetch, or add RAM; swapping stalls the input pipeline"),
        extra={"swap_in_pages_s": round(mi, 1), "swap_out_pages_s": round(mo, 1)})]


DETECTORS: tuple[Detector, ...] = (
    detect_gpu_dropout, detect_counters_increasing, detect_memory_leak,
    detect_throttled_while_busy, detect_temp_near_slowdown, detect_power_pinned,
    detect_link_downgrade_appeared, detect_data_starvation, detect_swap_activity,
)


EVERY_S: Mapping[Detector, float] = {
    detect_gpu_dropout: 60.0, detect_counters_increasing: 60.0,
    detect_link_downgrade_appeared: 60.0, detect_swap_activity: 60.0,
    detect_throttled_while_busy: 120.0, detect_temp_near_slowdown: 120.0,
    detect_power_pinned: 120.0, detect_data_starvation: 120.0,
    detect_memory_leak: 300.0,
}
"""How often (agent seconds) each detector needs to run: its verdict is about a window of
minutes (sustained throttling) to an hour (a leak), so running it every tick only costs CPU.
A drop-out is also reported from the sample itself at once."""


class DetectorSchedule:
    """Runs each detector of one host when it is due, keeping its last verdict between runs."""

    def __init__(self, limits: DetectorLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._due: dict[Detector, float] = {}
        self._found: dict[Detector, list[Finding]] = {}

    def run(self, host: str, history: HostHistory, hello: Hello | None,
            sample: HostSample) -> tuple[Finding, ...] | None:
        """The findings after the detectors due at ``sample.ts`` ran; None when none was."""
        ran = False
        for det in DETECTORS:
            due = self._due.get(det)
            if due is not None and 0 <= due - sample.ts <= EVERY_S[det]:
                continue
            self._due[det] = sample.ts + EVERY_S[det]
            self._found[det] = det(host, history, hello, sample, self.limits)
            ran = True
        if not ran:
            return None
        out = [f for found in self._found.values() for f in found]
        out.sort(key=lambda f: (-f.severity.rank, f.gpu if f.gpu is not None else -1))
        return tuple(out)


def run_detectors(host: str, history: HostHistory, hello: Hello | None = None,
                  sample: HostSample | None = None,
                  limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Every detector over one host, worst first.

    Args:
        host: the host's name in the fleet.
        history: the host's history.
        hello: the host's hello (GPU list, slowdown thresholds, datasets); None if not seen.
        sample: the newest sample; defaults to the history's.
        limits: thresholds.
    """
    out: list[Finding] = []
    for det in DETECTORS:
        out.extend(det(host, history, hello, sample, limits))
    out.sort(key=lambda f: (-f.severity.rank, f.gpu if f.gpu is not None else -1))
    return out



