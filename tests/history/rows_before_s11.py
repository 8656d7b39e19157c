"""``Ring.rows_many`` and ``Ring._rows_of`` as they were before session 11's batched reads
(main ``c12fc7c``, ``probes/history/storage.py``), copied unchanged: the reference
``test_rows_batched_s11`` holds today's reads to (``RawRing`` inherited them then)."""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Sequence
from itertools import compress
from typing import Any

from probes.history.storage import Columns


def rows_many(self: Any, keys: Sequence[str], since: float, until: float,
              outs: list[Columns]) -> None:
    """``rows`` of each key into its ``outs``: the rows in range found once."""
    if not self.n:
        return
    segs = self.segments(self.bisect(since), self.bisect(until))
    if not segs:
        return
    times = [self.times[p0:p1] for p0, p1 in segs]
    for key, out in zip(keys, outs, strict=True):
        c = self.cols.get(key)
        if c is not None:
            _rows_of(self, key, c, segs, times, out)


def _rows_of(self: Any, key: str, c: array[Any], segs: list[tuple[int, int]],
             times: list[array[float]], out: Columns) -> None:
    codec = self.codecs[key]
    partial = self.partial.get(key)
    for (p0, p1), t in zip(segs, times, strict=True):
        if self.width == 1:
            v = codec.decode(c[p0:p1])
            if any(map(math.isnan, v)):
                keep = [x == x for x in v]
                t = array("d", compress(t, keep))
                v = list(compress(v, keep))
            out.t.extend(t)
            out.lo.extend(v)
            out.hi.extend(v)
            out.mean.extend(v)
            out.n.extend(itertools.repeat(1, len(t)))
            continue
        assert self.counts is not None
        vals = codec.decode(c[3 * p0:3 * p1])
        lo, hi, mean = vals[0::3], vals[1::3], vals[2::3]
        counts: Sequence[int] = self.counts[p0:p1]
        if partial:
            counts = [partial.get(ti, ci) for ti, ci in zip(t, counts, strict=True)]
        if any(map(math.isnan, mean)):
            keep = [m == m for m in mean]
            t, lo, hi, mean, counts = (list(compress(col, keep))  # type: ignore[assignment]
                                       for col in (t, lo, hi, mean, counts))
        out.t.extend(t)
        out.lo.extend(lo)
        out.hi.extend(hi)
        out.mean.extend(mean)
        out.n.extend(counts)
