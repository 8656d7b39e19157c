"""The console's pure reductions: memory slope and chart series."""

from __future__ import annotations

import pytest

from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from tests.support.tui_fakes import hello, sample
from tui.views.host_views import memory_growth_view
from tui.views.trends import slope_per_hour


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], None),
        ([(0.0, 100.0)], None),
        ([(0.0, 100.0), (5.0, 200.0)], None),  # under MIN_SPAN_S: not a trend yet
        ([(0.0, 100.0), (3600.0, 1100.0)], 1000.0),
        ([(float(t), 5000.0) for t in range(60)], 0.0),
        ([(float(t), 5000.0 - 2.0 * t) for t in range(60)], -7200.0),
        # Noise around a climb of 1 MiB/s still fits close to 3,600 MiB/h.
        ([(float(t), t + (3.0 if t % 2 else -3.0)) for t in range(600)], 3600.0),
    ],
)
def test_slope_per_hour(points: list[tuple[float, float]], expected: float | None) -> None:
    got = slope_per_hour(points)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, rel=0.01, abs=1e-6)


def test_memory_growth_view_measures_the_climbing_gpu() -> None:
    state = HostState(HostSpec("h"))
    state.apply(hello("h"), now=0.0)
    for step in range(30):
        state.apply(sample("h", step, leak_gpu=5), now=float(step))
    view = memory_growth_view(state, 3600.0, None)
    assert [g.index for g in view.gpus] == list(range(8))
    assert view.window == "1 h"
    assert len(view.gpus[5].points) == 30
    slope = view.gpus[5].slope_mib_h
    assert slope == pytest.approx(40 * 3600)
    gpu5 = view.gpus[5]
    assert gpu5.total_mib is not None and gpu5.current_mib is not None
    assert gpu5.hours_to_full == pytest.approx((gpu5.total_mib - gpu5.current_mib) / slope)
    assert all(abs(g.slope_mib_h or 0.0) < 1.0 for g in view.gpus if g.index != 5)
    assert view.gpus[0].current_mib == 60_000.0
    # 30 s of history is no verdict: the leak detector waits for half an hour
    assert not any(g.leaking for g in view.gpus)
    assert view.selected_gpu == 0
