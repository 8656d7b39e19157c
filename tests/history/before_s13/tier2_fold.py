"""How a batch of tier-1 buckets is reduced into tier 2 as matrices (``TierSet.build``).

Apart from the tiers' bookkeeping because these are the numeric rules that must match the
per-series path bit for bit (the order ``min``/``max`` keep, left-to-right sums), and the
tests that pin them patch them here.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tests.history.before_s13.bucket_cut import Cut, encode_matrix, rows_of
from tests.history.before_s13.storage import Codec

Stat = tuple[float, float, float, int]
"""lo, hi, sum, count of a bucket's values."""


def stat(vals: Sequence[float]) -> Stat | None:
    """A bucket's stats over the values that are not missing (None: all missing)."""
    s = sum(vals)
    if s == s:
        return (min(vals), max(vals), s, len(vals))
    good = [v for v in vals if v == v]
    if not good:
        return None
    return (min(good), max(good), sum(good), len(good))


class FullBuckets(NamedTuple):
    """A batch's series whose every tier-1 bucket is full: lows, highs and sums a bucket;
    the raw cut's matrices as they are (``cuts``), then series cut one by one."""

    keys: list[str]
    los: list[list[float]]
    his: list[list[float]]
    sums: list[list[float]]
    cuts: list[Cut]

    def add(self, key: str, los: list[float], his: list[float], sums: list[float]) -> None:
        self.keys.append(key)
        self.los.append(los)
        self.his.append(his)
        self.sums.append(sums)

    def all_keys(self) -> list[str]:
        """Every series, in the order of ``matrices``' rows."""
        return [k for c in self.cuts for k in c[0]] + self.keys

    def matrices(self) -> tuple[np.ndarray[Any, Any], ...] | None:
        """(lows, highs, sums), a series a row, a bucket a column (None: no series)."""
        parts = [c[1:] for c in self.cuts]
        if self.keys:
            parts.append((np.array(self.los, dtype=np.float64),
                          np.array(self.his, dtype=np.float64),
                          np.array(self.sums, dtype=np.float64)))
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


Groups = list[tuple[Codec, "np.ndarray[Any, Any]", list[str]]]


def codec_groups(codecs: Mapping[str, Codec], keys: Sequence[str]) -> Groups:
    """``keys`` (a matrix's rows, a series each) grouped by their codec in ``codecs`` (a
    ring's): each codec, its rows and their keys, to encode a codec at a time.  (Kept per
    host or shared by hosts alike, it saved ~0.1 µs a host-sample and cost ~3 KB a host,
    or missed on every host whose processes differ: not kept.)"""
    by: dict[Codec, list[int]] = {}
    for i, key in enumerate(keys):
        by.setdefault(codecs[key], []).append(i)
    return [(codec, np.array(idx, dtype=np.intp), [keys[i] for i in idx])
            for codec, idx in by.items()]


_INTS = {"B": np.uint8, "H": np.uint16}
"""The scaled-integer codecs' stored types (``encode_groups``)."""


def encode_groups(groups: Groups, mat: np.ndarray[Any, Any]) -> dict[str, array[Any]]:
    """``encode_matrix`` of each group's rows of ``mat`` (``codec_groups``'), by key.

    The scaled-integer codecs' rows (five of a tier's seven codecs) are scaled, clamped,
    rounded and their missing values marked together, each row with its own codec's scale,
    top and sentinel (a column of them): the same float64 operations on the same values as
    ``encode_matrix`` a codec at a time, so the same integers, in ~8 numpy calls a tier
    instead of ~7 a codec (issue 38, session 12)."""
    data: dict[str, array[Any]] = {}
    ints = [g for g in groups if g[0].typecode in _INTS]
    if len(ints) < 2:
        ints = []
    for codec, idx, ks in groups:
        if ints and codec.typecode in _INTS:
            continue
        data.update(zip(ks, encode_matrix(codec, mat[idx]), strict=True))
    if not ints:
        return data
    sizes = [len(ks) for _, _, ks in ints]
    codecs = [c for c, _, _ in ints]
    sub = mat[np.concatenate([idx for _, idx, _ in ints])]
    scale = np.repeat(np.array([c.scale for c in codecs], dtype=np.float64), sizes)[:, None]
    top = np.repeat(np.array([c.top for c in codecs], dtype=np.float64), sizes)[:, None]
    sent = np.repeat(np.array([c.sentinel for c in codecs], dtype=np.float64), sizes)[:, None]
    scaled = np.clip(sub * scale + 0.5, 0.0, top)
    stored = np.where(np.isnan(sub), sent, np.trunc(scaled))
    a = 0
    for codec, (_, _, ks), n in zip(codecs, ints, sizes, strict=True):
        enc = stored[a:a + n].astype(_INTS[codec.typecode])
        data.update(zip(ks, rows_of(codec.store, enc), strict=True))
        a += n
    return data


def fold_full(open2: dict[str, Stat], keys: list[str], mats: tuple[np.ndarray[Any, Any], ...],
               j: int, k: int, n_rows: int) -> None:
    """Fold buckets ``j:k`` of every full series into ``open2``, as the per-series code does
    (``min``/``max``/``sum`` over the buckets, then with what the bucket already holds), bit
    for bit: Python's ``min`` keeps the first of equal or unordered values and takes a later
    one only when it is smaller (``np.where(b < a, b, a)`` a column at a time, so NaN and
    ±0 fall as they do there), and ``sum`` adds left to right from 0 (``0.0 +`` a column at
    a time; never numpy's pairwise sum)."""
    los, his, sums = mats
    lo, hi = los[:, j], his[:, j]
    total = 0.0 + sums[:, j]
    for c in range(j + 1, k):
        x, y = los[:, c], his[:, c]
        lo = np.where(x < lo, x, lo)
        hi = np.where(y > hi, y, hi)
        total = total + sums[:, c]
    got = [open2.get(key) for key in keys]
    if not any(got):
        open2.update(zip(keys, zip(lo.tolist(), hi.tolist(), total.tolist(),
                                   itertools.repeat(n_rows), strict=False), strict=True))
        return
    for key, acc, a, b, s in zip(keys, got, lo.tolist(), hi.tolist(), total.tolist(),
                                 strict=True):
        open2[key] = (a, b, s, n_rows) if acc is None else (
            a if a < acc[0] else acc[0], b if b > acc[1] else acc[1], acc[2] + s,
            acc[3] + n_rows)
