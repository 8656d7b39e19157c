"""The one memory-growth estimator the leak detector and the memory panel share."""

from __future__ import annotations

import pytest

from probes.analysis.slope import floor_envelope, growth, theil_sen


def test_theil_sen_ignores_outliers() -> None:
    x = [float(i) for i in range(10)]
    y = [2.0 * v for v in x]
    y[4] = 1000.0
    assert theil_sen(x, y) == pytest.approx(2.0)


def test_floor_lifts_dips_and_never_falls_back() -> None:
    assert floor_envelope([5, 1, 5, 6, 4, 7]) == [5, 5, 5, 6, 6, 7]
    assert floor_envelope([5, 3, 3, 6]) == [3, 3, 3, 6]


@pytest.mark.parametrize(("t", "lows", "expected"), [
    ([0.0, 5.0], [1.0, 2.0], None),                 # too few points
    ([0.0, 2.0, 4.0], [1.0, 2.0, 3.0], None),       # under MIN_SPAN_S
    ([0.0, 1800.0, 3600.0], [0.0, 50.0, 100.0], 100.0),
    ([0.0, 1800.0, 3600.0], [100.0, 50.0, 0.0], 0.0),  # shrinking memory is no growth
])
def test_growth(t: list[float], lows: list[float], expected: float | None) -> None:
    got = growth(t, lows, t[-1])
    assert (got.slope_mib_h if got is not None else None) == expected


def test_a_saw_tooth_is_flat() -> None:
    """Allocator saw-tooth above a flat floor: least squares would see a slope, this not."""
    t = [60.0 * i for i in range(40)]
    lows = [1000.0] * 40
    assert growth(t, lows, t[-1]).slope_mib_h == 0.0  # type: ignore[union-attr]
