"""Tier-1 buckets cut from the raw tier as matrices (``bucket_cut.py``, issue 38 session 7):
the same values, bit for bit, as the per-series code (Python's ``sum``, ``min``, ``max`` over
each bucket's slice, ``Codec.encode``).

Raw rings of half-precision and float32 series filled with random values (missing ones,
negative zeros, infinities of both signs, values past half precision's range), in buckets
of one length and of many, in one segment and wrapped round the ring: every series the
matrix cut takes must carry the per-series stats, and it must take exactly those with a
value in every row, whose bucket sums add up to a number and no negative zero.  Each tier-1
codec's cast against ``encode`` on random rows (NaN, negatives, ties at .5, past the top).
Through the history: ``test_block_columns``' random streams (held to the code before; its
own test runs every stream) with the matrix cut counted; negative control: one bucket's sum
a hair off is seen.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from probes.history import bucket_cut, tiers
from probes.history.bucket_cut import bucket_matrices, bucket_stats, encode_rows
from probes.history.keys import CHART_CODECS, MIB16, gpu_key, host_key
from probes.history.storage import F32, HALF, PCT, Codec, Ring
from tests.history.test_block_columns import SHORT, _differences, _random_stream

ODD = (math.nan, -0.0, 0.0, math.inf, -math.inf, 7e4, -7e4, 65504.0, 1e-7)


def _ring(rng: random.Random, n: int, wrap: bool) -> tuple[Ring, list[str]]:
    keys = [gpu_key(i, f) for i in range(4) for f in ("util_pct", "power_w", "mem_used_mib")]
    keys += [host_key("cpu_pct"), host_key("mem_used_bytes")]
    ring = Ring(1e9, 1, False)
    for key in keys:
        ring.add_series(key, F32 if key.endswith(("mem_used_mib", "mem_used_bytes")) else HALF)
    odd = {key: rng.random() < 0.4 for key in keys}
    t = 0.0
    for _ in range(2 if wrap else 1):
        ts = [t + i for i in range(n)]
        t += n
        data = {key: ring.codecs[key].encode([
            rng.choice(ODD) if odd[key] and rng.random() < 0.05 else rng.uniform(0, 9e4)
            for _ in ts]) for key in keys}
        ring.append(ts, data)
    if wrap:  # the oldest half overwritten: the rows sit round the end of the columns
        ring.start, ring.n = n // 2, n
        ring.span = 1e9
    return ring, keys


def _groups(rng: random.Random, n: int) -> list[tuple[int, int]]:
    if rng.random() < 0.5 and n % 15 == 0:
        return [(a, a + 15) for a in range(0, n, 15)]
    cuts = sorted(rng.sample(range(1, n), rng.randrange(1, 9)))
    return list(zip([0, *cuts], [*cuts, n], strict=True))


def test_the_matrix_cut_is_the_per_series_cut() -> None:
    rng = random.Random(38)
    taken = left = 0
    for trial in range(150):
        n = rng.choice((30, 45, 120, 121))
        ring, keys = _ring(rng, n, wrap=trial % 3 == 0)
        segs = ring.segments(0, ring.n)
        groups = _groups(rng, ring.n)
        got = bucket_stats(ring, segs, groups)
        for key in keys:
            vals: list[float] = []
            for p0, p1 in segs:
                vals.extend(ring.codecs[key].decode(ring.cols[key][p0:p1]))
            slices = [vals[a:b] for a, b in groups]
            sums = list(map(sum, slices))
            total = sum(sums)
            wanted = total == total and not any(v == 0 and math.copysign(1, v) < 0 for v in vals)
            assert (key in got) == wanted, key
            if wanted:
                want = (list(map(min, slices)), list(map(max, slices)), sums)
                assert repr(got[key]) == repr(want), key
                taken += 1
            else:
                left += 1
    assert taken > 500 and left > 100


@pytest.mark.parametrize("codec", [PCT, MIB16, *CHART_CODECS.values(), Codec("B", 1.0), F32,
                                   HALF])
def test_each_tier1_codec_cast_is_its_encode(codec: Codec) -> None:
    rng = random.Random(7)
    top = 255.0 / (codec.scale or 1.0)
    for _ in range(40):
        rows = [[rng.choice((math.nan, -1.0, -0.0, 0.0, math.inf, 1e6, 7e4, top,
                             (rng.randrange(600) + 0.5) / (codec.scale or 1.0)))
                 if rng.random() < 0.2 else rng.uniform(0, top * rng.choice((1.0, 300.0)))
                 for _ in range(24)] for _ in range(rng.randrange(1, 6))]
        if rng.random() < 0.5:  # rows that need no clamping: encode's fast path
            rows = [[abs(v) % top if v == v and v != math.inf else 1.0 for v in r]
                    for r in rows]
        got = encode_rows(codec, rows)
        for r, g in zip(rows, got, strict=True):
            want = codec.encode(r)
            assert (g.typecode, g.tobytes()) == (want.typecode, want.tobytes()), r


def test_through_the_history_the_buckets_are_those_of_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    taken = 0

    def counted(*a: Any) -> Any:
        nonlocal taken
        got = bucket_matrices(*a)
        taken += sum(len(c[0]) for c in got)
        return got

    monkeypatch.setattr(tiers, "bucket_matrices", counted)
    streams: list[Any] = [(_random_stream(3, 900), None), (_random_stream(4, 900), SHORT)]
    differ, checks, _ = _differences(streams, every=299)
    assert differ == 0 and checks >= 6
    assert taken > 200


def test_negative_control_a_bucket_sum_a_hair_off_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def off(*a: Any) -> Any:
        got = bucket_matrices(*a)
        for _, _, _, sums in got:
            sums[:, 0] = np.nextafter(sums[:, 0], math.inf)
        return got

    monkeypatch.setattr(tiers, "bucket_matrices", off)
    assert bucket_cut.bucket_matrices is not off
    differ, _, _ = _differences([(_random_stream(2, 600), SHORT)], every=199)
    assert differ > 0
