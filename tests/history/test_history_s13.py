"""Session 13's history fold (issue 38) holds and answers as the one before, bit for bit.

Held to a copy of ``probes/history`` before the session (``before_s13/``): a block's disk
awaits in three numpy calls where no r_await is unknown (``block.awaits``; the six-call
form otherwise), both w_await and r_await columns taken at once (``Plan.await_pairs``),
one ``errstate`` a block's encoding, a row GPU's view with moved reasons made as a
named tuple (``steps._GpuView``), and a steady tier-2 close folding every bucket's
columns at once where the buckets are alike (``TierSet._close_whole``).  Streams (session
12's: ``test_history_s12``): ``test_raw_matrix``'s (random ones with r_await and w_await
unknown a fifth of the time, GPUs appearing and going, processes and disks past the
maxima, gaps, NaN/±0/±inf/past-half values, short tiers, processes forgotten; the
simulator; mutated v2 streams), every simulator template over 25 min (15 s, 1 min and
5 min buckets closed: the cascade), ``bench_fold_age``'s aging hosts at 1 s and 5 s with
silences, and clock-corrected hosts.  Compared every few samples: every tier's times,
counts, column bytes, partial counts and open buckets (``_rings``), every ring's layout
(``_layout``), every query (``_digest``: −0.0 and NaN apart, by ``repr``) and the
detectors' windows.  ``awaits`` is also held to the old one over hostile matrices.
Negative controls (each must be seen): the awaits' fallback left out, the alike
buckets' fold a hair off, and a view's moved reasons left out.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from probes.history import HostHistory, block, raw, steps, tiers
from probes.wire.samples import HostSample
from tests.bench.bench_fold_age import HOSTS
from tests.bench.bench_row_fold import _samples
from tests.history import test_block_columns
from tests.history.before_s13 import HostHistory as HostHistoryBefore
from tests.history.before_s13 import block as block_before
from tests.history.before_s13.raw import RawRing as RawRingBefore
from tests.history.test_block_columns import _digest
from tests.history.test_history_s10 import _layout
from tests.history.test_history_s12 import _aging, _hostile, _shifted, _templates
from tests.history.test_raw_matrix import _cases, _windows
from tests.history.test_tier2_matrix import _rings
from tests.support.templates import TEMPLATES, template

Case = tuple[list[HostSample], dict[str, Any]]
COUNT: Counter[str] = Counter()
"""How often the new paths ran (the comparison is not vacuous)."""


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> None:
    real_aw = block.awaits

    def counted_aw(ra: Any, wa: Any) -> Any:
        COUNT["awaits_nan" if np.isnan(ra).any() else "awaits_known"] += 1
        return real_aw(ra, wa)

    real_cw = tiers.TierSet._close_whole

    def counted_cw(self: Any, starts: Any, rows: Any, *a: Any, **kw: Any) -> None:
        COUNT["close_whole"] += 1
        real_cw(self, starts, rows, *a, **kw)

    monkeypatch.setattr(block, "awaits", counted_aw)
    monkeypatch.setattr(tiers.TierSet, "_close_whole", counted_cw)


def _differences(cases: list[Case], every: int) -> tuple[int, int]:
    """(checks that differ, checks)."""
    differ = checks = 0
    with pytest.MonkeyPatch.context() as mp:  # bytes held counted alike on both sides
        mp.setattr(test_block_columns, "RawRing", (raw.RawRing, RawRingBefore))
        for stream_, kw in cases:
            new, old = HostHistory(**kw), HostHistoryBefore(**kw)
            for n, s in enumerate(stream_):
                new.add(s)
                old.add(s)
                if n % every == every - 1 or n == len(stream_) - 1:
                    checks += 1
                    differ += (_rings(new) != _rings(old) or _layout(new) != _layout(old)
                               or _digest(new) != _digest(old)
                               or _windows(new) != _windows(old))
            assert new.dropped == old.dropped
    return differ, checks


def test_raw_matrix_streams_hold_and_answer_as_before() -> None:
    COUNT.clear()
    differ, checks = _differences(_cases(), every=113)
    assert checks >= 70
    assert differ == 0
    assert COUNT["awaits_nan"] > 20 and COUNT["awaits_known"] > 100, COUNT
    assert COUNT["close_whole"] > 20, COUNT


@pytest.mark.parametrize("part", range(4))
def test_simulator_templates_hold_and_answer_as_before(part: int) -> None:
    """Every template over 25 min: 5 min buckets closed, the cascade encoded too."""
    differ, checks = _differences(_templates(1500, range(part, TEMPLATES, 4)), every=131)
    assert checks >= 40
    assert differ == 0


@pytest.mark.parametrize("name", HOSTS)
def test_aging_hosts_hold_and_answer_as_before(name: str) -> None:
    differ, checks = _differences([(_aging(name, 1500.0, 1.0), {}),
                                   (_aging(name, 4200.0, 5.0), {})], every=47)
    assert checks >= 20
    assert differ == 0


def test_a_clock_corrected_host_holds_as_before() -> None:
    cases = [(_shifted(_samples(*template(k, 400)[1]), 7.25 + k), {}) for k in (0, 5)]
    differ, checks = _differences(cases, every=41)
    assert checks >= 18
    assert differ == 0


def test_awaits_are_the_old_awaits_bit_for_bit() -> None:
    """Hostile columns: NaN on either side or both, ±0 against each other, ±inf, ties."""
    rng = random.Random(13)
    unknown = 0
    for trial in range(400):
        rows, cols = rng.randrange(1, 20), rng.randrange(1, 6)
        ra, wa = _hostile(rng, rows, cols), _hostile(rng, rows, cols)
        if trial % 4 == 0:  # no r_await unknown: the fast path alone
            ra[np.isnan(ra)] = -0.0
        if trial % 7 == 0:
            wa = ra.copy()
        unknown += bool(np.isnan(ra).any())
        got, want = block.awaits(ra, wa), block_before.awaits(ra, wa)
        assert got.tobytes() == want.tobytes(), trial
    assert 100 < unknown < 400


def test_negative_control_awaits_without_the_fallback_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block, "awaits", lambda ra, wa: np.where(wa > ra, wa, ra))
    differ, _ = _differences(_cases()[:1], every=113)
    assert differ > 0


def test_negative_control_alike_buckets_lows_off_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The alike buckets' fold with its lows taken by ``<=`` (the later of equal values)
    and its means a hair off: the comparison sees it."""
    real_where = np.where

    class _Np:
        def __getattr__(self, name: str) -> Any:
            return getattr(np, name)

        @staticmethod
        def where(cond: Any, a: Any, b: Any) -> Any:
            if getattr(a, "ndim", 0) == 2 and getattr(cond, "ndim", 0) == 2:
                return real_where(cond, a, b) * (1 + 1e-3)
            return real_where(cond, a, b)

    real_cw = tiers.TierSet._close_whole

    def off(self: Any, *a: Any, **kw: Any) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tiers, "np", _Np())
            real_cw(self, *a, **kw)

    monkeypatch.setattr(tiers.TierSet, "_close_whole", off)
    differ, _ = _differences(_templates(600, [3]), every=199)
    assert differ > 0


def test_negative_control_views_without_their_reasons_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row GPU's view made with its static half's reasons, not the tick's: the step
    series differ (and views are made on these streams)."""
    made = 0
    real = steps._new_view

    def stale(values: Any) -> Any:
        nonlocal made
        made += 1
        values = list(values)
        values[steps._REASONS_AT] = ()
        return real(values)

    monkeypatch.setattr(steps, "_new_view", stale)
    differ, _ = _differences(_templates(300, range(TEMPLATES)), every=53)
    assert made > 100
    assert differ > 0
