"""Session 10's history (issue 38) must be that of before, ring by ring, bit for bit, and
answer every query alike.

Held to a copy of ``probes/history`` before the session (``before_s10/``) over
``test_raw_matrix``'s streams: random ones (GPUs appearing and going, processes coming and
going past the per-GPU maximum and listed twice, disks past the maximum, gaps) with odd
values (NaN, ±0, ±inf, past half precision), on the default layout, a short one and a short
process forgetting (series dropped and added often); the agent's simulator over 20 min; and
``test_row_fold``'s mutated v2 streams.  Compared every few samples: every tier's times,
counts, columns, partial counts and open buckets (``_rings``), the layout of every ring
(its series in the order held, and the raw tier's slots, widths and matrices' bytes:
``_layout``), every query (``_digest``) and the detectors' windows of every dense series.
Negative controls: series added in another order, and new slots of a widened raw matrix not
filled as missing, are both seen.
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from probes.history import HostHistory, raw, steps, storage, tiers
from tests.history import test_block_columns
from tests.history.before_s10 import HostHistory as HostHistoryBefore
from tests.history.before_s10.raw import RawRing as RawRingBefore
from tests.history.test_block_columns import _digest
from tests.history.test_raw_matrix import _cases, _windows
from tests.history.test_tier2_matrix import _rings


def _layout(h: Any) -> str:
    """How every ring holds its series: their order, the raw slots and matrices."""
    st = h.store
    out: list[object] = [[(k, c.typecode, c.scale) for k, c in st.keys.items()]]
    for r in st.rings:
        out.append([(k, c.typecode, c.scale) for k, c in r.codecs.items()])
        out.append([(k, c.typecode, c.tobytes()) for k, c in r.cols.items()])
    r0 = st.raw
    out.append((sorted(r0.slots.items()), [(c.typecode, w) for c, w in r0.widths.items()],
                [(c.typecode, m.tobytes()) for c, m in r0.mats.items()]))
    return repr(out)


def _differences(cases: list[Any], every: int = 113, first: bool = False) -> tuple[int, int]:
    """(checks that differ, checks); with ``first`` (the negative controls) up to the first
    check that differs."""
    differ = checks = 0
    with pytest.MonkeyPatch.context() as mp:  # bytes held counted alike on both sides
        mp.setattr(test_block_columns, "RawRing", (raw.RawRing, RawRingBefore))
        for samples, kw in cases:
            differ += _compare(samples, kw, every, first)
            checks += sum(1 for n in range(len(samples))
                          if n % every == every - 1 or n == len(samples) - 1)
            if differ and first:
                break
    return differ, checks


def _compare(samples: list[Any], kw: dict[str, Any], every: int, first: bool = False) -> int:
    """Checks of one stream where today's history and the copy before differ (with
    ``first``, 1 at the first that does)."""
    differ = 0
    new, old = HostHistory(**kw), HostHistoryBefore(**kw)
    for n, s in enumerate(samples):
        new.add(s)
        old.add(s)
        if n % every == every - 1 or n == len(samples) - 1:
            differ += (_rings(new) != _rings(old) or _layout(new) != _layout(old)
                       or _digest(new) != _digest(old) or _windows(new) != _windows(old))
            if differ and first:
                return differ
    assert new.dropped == old.dropped
    return differ


def test_the_history_holds_and_answers_as_before() -> None:
    differ, checks = _differences(_cases())
    assert checks >= 70
    assert differ == 0


def test_negative_control_series_added_in_another_order_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = raw.RawRing.add_many

    def backwards(self: Any, keys: Any, codecs: Any) -> None:
        real(self, list(keys)[::-1], list(codecs)[::-1])

    monkeypatch.setattr(raw.RawRing, "add_many", backwards)
    differ, _ = _differences(_cases()[:1], every=199, first=True)
    assert differ > 0


def test_negative_control_new_slots_not_missing_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = raw.RawRing.add_many

    def zeroed(self: Any, keys: Any, codecs: Any) -> None:
        fills = {c: c.fill for c in codecs}
        try:
            for c in fills:
                c.fill = array(c.fill.typecode, [0])
            real(self, keys, codecs)
        finally:
            for c, f in fills.items():
                c.fill = f

    monkeypatch.setattr(raw.RawRing, "add_many", zeroed)
    differ, _ = _differences(_cases()[2:3], every=199, first=True)
    assert differ > 0


def test_ring_add_many_is_add_series_in_order() -> None:
    keys = ["gpu/0/util_pct", "host/cpu_pct", "gpu/0/mem_used_mib"]
    codecs = [storage.PCT, storage.PCT, storage.F32]
    a, b = storage.Ring(60.0, 3, True), storage.Ring(60.0, 3, True)
    for r in (a, b):
        r.add_series("x/y/util", storage.PCT)
        r.append([0.0, 1.0], {})
    a.add_many(keys, codecs)
    for k, c in zip(keys, codecs, strict=True):
        b.add_series(k, c)
    assert list(a.codecs.items()) == list(b.codecs.items())
    assert [(k, c.tobytes()) for k, c in a.cols.items()] == \
        [(k, c.tobytes()) for k, c in b.cols.items()]


def test_negative_control_a_first_signature_a_second_late_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = steps.GpuSteps._first_sig

    def late(self: Any, ts: float, idx: int, g: Any, sig: tuple[object, ...]) -> None:
        real(self, ts + 1.0, idx, g, sig)

    monkeypatch.setattr(steps.GpuSteps, "_first_sig", late)
    differ, _ = _differences(_cases()[:1], every=199, first=True)
    assert differ > 0


def test_whole_batches_are_closed_as_matrices() -> None:
    """Most batches take ``_close_whole`` (what its control below needs to bite)."""
    calls = 0
    real = tiers.TierSet._close_whole

    def counted(self: Any, *a: Any) -> None:
        nonlocal calls
        calls += 1
        real(self, *a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiers.TierSet, "_close_whole", counted)
        for samples, kw in _cases()[3:6]:  # the simulator's (random streams have gaps)
            h = HostHistory(**kw)
            for s in samples:
                h.add(s)
    assert calls >= 20


def test_negative_control_a_whole_batch_closed_lows_for_highs_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = tiers.TierSet._close_whole

    def off(self: Any, starts: Any, rows: Any, keys: Any, mats: Any, *rest: Any) -> None:
        los, his, sums = mats
        real(self, starts, rows, keys, (his, los, sums), *rest)  # lows and highs swapped

    monkeypatch.setattr(tiers.TierSet, "_close_whole", off)
    differ, _ = _differences(_cases()[3:4], every=199, first=True)  # the simulator's: batches whole
    assert differ > 0


def test_negative_control_a_cascade_lows_for_highs_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = tiers.combine_matrices

    def off(*a: Any) -> Any:
        order, have, low, high, total, ns = real(*a)
        return order, have, high, low, total, ns

    monkeypatch.setattr(tiers, "combine_matrices", off)
    differ, _ = _differences(_cases()[1:2], every=199, first=True)
    assert differ > 0
