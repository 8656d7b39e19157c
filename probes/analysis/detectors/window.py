"""Window helpers the detectors share: a series' recent columns, coverage, shares and means."""

from __future__ import annotations

from probes.analysis.limits import DetectorLimits
from probes.history import Columns, GpuStepField, HostHistory, Series, gpu_key
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

