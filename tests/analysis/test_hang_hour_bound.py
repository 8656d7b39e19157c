"""collective-hang's hour of power is ruled out from a coarse read (issue 38 item 1, session
6): ``spin.surely_below`` may say "every point of the hour is under the ceiling" only when the
hour's 15 s points (the read it saves) say so too.

Random hosts (``test_detectors_pruned.Host``: busy, idle, throttled, pinned at the power limit,
spinning, with gaps and GPUs dropping out), 1.5 h of 1 Hz samples; every minute, per GPU,
ceilings just over the hour's true highest point mean (0.01 % to 20 % over) and under it:
whenever the bound fires, the fine read's ``all_below`` holds.  The whole detector's findings
against the copy of before are compared in ``test_detectors_pruned`` (collective-hang is one
of its pairs).  Negative control: a margin that ignores the codecs' rounding and trims 2 %
off the highs lets the bound fire where the fine read disagrees.
"""

from __future__ import annotations

import pytest

from probes.analysis.detectors import spin as spin_mod
from probes.analysis.detectors.window import all_below, points
from probes.analysis.limits import DEFAULT_LIMITS
from probes.history import HostHistory, gpu_key
from tests.analysis.test_detectors_pruned import T0, Host

FACTORS = (0.95, 0.999, 1.0001, 1.001, 1.003, 1.01, 1.05, 1.2)


def check(seed: int, hours: float = 1.5, n: int = 4) -> tuple[int, int]:
    """(times the bound fired, times the fine read agreed it could); asserts agreement."""
    src = Host(seed, n, DEFAULT_LIMITS)
    h = HostHistory()
    fired = could = 0
    t, k = T0, 0
    while t < T0 + hours * 3600:
        h.add(src.sample(k, t))
        if k % 60 == 59 and h.last_ts is not None:
            start = h.last_ts - DEFAULT_LIMITS.hang_window_s - spin_mod.BUSY_POWER_HISTORY_S
            for idx in h.gpu_indices():
                key = gpu_key(idx, "power_w")
                fine = points(h.series(key), start, spin_mod.bins(spin_mod.BUSY_POWER_HISTORY_S))
                if fine is None:
                    continue
                top = max(fine.mean)
                for f in FACTORS:
                    ceiling = top * f
                    truth = all_below(fine, ceiling)
                    could += truth
                    if spin_mod.surely_below(h, key, start, ceiling):
                        fired += 1
                        assert truth, (seed, t - T0, idx, ceiling, top)
        k += 1
        t += 1.0 if src.rng.random() > 0.002 else src.rng.uniform(5, 400)
    return fired, could


@pytest.mark.parametrize("seed", [1, 2])
def test_the_coarse_bound_fires_only_where_the_fine_points_agree(seed: int) -> None:
    fired, could = check(seed)
    assert fired > 0.3 * could > 0, (fired, could)


def test_negative_control_a_bound_without_its_margin_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spin_mod, "coarse_margin", lambda v: -0.02 * abs(v))
    with pytest.raises(AssertionError):
        for seed in (1, 2):
            check(seed)
