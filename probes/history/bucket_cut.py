"""A batch of tier-1 buckets cut from the raw tier's columns as matrices (issue 38, session 7).

``TierSet.build`` reads a batch of raw rows back (two minutes of every series of a host) and
cuts each series into buckets: its sum, min and max per bucket, then encodes lo, hi and mean
for tier 1.  Series by series that was ~14 µs each, a tenth of a host's fold.  Here every
series stored alike (half precision, float32) is one matrix, a series a row, cut with a
numpy reduction a bucket; then the buckets of every series with the same tier-1 codec are
encoded with one cast.

The values are those of the per-series code, bit for bit: a bucket's sum is accumulated
left to right as Python's ``sum`` does (``np.add.accumulate``, never numpy's pairwise
``sum``); min and max are exact; a series with a missing value, or whose buckets' sums do not
add up to a number (``sum`` of them NaN: the per-series code's test), or holding a negative
zero (Python's ``min`` keeps the first of two zeros, numpy may not) is left to the
per-series code.  Encoding follows ``Codec.encode`` (``encode_rows``).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from probes.history.raw import RawRing
from probes.history.storage import HALF_MAX, Codec, Ring

_DTYPES = {"e": np.float16, "f": np.float32}
"""The raw tier's codecs' value types (``keys.codec_for(key, 0)``)."""


Cut = tuple[list[str], "np.ndarray[Any, Any]", "np.ndarray[Any, Any]", "np.ndarray[Any, Any]"]
"""Raw series of one value type with a value in every row: their keys, and their lows, highs
and sums per bucket (a series a row, a bucket a column)."""


def bucket_stats(raw: Ring, segs: Sequence[tuple[int, int]], groups: Sequence[tuple[int, int]]
                 ) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """(lows, highs, sums) per bucket of the raw series that have a value in every row
    of ``groups`` (row ranges of the rows ``segs`` holds, in order); the others are absent."""
    out: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for keys, los, his, sums in bucket_matrices(raw, segs, groups):
        out.update(zip(keys, zip(los.tolist(), his.tolist(), sums.tolist(), strict=True),
                       strict=True))
    return out


def bucket_matrices(raw: Ring, segs: Sequence[tuple[int, int]],
                    groups: Sequence[tuple[int, int]]) -> list[Cut]:
    """``bucket_stats`` as matrices, every value type's series in one (``TierSet.build``
    keeps them as they are: means, tier-1 encoding and the tier-2 fold, session 9)."""
    out: list[Cut] = []
    n = sum(p1 - p0 for p0, p1 in segs)
    m = len(groups)
    same = len({b - a for a, b in groups}) == 1 and groups[-1][1] == n
    typed = _stored(raw, segs, n)
    if len(typed) > 1:
        # Every value type widened to float64 and cut as one matrix (each row's reductions
        # are its own: the same values, the cuts' rows in the same order; issue 38,
        # session 13: one set of ~12 numpy calls a build, not one a type).
        keys_all: list[str] = []
        for keys, _ in typed:
            keys_all += keys
        typed = [(keys_all, np.concatenate([st.astype(np.float64) for _, st in typed]))]
    for keys, stored in typed:
        mat = stored.astype(np.float64, copy=False)
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, as in Python
            if same:  # buckets of one length (1 Hz, no gap): one reduction for all
                cube = mat.reshape(len(keys), m, n // m)
                sums = np.add.accumulate(cube, axis=2)[:, :, -1]
                los = cube.min(axis=2)
                his = cube.max(axis=2)
            else:
                sums = np.empty((len(keys), m))
                los = np.empty((len(keys), m))
                his = np.empty((len(keys), m))
                for j, (a, b) in enumerate(groups):
                    part = mat[:, a:b]
                    sums[:, j] = np.add.accumulate(part, axis=1)[:, -1]
                    los[:, j] = part.min(axis=1)
                    his[:, j] = part.max(axis=1)
            total = np.add.accumulate(sums, axis=1)[:, -1]
        ok = ~np.isnan(total) & ~(np.signbit(mat) & (mat == 0.0)).any(axis=1)
        if ok.all():
            out.append((keys, los, his, sums))
        elif ok.any():
            sel = np.flatnonzero(ok)
            out.append(([keys[i] for i in sel.tolist()], los[sel], his[sel], sums[sel]))
    return out


def _stored(raw: Ring, segs: Sequence[tuple[int, int]], n: int
            ) -> list[tuple[list[str], np.ndarray[Any, Any]]]:
    """The raw series of each value type over the rows ``segs`` holds: their keys and
    values, a series a row (a ``RawRing``'s matrix read as one, session 9)."""
    if isinstance(raw, RawRing):
        out = []
        for codec in raw.mats:
            if codec.typecode in _DTYPES and raw.cap:
                keys, stored = raw.matrix(codec, segs)
                if keys:
                    out.append((keys, stored.view(_DTYPES[codec.typecode])))
        return out
    by_type: dict[str, list[str]] = {}
    for key, codec in raw.codecs.items():
        if key in raw.cols and codec.typecode in _DTYPES:
            by_type.setdefault(codec.typecode, []).append(key)
    cols = raw.cols
    return [(keys, np.frombuffer(b"".join([cols[key][p0:p1] for key in keys
                                            for p0, p1 in segs]),
                                 dtype=_DTYPES[tc]).reshape(len(keys), n))
            for tc, keys in by_type.items()]


def encode_rows(codec: Codec, rows: list[list[float]]) -> list[array[Any]]:
    """``[codec.encode(r) for r in rows]`` (rows of one length), with one cast for all
    (``encode_matrix``)."""
    return encode_matrix(codec, np.array(rows, dtype=np.float64))


def encode_matrix(codec: Codec, mat: np.ndarray[Any, Any]) -> list[array[Any]]:
    """``codec.encode`` of each row of ``mat`` (float64), with one cast for all.

    Scaled integers: ``int(min(top, max(0.0, v * scale + 0.5)))``, the sentinel for NaN
    (the formula ``encode`` uses for a row it must clamp; for a row it need not, the same
    as its ``int(v * scale + 0.5)``); half precision as ``Block.encoded``; float32 a cast.
    """
    tc = codec.typecode
    if tc == "f":
        with np.errstate(over="ignore"):
            enc: np.ndarray[Any, Any] = mat.astype(np.float32)
    elif tc == "e":
        with np.errstate(over="ignore"):
            h = mat.astype(np.float16)
        over = (np.isinf(h) & np.isfinite(mat)).any(axis=1)
        if over.any():
            bad = np.flatnonzero(over)
            h[bad] = np.clip(mat[bad], -HALF_MAX, HALF_MAX).astype(np.float16)
        enc = h.view(np.uint16)
    else:
        scaled = np.clip(mat * codec.scale + 0.5, 0.0, codec.top)
        ints = np.where(np.isnan(mat), codec.sentinel, np.trunc(scaled))
        enc = ints.astype(np.uint8 if tc == "B" else np.uint16)
    return rows_of(codec.store, enc)


def rows_of(store: str, enc: np.ndarray[Any, Any]) -> list[array[Any]]:
    """Each row of ``enc`` (stored values) as an ``array`` of typecode ``store``: one array
    of them all, sliced a row (a slice is a copy made in C; ``array(store, row.tobytes())``
    a row cost a view, a bytes and an array each: ~2× for a tier's ~60 series,
    session 12)."""
    n, w = enc.shape
    if not w:
        return [array(store) for _ in range(n)]
    whole = array(store, enc.tobytes())
    return [whole[i:i + w] for i in range(0, n * w, w)]


Combined = tuple[list[str], "np.ndarray[Any, Any]", "np.ndarray[Any, Any]",
                 "np.ndarray[Any, Any]", "np.ndarray[Any, Any]", "np.ndarray[Any, Any]"]
"""A bucket ring's series over some rows, as matrices: their keys, whether each has a row
left (``have``), its low, high, weighted sum and count (``combine_matrices``)."""


def combine_rows(ring: Ring, segs: Sequence[tuple[int, int]]
                 ) -> dict[str, tuple[float, float, float, int]]:
    """(lo, hi, mean, count) of each series of a bucket ring (``width`` 3) over the rows
    ``segs`` holds, as ``TierSet._combine`` reduced ``Ring.rows`` a series at a time: rows
    whose mean is missing left out, a bucket's count its partial one where the series has
    it; ``min``/``max`` keep the first of equal or unordered values (a column at a time),
    the weighted sum adds left to right from 0, the mean divides it by the count in Python.
    Series with no row left are absent."""
    order, have, low, high, total, ns = combine_matrices(ring, segs)
    out: dict[str, tuple[float, float, float, int]] = {}
    for key, h, a, b, s, n in zip(order, have.tolist(), low.tolist(), high.tolist(),
                                  total.tolist(), ns.tolist(), strict=True):
        if h:
            out[key] = (a, b, s / n, n)
    return out


def combine_matrices(ring: Ring, segs: Sequence[tuple[int, int]]) -> Combined:
    """``combine_rows`` before its dict: the series' keys (grouped by codec) and their
    stats as columns, so ``TierSet._cascade`` encodes a coarser bucket a codec at a time
    (issue 38, session 10)."""
    assert ring.counts is not None
    times: list[float] = []
    counts: list[int] = []
    for p0, p1 in segs:
        times.extend(ring.times[p0:p1])
        counts.extend(ring.counts[p0:p1])
    m = len(times)
    by_codec: dict[Codec, list[str]] = {}
    for key in ring.cols:
        by_codec.setdefault(ring.codecs[key], []).append(key)
    order: list[str] = []
    blocks: list[np.ndarray[Any, Any]] = []
    for codec, keys in by_codec.items():
        buf = b"".join([ring.cols[key][3 * p0:3 * p1] for key in keys for p0, p1 in segs])
        blocks.append(_decoded(codec, buf).reshape(len(keys), 3 * m))
        order.extend(keys)
    vals = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    lo, hi, mean = vals[:, 0::3], vals[:, 1::3], vals[:, 2::3]
    cnt = np.repeat(np.array(counts, dtype=np.int64)[None, :], len(order), axis=0)
    for i, key in enumerate(order):
        part = ring.partial.get(key)
        if part:
            cnt[i] = [part.get(t, c) for t, c in zip(times, counts, strict=True)]
    keep = ~np.isnan(mean)
    have = np.zeros(len(order), dtype=bool)
    low = np.full(len(order), np.nan)
    high = np.full(len(order), np.nan)
    total = np.zeros(len(order))
    with np.errstate(invalid="ignore", over="ignore"):
        for c in range(m):
            k = keep[:, c]
            x, y = lo[:, c], hi[:, c]
            low = np.where(k & (~have | (x < low)), x, low)
            high = np.where(k & (~have | (y > high)), y, high)
            total = np.where(k, total + mean[:, c] * cnt[:, c], total)
            have |= k
    ns = np.where(keep, cnt, 0).sum(axis=1)
    return order, have, low, high, total, ns


def _decoded(codec: Codec, buf: bytes) -> np.ndarray[Any, Any]:
    """``codec.decode`` of the stored values in ``buf``, as float64 (NaN: missing)."""
    tc = codec.typecode
    if tc == "f":
        return np.frombuffer(buf, dtype=np.float32).astype(np.float64)
    if tc == "e":
        return np.frombuffer(buf, dtype=np.float16).astype(np.float64)
    ints = np.frombuffer(buf, dtype=np.uint8 if tc == "B" else np.uint16)
    return np.where(ints == codec.sentinel, np.nan, ints.astype(np.float64) / codec.scale)
