"""The tiers of one host's history: a raw ring and coarser rings of buckets built from it.

Every ``BUCKET_BATCH`` tier-1 buckets are read back from the raw tier at once, then folded
into the open tier-2 bucket; coarser tiers are combined from the tier below as each bucket
closes.  Per-series costs are thus paid once per batch, not per sample or bucket.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Mapping, Sequence
from operator import truediv
from typing import Any

import numpy as np

from tests.history.before_s13.bucket_cut import (
    Combined,
    Cut,
    bucket_matrices,
    combine_matrices,
    encode_rows,
)
from tests.history.before_s13.keys import codec_for, codecs_of
from tests.history.before_s13.raw import Encoded, RawRing
from tests.history.before_s13.storage import NAN, Codec, Ring, Tier
from tests.history.before_s13.tier2_fold import (
    FullBuckets,
    Groups,
    Stat,
    codec_groups,
    encode_groups,
    fold_full,
    stat,
)

BUCKET_BATCH = 10
"""Tier-1 buckets written at a time (at most; a divisor of a tier-2 bucket)."""

DEFAULT_TIERS: tuple[Tier, ...] = (Tier(1.0, 900.0), Tier(15.0, 4000.0), Tier(60.0, 23400.0),
                                   Tier(300.0, 90000.0))
"""Raw for 15 min, 15 s buckets for 66 min, 1 min for 6.5 h, 5 min for 25 h.

Each tier is as long as a reader needs it, and no longer (the recording keeps the detail):
the detectors' windows of up to 10 min read raw or 15 s points; the leak's hour (40 bins)
and the 1 h chart (240 points, 15 s apart) read the 15 s tier; the 6 h chart (90 s a point)
the 1 min tier; the 24 h chart (360 s a point) the 5 min tier.  A full 8-GPU host costs
about 0.5 MB, so 1024 hosts hold a day in well under 1 GB (``bench_memory_soak.py
--history-only``); the first layout (raw 2 h, 15 s for 12 h, 5 min for 30 days) cost
2.6 MB a host-day and 3.6 MB at 30 days."""



def tiers_for(interval_s: float, tiers: Sequence[Tier] = DEFAULT_TIERS) -> tuple[Tier, ...]:
    """``tiers`` for a source sampled every ``interval_s``: the raw tier is dropped while the
    next one's buckets are no longer than the interval, and that one holds the raw samples.

    A source read every 15 s (Prometheus) fills each 15 s bucket with one sample, so building
    that tier from the raw one copied every value a second time: at 10,000 hosts it was a
    third of the fold.  Its samples are then kept as they came for the 15 s tier's span.
    """
    out = tuple(tiers)
    while len(out) > 2 and out[1].resolution_s <= interval_s:
        out = (Tier(out[0].resolution_s, out[1].span_s), *out[2:])
    return out


class TierSet:
    """The rings of every tier, alike in their series, and the building of coarse buckets.

    Args:
        tiers: finest first; each resolution a multiple of the previous one (the first is
            nominal: raw samples).
    """

    def __init__(self, tiers: Sequence[Tier]) -> None:
        if not tiers:
            raise ValueError("at least one tier")
        for a, b in itertools.pairwise(tiers[1:]):
            ratio = b.resolution_s / a.resolution_s
            if abs(ratio - round(ratio)) > 1e-9 or ratio < 1:
                raise ValueError("each tier's resolution must be a multiple of the previous one")
        self.tiers = tuple(tiers)
        self.raw = RawRing(tiers[0].span_s)
        """The raw tier's ring: a matrix a codec (``raw.py``)."""
        self.rings: list[Ring] = [self.raw, *(Ring(t.span_s, 3, True) for t in tiers[1:])]
        self.keys: dict[str, Codec] = {}
        """Every series held, with its tier-1 codec."""
        self._open: list[float | None] = [None] * len(tiers)
        """Start of the bucket being filled, per tier from 2 on."""
        self._built_to: float | None = None
        """Coarse buckets are written up to here (a tier-1 bucket start)."""
        self._open2: dict[str, Stat] = {}
        """The tier-2 bucket being filled from tier-1 batches: stats per series."""
        self._open2_t: float | None = None
        self._open2_rows = 0
        self._known: tuple[str, ...] | None = None
        """The last series order written whole, while the raw tier's ``gen`` is
        ``_known_gen`` (``append_block``)."""
        self._known_gen = -1
        self.batch_s = self._batch_seconds()
        """Seconds of tier-1 buckets built at a time."""

    def _batch_seconds(self) -> float:
        """A whole number of tier-2 buckets when they are short (up to ``BUCKET_BATCH``
        tier-1 buckets), else the largest divisor of one: a batch never splits a tier-1
        bucket and closes tier-2 buckets as soon as they end."""
        if len(self.tiers) < 2:
            return 0.0
        res1 = self.tiers[1].resolution_s
        if len(self.tiers) < 3:
            return res1 * BUCKET_BATCH
        per = round(self.tiers[2].resolution_s / res1)
        if per <= BUCKET_BATCH:
            return res1 * per * (BUCKET_BATCH // per)
        k = max(d for d in range(1, BUCKET_BATCH + 1) if per % d == 0)
        return res1 * k

    def add_series(self, key: str) -> None:
        """Give every tier a column for ``key``, all missing so far."""
        self.keys[key] = codec_for(key, 1)
        for i, ring in enumerate(self.rings):
            ring.add_series(key, codec_for(key, i))

    def add_many(self, keys: Sequence[str]) -> None:
        """``add_series`` of each of ``keys`` (none held yet), in the same order: each
        ring takes them all at once (a host's first flush adds ~62 series, a GPU appearing
        12; one by one they were ~12 µs each: issue 38, session 10)."""
        pairs = [codecs_of(key) for key in keys]
        coarse = [c for _, c in pairs]
        self.keys.update(zip(keys, coarse, strict=True))
        self.raw.add_many(keys, [r for r, _ in pairs])
        for ring in self.rings[1:]:
            ring.add_many(keys, coarse)

    def drop_series(self, key: str) -> None:
        """Forget ``key`` in every tier."""
        self.keys.pop(key, None)
        for ring in self.rings:
            ring.drop_series(key)

    def append_raw(self, ts: Sequence[float], values: Mapping[str, Sequence[float]]) -> None:
        """Write samples to the raw tier: one float column per series (NaN: missing; a list,
        or an ``array('d')``)."""
        data: dict[str, array[Any]] = {}
        raw = self.raw
        held = self.keys
        new = [key for key in values if key not in held]
        if new:
            self.add_many(new)
        for key, vals in values.items():
            data[key] = raw.codecs[key].encode(vals)
        raw.append(ts, data, keep_from=self._keep_from())

    def append_block(self, ts: Sequence[float], order: tuple[str, ...],
                     block: Sequence[Encoded]) -> None:
        """Write samples to the raw tier as matrices (``block.encode``): ``order`` every
        series in the order first written (a ``Plan``'s: once all held, not looked up again
        while no series is added or dropped)."""
        if self._known is not order or self._known_gen != self.raw.gen:
            held = self.keys
            new = [key for key in order if key not in held]
            if new:
                self.add_many(new)
            self._known, self._known_gen = order, self.raw.gen
        self.raw.append(ts, {}, keep_from=self._keep_from(), block=block)

    def _keep_from(self) -> float:
        """Raw rows at or after this time are not yet read into tier-1 buckets: they must
        stay, however sparse the samples."""
        if len(self.tiers) < 2:
            return math.inf
        return -math.inf if self._built_to is None else self._built_to

    def nbytes(self) -> int:
        """Approximate bytes held by the columns of every tier."""
        return sum(r.nbytes() for r in self.rings)

    def build(self, newest: float) -> None:
        """Write the tier-1 buckets that are complete, read back from the raw tier, and fold
        them into the open tier-2 bucket.

        Batched (``BUCKET_BATCH`` tier-1 buckets, a divisor of a tier-2 bucket): each series
        pays its fixed costs once per batch, not once per bucket, while tier 1 lags the raw
        tier by at most a batch.
        """
        res1 = self.tiers[1].resolution_s
        done = self._built_to
        if done is None:
            first = self.rings[0].oldest()
            assert first is not None
            done = self._built_to = first - first % res1
        step = self.batch_s
        upto = newest - newest % step
        if upto <= done:
            return
        self._built_to = upto
        raw = self.rings[0]
        segs = raw.segments(raw.bisect(done), raw.bisect(upto))
        if not segs:
            return
        ts: list[float] = []
        for p0, p1 in segs:
            ts.extend(raw.times[p0:p1])
        groups: list[tuple[int, int]] = []
        starts: list[float] = []
        g0 = 0
        b0 = ts[0] - ts[0] % res1
        for i, t in enumerate(ts):
            bt = t - t % res1
            if bt != b0:
                groups.append((g0, i))
                starts.append(b0)
                g0, b0 = i, bt
        groups.append((g0, len(ts)))
        starts.append(b0)
        rows = [b - a for a, b in groups]
        ring1 = self.rings[1]
        coarse = len(self.tiers) > 2
        data1: dict[str, array[Any]] = {}
        batch: dict[str, tuple[list[float], list[float], list[float], list[int]]] = {}
        full_batch = FullBuckets([], [], [], [], [])
        """The series with every tier-1 bucket full, folded into tier 2 as matrices."""
        m = len(rows)
        one = len(segs) == 1
        s0, s1 = segs[0]
        cuts = bucket_matrices(raw, segs, groups)
        """The series with a value in every row, cut as matrices (``bucket_cut.py``)."""
        full, grouped = self._tier1_of_cuts(cuts, rows, data1)
        if coarse:
            full_batch.cuts.extend(cuts)
        for key in raw.codecs:
            if key in full:
                continue
            codec = raw.codecs[key]
            col = raw.cols[key]
            vals: Sequence[float]
            if one:
                vals = codec.decode(col[s0:s1])
            else:
                vals = []
                for p0, p1 in segs:
                    vals.extend(codec.decode(col[p0:p1]))
            slices = [vals[a:b] for a, b in groups]
            sums = list(map(sum, slices))
            total = sum(sums)
            if total == total:  # no bucket short of a value: every count is its rows'
                los = list(map(min, slices))
                his = list(map(max, slices))
                ns: list[int] = rows
                means = list(map(truediv, sums, rows))
            else:
                stats = [stat(sl) for sl in slices]
                los = [NAN if st is None else st[0] for st in stats]
                his = [NAN if st is None else st[1] for st in stats]
                sums = [NAN if st is None else float(st[2]) for st in stats]
                ns = [0 if st is None else st[3] for st in stats]
                part = ring1.partial.setdefault(key, {})
                for j, n in enumerate(ns):
                    if n < rows[j]:
                        part[starts[j]] = n
                means = [s / n if n else NAN for s, n in zip(sums, ns, strict=True)]
            flat = [NAN] * (3 * m)
            flat[0::3] = los
            flat[1::3] = his
            flat[2::3] = means
            data1[key] = ring1.codecs[key].encode(flat)
            if coarse:
                if ns is rows:
                    full_batch.add(key, los, his, sums)
                else:
                    batch[key] = (los, his, sums, ns)
        ring1.append(starts, data1, rows)
        ring1.prune_partial()
        if coarse:
            self._fold_tier2(starts, rows, batch, full_batch, upto, grouped)

    def _tier1_of_cuts(self, cuts: list[Cut], rows: list[int], data1: dict[str, array[Any]]
                       ) -> tuple[set[str], tuple[list[str], Groups]]:
        """The tier-1 buckets of the raw cut's series (lo, hi, mean interleaved, the mean
        ``sum / rows`` as Python divides it) encoded a tier-1 codec at a time into
        ``data1``, from the cut's matrices as they are (no list a series: session 9);
        returns their keys, and them in order with their codec groups (the coarse tiers'
        codecs are the same objects: tier 2 takes them again when its keys are these)."""
        if not cuts:
            return set(), ([], [])
        per = np.array(rows, dtype=np.float64)
        keys: list[str] = []
        inters = []
        for ks, los, his, sums in cuts:
            keys += ks
            inter = np.empty((len(ks), 3 * len(rows)))
            inter[:, 0::3] = los
            inter[:, 1::3] = his
            inter[:, 2::3] = sums / per
            inters.append(inter)
        mat = inters[0] if len(inters) == 1 else np.concatenate(inters)
        groups = codec_groups(self.rings[1].codecs, keys)
        data1.update(encode_groups(groups, mat))
        return set(keys), (keys, groups)

    def _fold_tier2(self, starts: list[float], rows: list[int],
                    batch: dict[str, tuple[list[float], list[float], list[float], list[int]]],
                    full: FullBuckets, upto: float,
                    grouped: tuple[list[str], Groups] = ([], [])) -> None:
        """Add new tier-1 buckets to the open tier-2 bucket; write tier-2 buckets that end.

        The series whose every bucket is full (``full``: nearly all) are folded as matrices,
        a series a row (``FullBuckets.fold``); the others one by one.
        """
        res2 = self.tiers[2].resolution_s
        closed_t: list[float] = []
        closed_rows: list[int] = []
        closed: dict[str, list[float]] = {}
        mats = full.matrices()
        full_keys = full.all_keys()
        if (mats is not None and not batch and self._open2_t is None
                and upto >= starts[-1] - starts[-1] % res2 + res2):
            self._close_whole(starts, rows, full_keys, mats, grouped)
            return
        j = 0
        while j < len(starts):
            t2 = starts[j] - starts[j] % res2
            k = j
            while k < len(starts) and starts[k] - starts[k] % res2 == t2:
                k += 1
            if self._open2_t is not None and self._open2_t != t2:
                self._close_tier2(closed_t, closed_rows, closed)
            self._open2_t = t2
            n_rows = sum(rows[j:k])
            self._open2_rows += n_rows
            if mats is not None:
                fold_full(self._open2, full_keys, mats, j, k, n_rows)
            for key, (los, his, sums, ns) in batch.items():
                n = sum(ns[j:k])
                if not n:
                    continue
                if 0 in ns[j:k]:
                    good = [i for i in range(j, k) if ns[i]]
                    st = (min(los[i] for i in good), max(his[i] for i in good),
                          sum(sums[i] for i in good), n)
                else:
                    st = (min(los[j:k]), max(his[j:k]), sum(sums[j:k]), n)
                acc = self._open2.get(key)
                self._open2[key] = st if acc is None else (
                    min(acc[0], st[0]), max(acc[1], st[1]), acc[2] + st[2], acc[3] + st[3])
            j = k
        if self._open2_t is not None and upto >= self._open2_t + res2:
            self._close_tier2(closed_t, closed_rows, closed)
        if closed_t:
            ring2 = self.rings[2]
            by_codec: dict[Codec, list[tuple[str, list[float]]]] = {}
            for key, flat in closed.items():
                codec = ring2.codecs.get(key)
                if codec is not None:
                    by_codec.setdefault(codec, []).append((key, flat))
            data: dict[str, array[Any]] = {}
            for codec, items in by_codec.items():
                for (key, _), arr in zip(items, encode_rows(codec, [f for _, f in items]),
                                         strict=True):
                    data[key] = arr
            ring2.append(closed_t, data, closed_rows)
            ring2.prune_partial()
            for t in closed_t:
                self._cascade(2, t)

    def _close_whole(self, starts: list[float], rows: list[int], keys: list[str],
                     mats: tuple[np.ndarray[Any, Any], ...],
                     grouped: tuple[list[str], Groups] = ([], [])) -> None:
        """``_fold_tier2`` of a batch that opens and closes its tier-2 buckets (none open
        before it, the last one ending with it) and whose every series is full (the steady
        case: a batch is a whole number of tier-2 buckets): each bucket's lo, hi and mean
        computed a column at a time from the tier-1 matrices and encoded a tier-2 codec at
        a time, with no stats a series (``_open2``) nor lists a series (``_close_tier2``);
        the same values bit for bit (``fold_full``'s reductions, the mean ``sum / rows``
        an IEEE division as Python's; issue 38, session 10)."""
        res2 = self.tiers[2].resolution_s
        los, his, sums = mats
        spans: list[tuple[float, int, int]] = []
        j = 0
        while j < len(starts):
            t2 = starts[j] - starts[j] % res2
            k = j
            while k < len(starts) and starts[k] - starts[k] % res2 == t2:
                k += 1
            spans.append((t2, j, k))
            j = k
        inter = np.empty((len(keys), 3 * len(spans)))
        closed_t: list[float] = []
        closed_rows: list[int] = []
        for b, (t2, j, k) in enumerate(spans):
            lo, hi = los[:, j], his[:, j]
            total = 0.0 + sums[:, j]
            for c in range(j + 1, k):
                x, y = los[:, c], his[:, c]
                lo = np.where(x < lo, x, lo)
                hi = np.where(y > hi, y, hi)
                total = total + sums[:, c]
            n_rows = sum(rows[j:k])
            inter[:, 3 * b] = lo
            inter[:, 3 * b + 1] = hi
            inter[:, 3 * b + 2] = total / n_rows
            closed_t.append(t2)
            closed_rows.append(n_rows)
        ring2 = self.rings[2]
        if len(keys) < len(self.keys):  # series without a value in the batch: missing
            have = set(keys)
            missing = [key for key in self.keys if key not in have]
            for key in missing:
                part = ring2.partial.setdefault(key, {})
                for t2 in closed_t:
                    part[t2] = 0
            keys = keys + missing
            inter = np.concatenate([inter, np.full((len(missing), inter.shape[1]), NAN)])
        # tier 1's groups when its keys are these (the steady case: every series cut)
        groups = grouped[1] if keys == grouped[0] else codec_groups(ring2.codecs, keys)
        ring2.append(closed_t, encode_groups(groups, inter), closed_rows)
        ring2.prune_partial()
        for t in closed_t:
            self._cascade(2, t)

    def _close_tier2(self, closed_t: list[float], closed_rows: list[int],
                     closed: dict[str, list[float]]) -> None:
        t2 = self._open2_t
        assert t2 is not None
        m = len(closed_t)
        rows = self._open2_rows
        partial = self.rings[2].partial
        for key in self.keys:
            flat = closed.setdefault(key, [NAN] * (3 * m))
            if len(flat) < 3 * m:
                flat += [NAN] * (3 * m - len(flat))
            st = self._open2.get(key)
            if st is None:
                flat += (NAN, NAN, NAN)
                partial.setdefault(key, {})[t2] = 0
                continue
            flat += (st[0], st[1], st[2] / st[3])
            if st[3] < rows:
                partial.setdefault(key, {})[t2] = st[3]
        closed_t.append(t2)
        closed_rows.append(rows)
        self._open2 = {}
        self._open2_rows = 0
        self._open2_t = None

    def _cascade(self, tier: int, t0: float) -> None:
        """A bucket starting at ``t0`` was written to ``tier``: close coarser buckets it ends."""
        if tier + 1 >= len(self.tiers):
            return
        res = self.tiers[tier + 1].resolution_s
        b = t0 - t0 % res
        open_b = self._open[tier + 1]
        if open_b is None:
            self._open[tier + 1] = b
            return
        if b == open_b:
            return
        rows, got = self._combine(tier, open_b, open_b + res)
        self._open[tier + 1] = b
        if not rows:
            return
        ring = self.rings[tier + 1]
        data: dict[str, array[Any]] = {}
        if got is not None:
            order, have, low, high, total, ns = got
            codecs = ring.codecs
            sel = [i for i in np.flatnonzero(have).tolist() if order[i] in codecs]
            keys = [order[i] for i in sel]
            counts = ns[sel]
            mat = np.empty((len(sel), 3))
            mat[:, 0] = low[sel]
            mat[:, 1] = high[sel]
            mat[:, 2] = total[sel] / counts  # as Python divides a float by an int
            for i in np.flatnonzero(counts < rows).tolist():
                ring.partial.setdefault(keys[i], {})[open_b] = int(counts[i])
            data = encode_groups(codec_groups(codecs, keys), mat)
        ring.append([open_b], data, [rows])
        ring.prune_partial()
        self._cascade(tier + 1, open_b)

    def _combine(self, tier: int, t0: float, t1: float) -> tuple[int, Combined | None]:
        """The rows of ``tier`` in [t0, t1) and each series' low, high, weighted sum and
        count over its buckets there with a value, as ``Ring.rows`` reads them one series
        at a time (its partial counts, NaN means left out), every series of a codec as one
        matrix (``combine_matrices``; None: no row)."""
        ring = self.rings[tier]
        i0, i1 = ring.bisect(t0), ring.bisect(t1)
        segs = ring.segments(i0, i1)
        assert ring.counts is not None
        rows = sum(sum(ring.counts[a:b]) for a, b in segs)
        if not ring.n or not segs:
            return rows, None
        return rows, combine_matrices(ring, segs)
