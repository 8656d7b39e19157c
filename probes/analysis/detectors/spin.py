"""A hung collective seen from the GPUs: every GPU of the host busy at a fraction of its
usual power, for minutes.

NCCL's kernels spin while they wait for a peer that never sends: utilisation reads 100 %
while the SMs do no arithmetic, so the board draws near idle power (ux review §4: the demo's
hung job read 100 % at 160 W on 700 W cards, and every row said ``ok``).  A job that really
computes at 100 % draws most of its limit.  The verdict needs every GPU of the host to show
it (one GPU alone is more likely a light kernel), and it comes minutes before the watchdog's
timeout, which by default waits ten.
"""

from __future__ import annotations

import statistics
from operator import mul

from probes.analysis.detectors.window import (
    all_above,
    all_below,
    bins,
    cols,
    covered,
    latest_ts,
    merged,
    points,
    points_many,
    slack,
    step_latest,
)
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import Columns, HostHistory, SeriesKey, gpu_key
from probes.triage import Code, Severity, Step
from probes.wire.samples import Hello, HostSample

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


def _usual_busy_power(history: HostHistory, idx: int, since: float,
                      above: float | None = None) -> float | None:
    """What the GPU draws when it really computes: the 90th percentile of its power while
    busy in the hour before ``since``, but never under ``LIMIT_SHARE`` of its power limit
    (a job hung since before the console started has no busy past to read).

    With ``above``: 0.0 as soon as the hour's points prove the answer is under ``above``
    (no point drew that much, nor does the floor), before merging them.
    """
    start = since - BUSY_POWER_HISTORY_S
    limit = step_latest(history, idx, "power_limit_w")
    floor = LIMIT_SHARE * limit if limit else 0.0
    nb = bins(BUSY_POWER_HISTORY_S)
    key = gpu_key(idx, "power_w")
    bound = above is not None and floor < above - slack(above)
    top = coarse_top(history, key, start) if bound or floor > 0 else None
    if bound and top is not None and above is not None and below(top, above):
        return 0.0  # the hour's coarse highs prove what its points would (below)
    if floor > 0 and top is not None and below(top, floor):
        # No point of the hour reaches the floor, so no busy bin does (a bin's mean is at
        # most its points'): the answer is the floor however many bins were busy.  A hung
        # GPU's hour once its busy past is an hour behind: read fine, 8 GPUs a minute, it
        # grew the hung host's fold 80 → 245 µs a sample over 6 h (issue 38, session 9).
        return floor
    pp = points(history.series(key), start, nb)
    if above is not None and floor < above - slack(above) and (pp is None
                                                             or all_below(pp, above)):
        return 0.0  # a busy bin's power is at most its points', so the answer < ``above``
    util = cols(history.series(gpu_key(idx, "util_pct")), start, nb)
    power = merged(pp, nb) if pp is not None else None
    if util is not None and power is not None:
        watts = dict(zip(power.t, power.mean, strict=True))
        busy = sorted(watts[t] for t, u in zip(util.t, util.mean, strict=True)
                      if t < since and u >= BUSY_UTIL_PCT and t in watts)
        if len(busy) >= 4:
            return max(busy[int(0.9 * (len(busy) - 1))], floor)
    return floor or None


COARSE_BINS = 8
"""Bins asked of the coarse read that bounds an hour: its points come from the 1 or 5 min
tier (a few dozen, against the 15 s tier's 240)."""


def surely_below(history: HostHistory, key: SeriesKey, start: float, ceiling: float) -> bool:
    """True only when ``all_below(points(series, start, …), ceiling)`` would hold (or there
    would be no points), read from far fewer points: a coarse read of the same span.

    Every point a finer read returns is the mean of some of the samples a coarse bucket
    holds, so it is at most that bucket's high; the coarse read starts one coarsest bucket
    earlier, so every fine point's samples lie inside it.  ``coarse_margin`` covers the
    codecs' rounding (half precision raw, 0.1 W steps in the bucket tiers).  A busy GPU
    drawing its usual power is read every minute this way: the hour of 15 s points (~190 µs)
    only when the highs come near ``ceiling``.
    """
    top = coarse_top(history, key, start)
    return top is not None and below(top, ceiling)


def coarse_top(history: HostHistory, key: SeriesKey, start: float) -> float | None:
    """The highest bucket high of ``surely_below``'s coarse read (None: no points, or NaN):
    read once, it bounds the hour against several ceilings."""
    lead = max(t.resolution_s for t in history.tiers)
    c = points(history.series(key), start - lead, COARSE_BINS)
    if c is None:
        return None
    top = max(c.hi)
    return None if top != top else top


def below(top: float, ceiling: float) -> bool:
    """``coarse_top``'s ``top`` proves every fine point of the span under ``ceiling``."""
    return top + coarse_margin(top) < ceiling - slack(ceiling)


def coarse_margin(v: float) -> float:
    """More than a fine point can exceed its coarse bucket's high by the codecs' rounding."""
    return 2e-3 * abs(v) + 0.1


def detect_collective_hang(host: str, history: HostHistory, hello: Hello | None,
                           sample: HostSample | None = None,
                           limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """``collective-hang`` when every GPU of the host sat busy at low power for the window.

    Any GPU that is not spinning rules the host out, whichever it is, so the GPUs may be
    judged in any order: the first alone (a busy host's first GPU draws its power, and
    nothing more is read), then the others' windows read together, a field at a time
    (``points_many``: issue 38), their utilisation judged before any power is read.
    """
    now = latest_ts(history)
    if now is None:
        return []
    window = limits.hang_window_s
    since = now - window
    gpus = list(history.gpu_indices())
    if len(gpus) < MIN_GPUS:
        return []
    nb = bins(window)
    first = gpus[0]
    up0 = points(history.series(gpu_key(first, "util_pct")), since, nb)
    if not _busy(up0, now, window, nb, limits):
        return []
    assert up0 is not None
    got = _spins(history, first, up0, points(history.series(gpu_key(first, "power_w")),
                                             since, nb), since, nb, limits)
    if got is None:
        return []
    rest = gpus[1:]
    ups = points_many(history, [gpu_key(i, "util_pct") for i in rest], since, nb)
    for up in ups:
        if not _busy(up, now, window, nb, limits):
            return []
    powers = points_many(history, [gpu_key(i, "power_w") for i in rest], since, nb)
    spinning = [got]
    for idx, up, power in zip(rest, ups, powers, strict=True):
        assert up is not None
        one = _spins(history, idx, up, power, since, nb, limits)
        if one is None:
            return []
        spinning.append(one)
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


def _busy(up: Columns | None, now: float, window: float, nb: int,
          limits: DetectorLimits) -> bool:
    """The GPU's utilisation window is covered and no bin of it falls under the limit."""
    if up is None or not covered(up, now, window, limits):
        return False
    if all_below(up, limits.hang_util_pct):
        return False  # every bin under it, so the least is too
    # (every point over it: so is every bin, no need to merge)
    return all_above(up, limits.hang_util_pct) or \
        min(merged(up, nb).mean) >= limits.hang_util_pct


def _spins(history: HostHistory, idx: int, up: Columns, power: Columns | None, since: float,
           nb: int, limits: DetectorLimits) -> tuple[int, float, float, float] | None:
    """A busy GPU drawing under its share of its usual busy power: (GPU, window start,
    drawn, usual); None when it draws more (or nothing is known of its power).

    ``drawn`` is the highest of the window's bins, merged from its points; the highest bin
    draws at least the window's weighted mean (less rounding: ``slack``), so a GPU drawing
    more than its share of its usual power by that much is ruled out before the merge, the
    dearest step of the detector (a busy host's first GPU, every run).
    """
    if power is None:
        return None
    share = limits.hang_power_share
    pm = power.mean
    if len(pm) > nb:
        mean = sum(map(mul, pm, power.n)) / sum(power.n)
        least = mean - slack(mean)
        drawn = None
    else:
        least = drawn = max(pm)
    # drawn > share * usual when usual is under drawn / share: the hour's points can say so
    usual = _usual_busy_power(history, idx, since, least / share if share > 0 else None)
    if not usual or least > share * usual:
        return None
    if drawn is None:
        drawn = max(merged(power, nb).mean)
    if drawn > share * usual:
        return None
    return (idx, up.t[0], drawn, usual)
