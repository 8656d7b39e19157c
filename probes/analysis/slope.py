"""The one memory-growth estimator: Theil–Sen over the lower envelope of binned minima.

The leak detector and the memory panel both read it, so the panel never shows a steep
"slope" the detector has refused to call a leak.  A caching allocator's saw-tooth and single
spikes sit above the lower envelope; a one-off dip is lifted; the envelope is then made a
running minimum from the right (the floor memory never went back under).  A leak raises
that floor steadily; one step raises it once, which the per-half slopes catch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_SPAN_S = 10.0
"""No slope over less history than this: a few seconds of noise is not a trend."""
MIN_POINTS = 3


@dataclass(frozen=True)
class Growth:
    """A memory series' growth over a window, in MiB (or the series' unit) per hour."""

    slope_mib_h: float
    """Theil–Sen slope of the lower envelope over the whole window."""
    first_half_mib_h: float
    second_half_mib_h: float
    start_ts: float
    """Where the envelope first rises: when the growth began (within the window)."""
    span_s: float


def theil_sen(x: Sequence[float], y: Sequence[float]) -> float:
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


def floor_envelope(lows: Sequence[float]) -> list[float]:
    """Bin minima with one-bin dips lifted, as a running minimum from the right."""
    lo = list(lows)
    for i in range(1, len(lo) - 1):
        if lo[i] < lo[i - 1] and lo[i] < lo[i + 1]:
            lo[i] = min(lo[i - 1], lo[i + 1])
    for i in range(len(lo) - 2, -1, -1):
        if lo[i + 1] < lo[i]:
            lo[i] = lo[i + 1]
    return lo


def growth(t: Sequence[float], lows: Sequence[float], now: float,
           min_rise_mib_h: float = 0.0) -> Growth | None:
    """Growth of binned minima ``lows`` at times ``t`` (seconds), as of ``now``.

    Args:
        t: bin start times, oldest first.
        lows: each bin's minimum.
        now: the series' newest time, for the span.
        min_rise_mib_h: a floor that rose less than this per hour over the window is flat
            (slope 0) without fitting.

    Returns:
        The fit; None with fewer than ``MIN_POINTS`` bins or less than ``MIN_SPAN_S``.
    """
    if len(t) < MIN_POINTS or t[-1] - t[0] < MIN_SPAN_S:
        return None
    floor = floor_envelope(lows)
    t0 = t[0]
    hours = [(x - t0) / 3600.0 for x in t]
    span_h = hours[-1] or 1e-9
    rise = floor[-1] - floor[0]
    if rise <= 0 or rise < min_rise_mib_h * span_h:
        return Growth(0.0, 0.0, 0.0, t0, now - t0)
    half = len(floor) // 2
    slope = theil_sen(hours, floor)
    s1 = theil_sen(hours[:half + 1], floor[:half + 1])
    s2 = theil_sen(hours[half:], floor[half:])
    start = next((t[i - 1] for i in range(1, len(floor)) if floor[i] > floor[0]), t0)
    return Growth(slope, s1, s2, start, now - t0)
