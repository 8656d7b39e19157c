"""Collective-hang judges its first GPU alone, then reads the other GPUs' windows together,
a field at a time, and rules out a GPU drawing over its share by its window's mean before
merging the window (issue 38, session 8): every finding must be that of before.

The random hosts of ``test_detector_windows`` (GPUs idle, busy, hung, pinned, throttled;
GPUs leaving the samples for minutes and coming back, one appearing part way, restarts,
gaps), every 30 samples, under the default limits and random ones: the new detector against
main's copy (``spin_before_s8``), finding by finding, ``extra`` included.  Negative controls:
the other GPUs' windows all read as the second GPU's; the window's mean read three times
too high.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from probes.analysis.detectors import spin
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from tests.analysis import spin_before_s8 as before
from tests.analysis.test_detector_windows import N, stream
from tests.analysis.test_detectors_pruned import hello, random_limits


def compare(seed: int, hours: float, limits: DetectorLimits) -> Counter[str]:
    """Runs both every 30 samples on one history; counts findings and batched reads."""
    history = HostHistory()
    hellos = {n: hello(n) for n in (N - 1, N)}
    seen: Counter[str] = Counter()
    real = spin.points_many

    def counted(*a: Any) -> Any:
        seen["batched reads"] += 1
        return real(*a)

    spin.points_many = counted  # type: ignore[assignment]
    try:
        for k, (s, listed) in enumerate(stream(seed, hours, limits)):
            history.add(s)
            if k % 30 != 29:
                continue
            hi = hellos[listed]
            got = spin.detect_collective_hang("h", history, hi, s, limits)
            want = before.detect_collective_hang("h", history, hi, s, limits)
            assert got == want, (s.ts, got, want)
            seen["runs"] += 1
            seen.update(str(f.code) for f in got)
    finally:
        spin.points_many = real  # type: ignore[assignment]
    return seen


def test_the_batched_hang_finds_what_it_found_before() -> None:
    seen = compare(9, 1.2, DEFAULT_LIMITS)
    for seed in (2, 12):  # 12: hosts whose first GPU spins and a later one does not
        seen += compare(seed, 1.2, random_limits(random.Random(seed)))
    assert seen["collective-hang"] >= 20, seen
    assert seen["batched reads"] >= 60, seen


def test_negative_control_the_others_read_as_one_gpu_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = spin.points_many

    def one_gpu(history: Any, keys: Any, since: Any, nb: Any = None) -> Any:
        return real(history, [keys[0]] * len(keys), since, nb)

    monkeypatch.setattr(spin, "points_many", one_gpu)
    with pytest.raises(AssertionError):
        compare(2, 1.2, random_limits(random.Random(2)))


def test_negative_control_a_window_mean_read_high_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound that rules a GPU out before the merge is what decides: read the window's
    weighted mean three times too high and hung hosts are ruled out."""
    monkeypatch.setattr(spin, "mul", lambda a, b: 3.0 * a * b)
    with pytest.raises(AssertionError):
        compare(2, 1.2, random_limits(random.Random(2)))
