"""The host under the GPUs: data starvation behind a busy disk or CPU, swapping.
"""

from __future__ import annotations

from probes.analysis.detectors.window import (
    all_below,
    bins,
    cols,
    covered,
    fmt,
    latest_ts,
    merged,
    points,
    points_many,
    wmean,
)
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory, disk_key, gpu_key, host_key
from probes.triage import Code, Severity, Step
from probes.wire.samples import Hello, HostSample


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
    utils = points_many(history, [gpu_key(idx, "util_pct") for idx in gpus], since)
    for idx, c in zip(gpus, utils, strict=True):
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
    si, so = points_many(history, [host_key("swap_in_pages_s"), host_key("swap_out_pages_s")],
                         since)
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


