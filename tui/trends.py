"""Small pure reductions of history for the screens (no Textual here, easy to unit-test)."""

from __future__ import annotations

from collections.abc import Sequence

from probes.fleet_state import HostState
from probes.history import gpu_key
from widgets.memory_chart import MemorySeries

RISING_MIB_H = 256.0
"""A steady climb above this many MiB per hour is flagged on the chart as a possible leak."""
MIN_SPAN_S = 10.0
"""Fit no slope over less history than this: a few seconds of noise is not a trend."""


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(ts_s, value)`` points, in value units per hour.

    Returns None with fewer than two points or less than ``MIN_SPAN_S`` of history.
    """
    n = len(points)
    if n < 2 or points[-1][0] - points[0][0] < MIN_SPAN_S:
        return None
    t0 = points[0][0]
    mean_t = sum(t - t0 for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - t0 - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - t0 - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600.0


CHART_POINTS = 120
"""Points per GPU line: about the width a chart gets; the history merges buckets to fit."""


def memory_series(state: HostState, window_s: float = 3600.0) -> tuple[MemorySeries, ...]:
    """One chart series per GPU that has reported memory, in index order, over the window
    (0: everything the history holds)."""
    out = []
    now = state.history.last_ts
    if now is None:
        return ()
    since = now - window_s if window_s > 0 else None
    for index in state.history.gpu_indices():
        series = state.history.series(gpu_key(index, "mem_used_mib"))
        if series is None:
            continue
        points = [(p.t, p.mean) for p in series.points(since=since, max_points=CHART_POINTS)]
        if not points:
            continue
        slope = slope_per_hour(points)
        latest = series.latest()
        out.append(MemorySeries(
            index=index,
            points_mib=tuple(v for _, v in points),
            current_mib=latest.mean if latest is not None else points[-1][1],
            slope_mib_h=slope,
            rising=slope is not None and slope >= RISING_MIB_H,
        ))
    return tuple(out)
