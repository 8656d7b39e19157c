"""Clocks, temperature and power held over a window: throttled while busy, near slowdown,
pinned at the power limit.
"""

from __future__ import annotations

from probes.analysis.detectors.window import (
    all_above,
    all_below,
    bins,
    covered,
    first_at_least,
    fmt,
    latest_ts,
    merged,
    points,
    points_many,
    sample_gpu,
    share_at_least,
    slack,
    step_latest,
    wmean,
)
from probes.analysis.findings import Finding
from probes.analysis.judge import SLOWING_REASONS, temp_thresholds
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import (
    REASON_BITS,
    Columns,
    HostHistory,
    SeriesKey,
    StepSeries,
    gpu_key,
)
from probes.triage import Code, Severity, Step
from probes.wire.samples import Hello, HostSample

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
    gpus = [(idx, gpu_key(idx, "util_pct"), step_latest(history, idx, "sm_clock_max_mhz"),
             history.steps(gpu_key(idx, "clock_reasons"))) for idx in history.gpu_indices()]
    busy = [pruned and _busy_now(history, util_key, limits) for _, util_key, _, _ in gpus]
    # A busy GPU is most often one never slowed: proved from its clocks and reasons over
    # the whole window (a superset of the one from its first util point), its util's window
    # is not read (whatever it says, the GPU is skipped below too).  The busy GPUs' clock
    # windows are read together, then the util windows of the GPUs left.
    busy_clocks = iter(points_many(
        history, [gpu_key(g[0], "sm_clock_mhz") for g, b in zip(gpus, busy, strict=True) if b],
        since, nb))
    left: list[tuple[int, SeriesKey, float | None, StepSeries | None, Columns | None]] = []
    for (idx, util_key, clock_max, reasons), b in zip(gpus, busy, strict=True):
        cp: Columns | None = _UNREAD
        if b:
            cp = next(busy_clocks)
            if _unthrottled(reasons, cp, clock_max, since, now, limits):
                continue
        left.append((idx, util_key, clock_max, reasons, cp))
    utils = points_many(history, [g[1] for g in left], since, nb)
    for (idx, _, clock_max, reasons, cp), up in zip(left, utils, strict=True):
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
    rated = [(info, info.temp_slowdown_c) for info in hello.facts.gpus
             if info.temp_slowdown_c is not None]
    nb = bins(window)
    temps = points_many(history, [gpu_key(info.index, "temp_c") for info, _ in rated],
                        now - window, nb)
    for (info, slowdown), p in zip(rated, temps, strict=True):
        near, _ = temp_thresholds(slowdown, limits)
        if p is None or not covered(p, now, window, limits):
            continue
        if limits.temp_min_share > 0 and all_below(p, near):
            continue  # no bin near the threshold: its share is 0
        c = merged(p, nb)
        share = share_at_least(c, near)
        if share < limits.temp_min_share:
            continue
        hot = max(c.hi)
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
    limited = [(idx, limit) for idx in history.gpu_indices()
               if (limit := step_latest(history, idx, "power_limit_w"))]
    nb = bins(window)
    drawn = points_many(history, [gpu_key(idx, "power_w") for idx, _ in limited],
                        now - window, nb)
    for (idx, limit), p in zip(limited, drawn, strict=True):
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


