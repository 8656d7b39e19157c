"""Window helpers the detectors share: a series' recent columns, coverage, shares and means.

A detector asks for a window merged into bins (``cols``); most windows hold nothing to
report, and merging is most of a query's cost.  So the costly detectors read the window's
points first (``points``), rule it out when the points alone prove no bin can hold the
trouble (``all_below``: no bin's mean reaches a floor no point's mean reaches), and merge
only the windows left (``merged``): the verdicts are those of merging every window.
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.analysis.limits import DetectorLimits
from probes.history import Columns, GpuStepField, HostHistory, Series, SeriesKey, gpu_key
from probes.history.merge import merge
from probes.wire.samples import GpuSample, HostSample

BUCKET_S = 15.0
"""Spacing asked of short windows: the default tier-1 resolution."""


def latest_ts(history: HostHistory) -> float | None:
    return history.last_ts


def cols(series: Series | None, since: float, bins: int | None = None) -> Columns | None:
    if series is None:
        return None
    c = series.columns(since=since, max_points=bins)
    return c if c.t else None


def points(series: Series | None, since: float, bins: int | None = None) -> Columns | None:
    """What ``cols`` would merge into ``bins``, not merged yet (``merged`` finishes it)."""
    if series is None:
        return None
    c = series.unmerged(since, bins)
    return c if c.t else None


def points_many(history: HostHistory, keys: Sequence[SeriesKey], since: float,
                bins: int | None = None) -> list[Columns | None]:
    """``points`` of each key's series (None: never seen, or no point in the window), read
    together (``HostHistory.windows``: one field of every GPU; issue 38)."""
    return [c if c.t else None for c in history.windows(keys, since, bins)]


def merged(c: Columns, bins: int | None) -> Columns:
    """``points``' answer merged as ``cols`` merges it: ``cols`` == ``merged(points)``."""
    return merge(c, bins) if bins is not None and len(c.t) > bins > 0 else c


def slack(v: float) -> float:
    """More than the rounding of a weighted mean of points about ``v``."""
    return 1e-9 * abs(v) + 1e-9


def all_below(c: Columns, floor: float) -> bool:
    """Every point's mean under ``floor``, so every bin merged from them is too: no bin's
    mean (a weighted mean of its points') reaches ``floor``."""
    return max(c.mean) < floor - slack(floor)


def all_above(c: Columns, ceiling: float) -> bool:
    """Every point's mean over ``ceiling``, so every merged bin's is too."""
    return min(c.mean) > ceiling + slack(ceiling)


def covered(c: Columns, now: float, window: float, limits: DetectorLimits) -> bool:
    return now - c.t[0] >= window * limits.min_coverage


def bins(window: float) -> int:
    return max(4, int(window / BUCKET_S))


def share_at_least(c: Columns, floor: float) -> float:
    """Sample-weighted share of the points whose mean is at least ``floor``."""
    total = sum(c.n)
    if not total:
        return 0.0
    return sum(n for m, n in zip(c.mean, c.n, strict=True) if m >= floor) / total


def first_at_least(c: Columns, floor: float) -> float | None:
    for t, m in zip(c.t, c.mean, strict=True):
        if m >= floor:
            return t
    return None


def wmean(c: Columns) -> float:
    total = sum(c.n)
    return sum(m * n for m, n in zip(c.mean, c.n, strict=True)) / total if total else 0.0


def sample_gpu(sample: HostSample | None, idx: int) -> GpuSample | None:
    if sample is None:
        return None
    for g in sample.gpus:
        if g.index == idx:
            return g
    return None


def step_latest(history: HostHistory, idx: int, field: GpuStepField) -> float | None:
    st = history.steps(gpu_key(idx, field))
    p = st.latest() if st is not None else None
    return p.mean if p is not None else None


def fmt(v: float) -> str:
    return f"{v:,.0f}"

