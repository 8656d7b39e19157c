"""A host's history read back: a window of series across the tiers and the staged samples.

``HostHistory``'s queries (its state is the history's), apart from its writing, so that
neither module outgrows the layer test's cap (issue 38, session 7: moved from ``host.py``
as it was).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress, repeat

from tests.history.before_s13.merge import merge
from tests.history.before_s13.staged import Staged
from tests.history.before_s13.storage import Columns, Point, Tier
from tests.history.before_s13.tiers import TierSet


class HistoryQueries:
    """``HostHistory``'s windows of its series (``Series.columns``, ``windows``)."""

    store: TierSet
    tiers: tuple[Tier, ...]
    first_ts: float | None
    last_ts: float | None
    _staged: list[Staged]

    def _staged_values(self, key: str) -> list[float | None]:
        raise NotImplementedError

    def _latest_staged(self, key: str) -> Point | None:
        raise NotImplementedError

    def _latest(self, key: str) -> Point | None:
        p = self._latest_staged(key)
        if p is not None:
            return p
        ring = self.store.rings[0]
        col = ring.cols.get(key)
        if col is None:
            return None
        codec = ring.codecs[key]
        for i in range(ring.n - 1, max(-1, ring.n - 64), -1):
            pos = (ring.start + i) % ring.cap
            v = codec.decode(col[pos:pos + 1])[0]
            if v == v:
                return Point(ring.times[pos], v, v, v, 1)
        return None

    def _query(self, key: str, since: float | None, until: float | None,
               max_points: int | None, merged: bool = True) -> Columns:
        return self._query_many((key,), since, until, max_points, merged)[0]

    def windows(self, keys: Sequence[str], since: float | None,
                max_points: int | None = None) -> list[Columns]:
        """``series(key).unmerged(since, max_points)`` of each key (empty where the key was
        never seen), read together: the tiers are chosen, and each ring's rows found, once
        for all of them (a detector reads one field of every GPU: issue 38)."""
        return self._query_many(keys, since, None, max_points, merged=False)

    def _query_many(self, keys: Sequence[str], since: float | None, until: float | None,
                    max_points: int | None, merged: bool = True) -> list[Columns]:
        """``_query`` of each key: the tier choice depends on the rings, not the series."""
        outs = [Columns([], [], [], [], []) for _ in keys]
        newest = self.last_ts
        if newest is None:
            return outs
        lo = -math.inf if since is None else since
        hi = newest if until is None else min(until, newest)
        have: list[tuple[int, float]] = []
        for i, r in enumerate(self.store.rings):
            o = r.oldest()
            if o is not None:
                have.append((i, o))
        if self._staged and not have:
            have = [(0, self._staged[0].ts)]
        if not have:
            return outs
        first = self.first_ts if self.first_ts is not None else lo
        covering = [i for i, o in have if o <= max(lo, first)]
        tier = covering[0] if covering else min(have, key=lambda x: (x[1], -x[0]))[0]
        coarse_first = max_points is not None and max_points > 0
        if coarse_first:
            first_t = max(lo, min(o for _, o in have))
            width = (hi - first_t) / max_points if max_points else 0.0
            old = dict(have)
            while (tier + 1 < len(self.tiers) and self.tiers[tier + 1].resolution_s <= width
                   and tier + 1 in old and old[tier + 1] <= max(lo, old[tier])):
                tier += 1
        start = lo
        for k in range(tier, -1, -1):
            if start > hi:
                break
            ring = self.store.rings[k]
            if k == 0:
                ring.rows_many(keys, start, math.nextafter(hi, math.inf), outs)
                self._staged_rows(keys, start, hi, outs)
                break
            res = self.tiers[k].resolution_s
            finer_old = self.store.rings[k - 1].oldest()
            if finer_old is None and k - 1 == 0 and self._staged:
                finer_old = self._staged[0].ts
            if coarse_first or finer_old is None:
                newest_k = ring.newest()
                cut = start if newest_k is None else max(start, newest_k + res)
            else:
                cut = max(start, math.ceil(finer_old / res) * res)
            ring.rows_many(keys, start, min(cut, math.nextafter(hi, math.inf)), outs)
            start = cut
        if merged and max_points is not None and max_points > 0:
            return [merge(out, max_points) if len(out.t) > max_points else out
                    for out in outs]
        return outs

    def _staged_rows(self, keys: Sequence[str], since: float, until: float,
                     outs: list[Columns]) -> None:
        """The staged points of each key in [since, until], after the rings' in ``outs``."""
        staged = self._staged
        if not staged or staged[-1].ts < since or staged[0].ts > until:
            return
        ts = [r.ts for r in staged]
        inside = [since <= t <= until for t in ts]
        for key, out in zip(keys, outs, strict=True):
            got = self._staged_values(key)
            keep = [i and v is not None and v == v for i, v in zip(inside, got, strict=True)]
            if any(keep):
                vals = [*map(float, compress(got, keep))]  # type: ignore[arg-type]
                out.t.extend(compress(ts, keep))
                out.lo.extend(vals)
                out.hi.extend(vals)
                out.mean.extend(vals)
                out.n.extend(repeat(1, len(vals)))
