"""The raw tier held as matrices (issue 38, session 9): the history must be that of before,
ring by ring, bit for bit, and answer every query alike.

``RawRing`` keeps each raw codec's series in one array (a sample a row, a series a slot) and
a flush's block is encoded and written a codec at a time from a kept ``Plan``.  Held to a
copy of ``probes/history`` before the change (``before_s9/``): random streams
(``test_block_columns``'s: GPUs appearing and going, processes coming and going past the
per-GPU maximum and listed twice, disks past the maximum, fields unknown, gaps) with odd
values mixed in (NaN, ±0, ±inf, past half precision), on the default layout, a short one and
a short process forgetting (series dropped and added often: slots cut out and added); the
agent's simulator (``bench_ingest`` templates: throttling, leaking, x8 links) over 20 min,
with odd values; and ``test_row_fold``'s mutated v2 streams (GPUs dropped and re-indexed,
processes coming and going).  Compared every few samples: every tier's times, counts,
columns (bytes) and partial counts and the open buckets (``test_tier2_matrix._rings``),
every query (``test_block_columns._digest``: points, bins, unmerged, latest, keys, GPUs,
processes, disks, steps, bytes held less the headers saved) and the detectors' windows of
every dense series read together.  Negative controls: a block written one slot off, and a
dropped series whose later slots are not renumbered, are both seen.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from probes.history import HostHistory, raw
from probes.history.storage import Tier
from probes.wire.samples import HostSample
from tests.bench.bench_row_fold import _samples
from tests.history.before_s9 import HostHistory as HostHistoryBefore
from tests.history.test_block_columns import SHORT, _digest, _random_stream
from tests.history.test_row_fold import _decode, _streams
from tests.history.test_tier2_matrix import _odd, _rings
from tests.support.fingerprint import fingerprint
from tests.support.templates import template

Case = tuple[list[HostSample], dict[str, Any]]


@functools.cache
def _cases() -> list[Case]:
    out: list[Case] = [
        (_odd(_random_stream(11, 1500), 11), {}),
        (_odd(_random_stream(12, 1500), 12), {"tiers": SHORT}),
        (_odd(_random_stream(13, 1200), 13), {"tiers": SHORT, "process_forget_s": 20.0}),
    ]
    for k in (1, 2, 5):
        hello, ticks = template(k, 1200)[1]
        out.append((_odd(_samples(hello, ticks), 20 + k),
                    {"tiers": SHORT} if k % 2 else {}))
    rows = _streams()
    for i, (hello, lines) in enumerate((rows[1], rows[5], rows[11])):
        out.append((_odd(_decode(hello, lines, eager=False), 30 + i),
                    {"tiers": (Tier(1.0, 120.0), Tier(5.0, 600.0), Tier(30.0, 1800.0))}))
    return out


def _windows(h: Any) -> str:
    """Every dense series' detector windows, read together (``HostHistory.windows``), as
    text (``fingerprint``: equal exactly where ``repr`` is, at a third of its cost)."""
    return fingerprint(_window_answers(h))


def _window_answers(h: Any) -> list[object]:
    keys = [k for k in h.series_keys() if h.steps(k) is None]
    last = h.last_ts or 0.0
    return [h.windows(keys, last - 600.0), h.windows(keys, last - 3000.0, 60),
            h.windows(keys, None, 9)]


def _differences(cases: list[Case], every: int = 113,
                 first: bool = False) -> tuple[int, int, int]:
    """(checks that differ, checks, blocks written as matrices); with ``first`` (the
    negative controls) up to the first check that differs."""
    differ = checks = blocks = 0
    real = raw.RawRing._write_raw

    def counted(self: Any, pos: int, a: int, b: int, ts: Any, data: Any, block: Any) -> None:
        nonlocal blocks
        blocks += bool(block)
        real(self, pos, a, b, ts, data, block)

    raw.RawRing._write_raw = counted  # type: ignore[method-assign]
    try:
        for samples, kw in cases:
            new, old = HostHistory(**kw), HostHistoryBefore(**kw)
            for n, s in enumerate(samples):
                new.add(s)
                old.add(s)
                if n % every == every - 1 or n == len(samples) - 1:
                    checks += 1
                    differ += (_rings(new) != _rings(old) or _digest(new) != _digest(old)
                               or _windows(new) != _windows(old))
                    if differ and first:
                        return differ, checks, blocks
            assert new.dropped == old.dropped
    finally:
        raw.RawRing._write_raw = real  # type: ignore[method-assign]
    return differ, checks, blocks


def test_the_raw_matrices_hold_and_answer_as_the_columns_before() -> None:
    differ, checks, blocks = _differences(_cases())
    assert checks >= 70 and blocks >= 400
    assert differ == 0


def test_series_are_dropped_and_added_on_the_way() -> None:
    """The short forgetting's stream cuts slots out and adds new ones (what the
    renumbering control below needs to bite)."""
    drops = adds = 0
    real_drop, real_add = raw.RawRing.drop_series, raw.RawRing.add_series
    real_many = raw.RawRing.add_many

    def drop(self: Any, key: str) -> None:
        nonlocal drops
        drops += key in self.codecs and self.cap > 0
        real_drop(self, key)

    def add(self: Any, key: str, codec: Any) -> None:
        nonlocal adds
        adds += self.cap > 0
        real_add(self, key, codec)

    def add_many(self: Any, keys: Any, codecs: Any) -> None:  # session 10: a flush's at once
        nonlocal adds
        adds += len(keys) * (self.cap > 0)
        real_many(self, keys, codecs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(raw.RawRing, "drop_series", drop)
        mp.setattr(raw.RawRing, "add_series", add)
        mp.setattr(raw.RawRing, "add_many", add_many)
        samples, kw = _cases()[2]
        h = HostHistory(**kw)
        for s in samples:
            h.add(s)
    assert drops >= 20 and adds >= 20


def test_negative_control_a_block_written_one_slot_off_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = raw.RawRing._slot_map

    def off(self: Any, codec: Any, keys: Any) -> Any:
        got = real(self, codec, keys)
        w = self.widths[codec]
        if got is None:
            got = list(range(w))
        return [(s + 1) % w for s in got]

    monkeypatch.setattr(raw.RawRing, "_slot_map", off)
    differ, _, _ = _differences(_cases()[:1], every=199, first=True)
    assert differ > 0


def test_negative_control_slots_not_renumbered_after_a_drop_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def drop(self: Any, key: str) -> None:  # cuts the slot out, leaves the others' numbers
        codec = self.codecs.get(key)
        if codec is None:
            return
        slots = {k: s for k, s in self.slots.items() if k != key}
        shifted = {k: s for k, s in self.slots.items() if k != key and s > self.slots[key]}
        real_drop(self, key)
        self.slots.update({k: slots[k] for k in shifted if k in self.slots})
        for k in shifted:
            if k in self.slots and self.slots[k] >= self.widths.get(codec, 0):
                self.slots[k] = 0

    real_drop = raw.RawRing.drop_series
    monkeypatch.setattr(raw.RawRing, "drop_series", drop)
    differ, _, _ = _differences(_cases()[2:3], every=199, first=True)
    assert differ > 0
