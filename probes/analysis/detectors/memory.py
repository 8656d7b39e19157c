"""Memory growth over the leak window: the leak detector and the process it names.
"""

from __future__ import annotations

from probes.analysis.detectors.window import (
    cols,
    fmt,
    latest_ts,
    points_many,
    sample_gpu,
    slack,
    step_latest,
)
from probes.analysis.findings import Finding
from probes.analysis.judge import leak_urgency
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.slope import Growth, growth
from probes.history import Columns, HostHistory, Series, gpu_key, proc_key
from probes.triage import Code, Step
from probes.wire.samples import Hello, HostSample


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
    gpus = history.gpu_indices()
    keys = [gpu_key(idx, "mem_used_mib") for idx in gpus]
    pruned = limits.leak_min_mib_h > 0
    windows = points_many(history, keys, now - limits.leak_window_s, limits.leak_bins) \
        if pruned else [None] * len(keys)
    for idx, key, p in zip(gpus, keys, windows, strict=True):
        if pruned and (p is None or _surely_flat(
                p, limits.leak_bins, limits.leak_min_mib_h * limits.leak_half_share)):
            continue
        series = history.series(key)
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


