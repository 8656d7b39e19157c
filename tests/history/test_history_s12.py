"""Session 12's history fold (issue 38) holds and answers as the one before, bit for bit.

Held to a copy of ``probes/history`` before the session (``before_s12/``): a row sample
staged from its row alone (``staged.stage_row``: host, disks and time read off the
``SampleRow``, numbers packed in one call), and the coarse tiers' scaled-integer codecs
encoded together (``tier2_fold.encode_groups``, tier 2 reusing tier 1's codec groups).
Streams: ``test_raw_matrix``'s (random ones with GPUs appearing and going, processes and
disks coming and going past the maxima, gaps, NaN/±0/±inf/past-half values, short tiers,
processes forgotten; the simulator over 20 min; mutated v2 streams), every simulator
template over 25 min (crossing 15 s, 1 min and 5 min boundaries: the cascade), and
``bench_fold_age``'s aging hosts (hung, idle, flipping, throttling, leaking, starved; with
silences) at 1 s for 25 min and 5 s for 70 min.  Compared every few samples: every tier's
times, counts, column bytes, partial counts and open buckets (``_rings``), every ring's
layout (``_layout``), every query (``_digest``: −0.0 and NaN apart, by ``repr``) and the
detectors' windows.  ``encode_groups`` is also held to ``encode_matrix`` a codec at a time
over hostile matrices.  Negative controls (each must be seen): a codec's sentinel written
for its top, tier 2 encoded with tier 1's groups shifted by one series, and the staging's
disks' util and queue swapped.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from probes.history import HostHistory, raw, staged, tier2_fold, tiers
from probes.history.bucket_cut import encode_matrix
from probes.history.keys import COARSE_CODECS
from probes.history.staged import Staged
from probes.history.storage import HALF_MAX, Codec
from probes.wire.samples import HostSample
from tests.analysis.test_detectors_young import samples
from tests.bench.bench_fold_age import HOSTS, stream
from tests.bench.bench_row_fold import _samples
from tests.history import test_block_columns
from tests.history.before_s12 import HostHistory as HostHistoryBefore
from tests.history.before_s12 import staged as staged_before
from tests.history.before_s12.raw import RawRing as RawRingBefore
from tests.history.test_block_columns import _digest
from tests.history.test_history_s10 import _layout
from tests.history.test_raw_matrix import _cases, _windows
from tests.history.test_stage_row_rows import (
    _agree,
    feeds,  # noqa: F401  (a fixture)
)
from tests.history.test_tier2_matrix import _odd, _rings
from tests.support.templates import TEMPLATES, template

Case = tuple[list[HostSample], dict[str, Any]]
COUNT: Counter[str] = Counter()
"""How often the new paths ran (the comparison is not vacuous)."""


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tier2_fold.encode_groups

    def counted(groups: Any, mat: Any) -> Any:
        ints = sum(1 for g in groups if g[0].typecode in "BH")
        COUNT["groups_int" if ints > 1 else "groups_plain"] += 1
        return real(groups, mat)

    monkeypatch.setattr(tiers, "encode_groups", counted)


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


def _templates(seconds: int, ks: range | list[int]) -> list[Case]:
    return [(_odd(_samples(*template(k, seconds)[1]), 70 + k), {}) for k in ks]


def _aging(name: str, span: float, every: float) -> list[HostSample]:
    return [s for s in samples(stream(name, span, every, gaps=0.003))
            if isinstance(s, HostSample)]


def test_raw_matrix_streams_hold_and_answer_as_before() -> None:
    differ, checks = _differences(_cases(), every=113)
    assert checks >= 70
    assert differ == 0
    assert COUNT["groups_int"] > 50


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


def _shifted(stream_: list[HostSample], by: float) -> list[HostSample]:
    """The samples with their time moved as ``HostClockWatch`` moves a skewed host's (the
    sample's ``ts``, not its row's)."""
    for s in stream_:
        object.__setattr__(s, "ts", s.ts - by)
    return stream_


def test_a_clock_corrected_host_holds_as_before() -> None:
    """A row sample's staged time is the sample's, corrected, not its row's."""
    cases = [(_shifted(_samples(*template(k, 400)[1]), 7.25 + k), {}) for k in (0, 5)]
    assert all(s.wire_row is not None and s.wire_row.ts != s.ts  # type: ignore[attr-defined]
               for s in cases[0][0][:5])
    differ, checks = _differences(cases, every=41)
    assert checks >= 18
    assert differ == 0


def test_negative_control_the_row_time_staged_is_seen(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    real = staged.stage_row

    def row_time(s: Any, row: Any, *a: Any) -> Staged:
        return real(s, row, *a)._replace(ts=row.ts)

    from probes.history import host

    monkeypatch.setattr(host, "stage_row", row_time)
    cases = [(_shifted(_samples(*template(0, 300)[1]), 7.25), {})]
    differ, _ = _differences(cases, every=41)
    assert differ > 0


def test_row_staging_equals_the_staging_before(feeds: list[list[HostSample]]) -> None:  # noqa: F811
    """Every row sample of the simulator's templates and of mutated, hostile v2 streams
    (``test_stage_row_rows``' feeds) staged both ways inside ``HostHistory.add``."""
    log = _agree(feeds, staged_before.stage_row)
    assert len(log) > 1500
    assert all(log), f"{log.count(False)} of {len(log)} staged samples differ"


def _hostile(rng: random.Random, rows: int, cols: int) -> np.ndarray[Any, Any]:
    pool = [np.nan, 0.0, -0.0, np.inf, -np.inf, 0.25, 0.75, 1.5, 127.49, 127.5, 127.75,
            255.0, 65534.4, 65535.0, 1e6, -1.0, -1e-300, 5e-324, HALF_MAX, 65520.0, 1e300]
    mat = np.array([[rng.choice(pool) if rng.random() < 0.4 else rng.uniform(-10, 70000)
                     * (rng.random() ** 6) for _ in range(cols)] for _ in range(rows)])
    return mat


def test_encode_groups_is_encode_matrix_a_codec_at_a_time() -> None:
    rng = random.Random(12)
    codecs = list(dict.fromkeys(COARSE_CODECS.values()))
    codecs += [Codec("B", 1.0), Codec("H", 10.0), Codec("H", 0.5)]
    ints = 0
    for trial in range(300):
        n = rng.randrange(1, 40)
        cols = 3 * rng.randrange(1, 9)
        mat = _hostile(rng, n, cols)
        per = [rng.choice(codecs) for _ in range(n)]
        keys = [f"k{i}" for i in range(n)]
        order = keys[:]
        rng.shuffle(order)
        groups = tier2_fold.codec_groups(dict(zip(keys, per, strict=True)), order)
        ints += sum(1 for g in groups if g[0].typecode in "BH") > 1
        got = tier2_fold.encode_groups(groups, mat[[keys.index(k) for k in order]])
        want = {k: encode_matrix(c, mat[i:i + 1])[0]
                for i, (k, c) in enumerate(zip(keys, per, strict=True))}
        assert got.keys() == want.keys(), trial
        for k in keys:
            assert (got[k].typecode, got[k].tobytes()) == (want[k].typecode,
                                                           want[k].tobytes()), (trial, k)
    assert ints > 200


def test_negative_control_a_sentinel_for_a_top_is_seen(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    real = tier2_fold.encode_groups

    def off(groups: Any, mat: Any) -> Any:
        got = real(groups, mat)
        for codec, _, ks in groups:
            if codec.typecode in "BH":
                for k in ks:
                    got[k] = type(got[k])(got[k].typecode, [
                        int(codec.sentinel) if v == codec.top else v for v in got[k]])
        return got

    monkeypatch.setattr(tiers, "encode_groups", off)
    # values saturating a codec's top: the odd values' huge ones
    differ, _ = _differences(_cases()[:1], every=199)
    assert differ > 0


def test_negative_control_tier2_groups_shifted_are_seen(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    real = tiers.TierSet._close_whole

    def off(self: Any, starts: Any, rows: Any, keys: Any, mats: Any,
            grouped: Any = ([], [])) -> None:
        ks, groups = grouped
        if groups:
            groups = [(c, idx, [*names[1:], names[0]]) for c, idx, names in groups]
        real(self, starts, rows, keys, mats, (ks, groups))

    monkeypatch.setattr(tiers.TierSet, "_close_whole", off)
    differ, _ = _differences(_templates(600, [3]), every=199)
    assert differ > 0


def test_negative_control_staged_disk_util_and_queue_swapped_are_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = staged.stage_row

    def swapped(s: Any, row: Any, *a: Any) -> Staged:
        got = real(s, row, *a)
        if not row.disks:
            return got
        nums = got.numbers[:]
        at = len(nums) - 4 * len(row.disks)
        for i in range(len(row.disks)):
            j = at + 4 * i
            nums[j], nums[j + 3] = nums[j + 3], nums[j]
        return got._replace(numbers=nums)

    from probes.history import host

    monkeypatch.setattr(host, "stage_row", swapped)
    differ, _ = _differences(_templates(300, [0, 1, 2]), every=37)
    assert differ > 0
