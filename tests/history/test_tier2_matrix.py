"""Tier-2 buckets folded as matrices (issue 38, session 8): the history must be that of
before, ring by ring, bit for bit.

``TierSet._fold_tier2`` folds the series whose every tier-1 bucket is full as one matrix a
field (``fold_full``) and encodes the closed tier-2 buckets one cast a codec
(``encode_rows``), and closes coarser buckets from tier 2 as one matrix of every series
(``combine_rows``).  Held to main's tiers (``tiers_before_s8.py``, today's history on them):
random streams (``test_block_columns``'s: GPUs appearing and going, processes and disks
coming and going, fields unknown, repeated times, gaps of minutes) with odd values mixed in
(NaN, ±0, ±inf, past half precision) and restarts (samples from before the last, which the
history drops), on the default layout and a short one whose every boundary they cross, and
the simulator's mutated v2 streams: every tier's times, counts and columns (bytes), its
partial counts, and the open buckets' state, every few samples.  Negative controls: the
tier-2 sums of the full series a hair off (one part in 10**15), and the combined means one
ulp off.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from typing import Any

import numpy as np
import pytest

from probes.history import HostHistory, tiers
from probes.history.storage import Tier
from probes.wire.samples import HostSample
from tests.history.test_block_columns import SHORT, _random_stream
from tests.history.test_row_fold import _decode, _streams
from tests.history.tiers_before_s8 import HostHistoryBeforeS8

ODD = (math.nan, -0.0, 0.0, math.inf, -math.inf, 70000.0, 1e-8)


def _odd(samples: list[HostSample], seed: int) -> list[HostSample]:
    """Odd values in a few samples' GPU fields, and restarts replayed."""
    rng = random.Random(seed)
    out: list[HostSample] = []
    for s in samples:
        if s.gpus and rng.random() < 0.04:
            gs = list(s.gpus)
            g = rng.randrange(len(gs))
            field = rng.choice(("util_pct", "power_w", "temp_c", "mem_used_mib"))
            gs[g] = dataclasses.replace(gs[g], **{field: rng.choice(ODD)})
            s = dataclasses.replace(s, gpus=tuple(gs))
        out.append(s)
        if rng.random() < 0.004:  # a restart: samples from before the last, then on
            for back in (40.0, 3.0):
                out.append(dataclasses.replace(s, ts=s.ts - back, seq=0))
    return out


def _rings(h: Any) -> str:
    """Everything the tiers hold, as text (bytes for the columns)."""
    st = h.store
    out: list[object] = [st._built_to, st._open, st._open2_t, st._open2_rows,
                         sorted(st._open2.items()), sorted(st.keys)]
    for r in st.rings:
        out.append((r.start, r.n, r.times.tobytes(),
                    None if r.counts is None else r.counts.tobytes(),
                    sorted((k, c.typecode, c.tobytes()) for k, c in r.cols.items()),
                    sorted((k, sorted(d.items())) for k, d in r.partial.items() if d)))
    return repr(out)


@functools.cache
def _streams_here() -> list[tuple[list[HostSample], tuple[Tier, ...] | None]]:
    out: list[tuple[list[HostSample], tuple[Tier, ...] | None]] = [
        (_odd(_random_stream(5, 1800), 5), None), (_odd(_random_stream(6, 1500), 6), SHORT)]
    rows = _streams()
    for i, (hello, lines) in enumerate((rows[1], rows[4], rows[8])):
        out.append((_odd(_decode(hello, lines, eager=False), 40 + i), SHORT))
    return out


def _differences(every: int = 97, first: int = 5) -> tuple[int, int, int]:
    """(checks that differ, checks, tier-2 folds of full series)."""
    differ = checks = folds = 0
    real = tiers.fold_full

    def counted(*a: Any) -> None:
        nonlocal folds
        folds += 1
        real(*a)

    tiers.fold_full = counted  # type: ignore[assignment]
    try:
        for samples, layout in _streams_here()[:first]:
            kw: dict[str, Any] = {} if layout is None else {"tiers": layout}
            new, old = HostHistory(**kw), HostHistoryBeforeS8(**kw)
            for n, s in enumerate(samples):
                new.add(s)
                old.add(s)
                if n % every == every - 1 or n == len(samples) - 1:
                    checks += 1
                    differ += _rings(new) != _rings(old)
            assert new.dropped == old.dropped
    finally:
        tiers.fold_full = real  # type: ignore[assignment]
    return differ, checks, folds


def test_the_tier2_matrices_write_the_tiers_of_before() -> None:
    differ, checks, folds = _differences()
    assert differ == 0 and checks >= 40
    assert folds >= 100


def test_negative_control_a_tier2_sum_a_hair_off_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = tiers.fold_full

    def off(open2: Any, keys: Any, mats: Any, j: int, k: int, n_rows: int) -> None:
        los, his, sums = mats
        real(open2, keys, (los, his, sums * (1 + 1e-15)), j, k, n_rows)

    monkeypatch.setattr(tiers, "fold_full", off)
    differ, _, _ = _differences(first=2)
    assert differ > 0


def test_negative_control_a_combined_mean_a_hair_off_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = tiers.combine_matrices  # session 10: the cascade encodes from its matrices

    def off(*a: Any) -> Any:
        order, have, low, high, total, ns = real(*a)
        return order, have, low, high, np.nextafter(total, np.inf), ns

    monkeypatch.setattr(tiers, "combine_matrices", off)
    differ, _, _ = _differences(first=2)
    assert differ > 0
