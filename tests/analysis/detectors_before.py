"""The detectors as they were before issue 38's pruned windows (main ``6999a55``): the
reference ``tests/analysis/test_detectors_pruned.py`` holds the new ones to, verdict by
verdict.  Copied unchanged but for these imports; not imported by the console."""

from __future__ import annotations

import statistics

from probes.analysis.detectors import DETECTORS, EVERY_S, keep_onsets
from probes.analysis.detectors.memory import (
    _hello_total,
    _is_leak,
    _leaking_process,
    leak_estimate,
)
from probes.analysis.detectors.window import (
    bins,
    cols,
    covered,
    first_at_least,
    fmt,
    latest_ts,
    sample_gpu,
    share_at_least,
    step_latest,
    wmean,
)
from probes.analysis.findings import Finding
from probes.analysis.judge import SLOWING_REASONS, leak_urgency, temp_thresholds
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import REASON_BITS, HostHistory, StepSeries, disk_key, gpu_key, host_key
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
    for idx in history.gpu_indices():
        util = cols(history.series(gpu_key(idx, "util_pct")), since, bins(window))
        if util is None or not covered(util, now, window, limits):
            continue
        clock = cols(history.series(gpu_key(idx, "sm_clock_mhz")), since, bins(window))
        clocks = dict(zip(clock.t, clock.mean, strict=True)) if clock is not None else {}
        clock_max = step_latest(history, idx, "sm_clock_max_mhz")
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
        c = cols(history.series(gpu_key(info.index, "temp_c")), now - window, bins(window))
        if c is None or not covered(c, now, window, limits):
            continue
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
        c = cols(history.series(gpu_key(idx, "power_w")), now - window, bins(window))
        if c is None or not covered(c, now, window, limits):
            continue
        pinned = limits.power_pinned_share * limit
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
    for name in history.disks():
        util = cols(history.series(disk_key(name, "util")), since, bins(window))
        if util is None or not covered(util, now, window, limits):
            continue
        aw = cols(history.series(disk_key(name, "await")), since, bins(window))
        q = cols(history.series(disk_key(name, "aqu_sz")), since, bins(window))
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
    cpu = cols(history.series(host_key("cpu_pct")), since, bins(window))
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


BUSY_POWER_HISTORY_S = 3600.0
"""How far back a GPU's usual busy power is read (before the window)."""
LIMIT_SHARE = 0.6
"""A GPU that really computes at full utilisation draws at least this share of its limit."""
BUSY_UTIL_PCT = 80.0
"""Utilisation from which a past sample counts as busy, for the usual busy power."""
MIN_GPUS = 2
"""A host with fewer GPUs busy this way says nothing (one light kernel is no hang)."""
ACTION_HANG = ("Every rank of the job is likely waiting in a collective that one rank never "
               "joined: find the rank that is not in it (py-spy dump each rank's process; "
               "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 make the "
               "watchdog name it), before the watchdog's timeout kills the job")


def _usual_busy_power(history: HostHistory, idx: int, since: float) -> float | None:
    """What the GPU draws when it really computes: the 90th percentile of its power while
    busy in the hour before ``since``, but never under ``LIMIT_SHARE`` of its power limit
    (a job hung since before the console started has no busy past to read)."""
    start = since - BUSY_POWER_HISTORY_S
    limit = step_latest(history, idx, "power_limit_w")
    floor = LIMIT_SHARE * limit if limit else 0.0
    util = cols(history.series(gpu_key(idx, "util_pct")), start, bins(BUSY_POWER_HISTORY_S))
    power = cols(history.series(gpu_key(idx, "power_w")), start, bins(BUSY_POWER_HISTORY_S))
    if util is not None and power is not None:
        watts = dict(zip(power.t, power.mean, strict=True))
        busy = sorted(watts[t] for t, u in zip(util.t, util.mean, strict=True)
                      if t < since and u >= BUSY_UTIL_PCT and t in watts)
        if len(busy) >= 4:
            return max(busy[int(0.9 * (len(busy) - 1))], floor)
    return floor or None


def detect_collective_hang(host: str, history: HostHistory, hello: Hello | None,
                           sample: HostSample | None = None,
                           limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """``collective-hang`` when every GPU of the host sat busy at low power for the window."""
    now = latest_ts(history)
    if now is None:
        return []
    window = limits.hang_window_s
    since = now - window
    gpus = list(history.gpu_indices())
    spinning: list[tuple[int, float, float, float]] = []
    for idx in gpus:
        util = cols(history.series(gpu_key(idx, "util_pct")), since, bins(window))
        power = cols(history.series(gpu_key(idx, "power_w")), since, bins(window))
        if util is None or power is None or not covered(util, now, window, limits):
            return []
        if min(util.mean) < limits.hang_util_pct:
            return []
        usual = _usual_busy_power(history, idx, since)
        drawn = max(power.mean)
        if not usual or drawn > limits.hang_power_share * usual:
            return []
        spinning.append((idx, util.t[0], drawn, usual))
    if len(spinning) < MIN_GPUS:
        return []
    start = min(t for _, t, _, _ in spinning)
    drawn = max(d for _, _, d, _ in spinning)
    usual = statistics.median(u for _, _, _, u in spinning)
    return [Finding(Step.NCCL, Code.COLLECTIVE_HANG, Severity.WARNING,
                    f"all {len(spinning)} GPUs busy at idle power for "
                    f"{(now - start) / 60:.0f}+ min (≤ {drawn:.0f} W; computing they draw "
                    f"≥ {usual:.0f} W): NCCL spinning in a collective that never "
                    "completes", host, ts=start, action=ACTION_HANG,
                    extra={"gpus": [i for i, _, _, _ in spinning], "power_w": round(drawn),
                           "usual_power_w": round(usual)})]


class ScheduleBefore:
    """``DetectorSchedule`` before its idle window: every detector's due time looked up on
    every tick."""

    def __init__(self, limits: DetectorLimits = DEFAULT_LIMITS, stretch: float = 1.0) -> None:
        self.limits = limits
        self.stretch = stretch
        self._due: dict[object, float] = {}
        self._found: dict[object, list[Finding]] = {}
        self._onset: dict[tuple[str, str, int | None, int | None], float] = {}

    def run(self, host: str, history: HostHistory, hello: Hello | None,
            sample: HostSample) -> tuple[Finding, ...] | None:
        """The findings after the detectors due at ``sample.ts`` ran; None when none was."""
        ran = False
        for det in DETECTORS:
            due = self._due.get(det)
            every = EVERY_S[det] * self.stretch
            if due is not None and 0 <= due - sample.ts <= every:
                continue
            self._due[det] = sample.ts + every
            self._found[det] = det(host, history, hello, sample, self.limits)
            ran = True
        if not ran:
            return None
        out = keep_onsets([f for found in self._found.values() for f in found], self._onset)
        out.sort(key=lambda f: (-f.severity.rank, f.gpu if f.gpu is not None else -1))
        return tuple(out)


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
