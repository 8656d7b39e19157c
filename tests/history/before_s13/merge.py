"""Merging a query's points into a bounded number of time bins (what a chart is wide)."""

from __future__ import annotations

import itertools
import operator
from bisect import bisect_left

from tests.history.before_s13.storage import Columns


def merge(c: Columns, bins: int) -> Columns:
    """Merge points into ``bins`` equal time bins: min of mins, max of maxes, weighted mean.

    A point at ``t`` falls in bin ``min(bins - 1, int((t - t0) / width))``.  Times are
    sorted, so each bin's first point is found by bisection (then nudged to agree with that
    formula exactly) and the bin's values are reduced by C builtins over slices: a detector
    asks for thousands of points in tens of bins.  With only a few points a bin, one pass
    over the points costs less than that per-bin set-up.
    """
    t = c.t
    t0, t1 = t[0], t[-1]
    width = (t1 - t0) / bins or 1.0
    n = len(t)
    if n < BISECT_FROM * bins:
        return merge_points(c, bins, t0, width)

    def bin_of(i: int) -> int:
        return min(bins - 1, int((t[i] - t0) / width))

    starts = [0]
    for b in range(1, bins):
        i = max(starts[-1], bisect_left(t, t0 + b * width, starts[-1]))
        while i > starts[-1] and bin_of(i - 1) >= b:
            i -= 1
        while i < n and bin_of(i) < b:
            i += 1
        if i >= n:
            break
        if i > starts[-1]:
            starts.append(i)
    starts.append(n)
    out = Columns([], [], [], [], [])
    for i, j in itertools.pairwise(starts):
        weight = sum(c.n[i:j])
        out.t.append(t[i])
        out.lo.append(min(c.lo[i:j]))
        out.hi.append(max(c.hi[i:j]))
        out.n.append(weight)
        out.mean.append(sum(map(operator.mul, c.mean[i:j], c.n[i:j])) / weight)
    return out


BISECT_FROM = 6
"""Points per bin from which ``merge`` bisects (measured: the two cost the same at about 6)."""


def merge_points(c: Columns, bins: int, t0: float, width: float) -> Columns:
    out = Columns([], [], [], [], [])
    cur = -1
    s = 0.0
    for t, lo, hi, mean, n in zip(c.t, c.lo, c.hi, c.mean, c.n, strict=True):
        b = min(bins - 1, int((t - t0) / width))
        if b != cur:
            if cur >= 0:
                out.mean.append(s / out.n[-1])
            cur = b
            out.t.append(t)
            out.lo.append(lo)
            out.hi.append(hi)
            out.n.append(n)
            s = mean * n
            continue
        if lo < out.lo[-1]:
            out.lo[-1] = lo
        if hi > out.hi[-1]:
            out.hi[-1] = hi
        out.n[-1] += n
        s += mean * n
    if cur >= 0:
        out.mean.append(s / out.n[-1])
    return out
