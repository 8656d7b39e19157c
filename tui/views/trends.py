"""Small pure reductions of history for the screens (no Textual here, easy to unit-test)."""

from __future__ import annotations

from collections.abc import Sequence

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
