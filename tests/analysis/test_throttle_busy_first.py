"""throttled-while-busy tries a busy GPU's clocks and reasons before its util (issue 38 item
1, session 6): a GPU busy now and never slowed over the whole window is skipped without
reading its util's window; the verdicts must be those of before, finding by finding.

``test_detectors_pruned.compare`` runs the detector and main's copy from before the pruning
(``detectors_before``) every minute over random hosts (busy, idle, throttled by clock and by
reason, at the thresholds ± a hair, with gaps and GPUs dropping out) and compares every
finding.  Here its hosts also get short bursts of a slowing reason at full clocks (the power
cap for 2–250 s, so whether a window's edge holds one decides), and the early skip must fire.
Also against main's own copies of the two detectors changed this session
(``clocks_before_s6``, ``spin_before_s6``) under random limits.  Negative control: an early
skip that reads the reasons over the window's last 30 s only.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

import tests.analysis.test_detectors_pruned as pruned
from probes.analysis.detectors import clocks as clocks_mod
from probes.analysis.detectors import spin as spin_mod
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.wire.samples import GpuSample
from tests.analysis import clocks_before_s6, spin_before_s6


class BurstHost(pruned.Host):
    """``pruned.Host`` whose busy GPUs now and then report the power cap at full clocks."""

    def __init__(self, seed: int, n: int, limits: DetectorLimits) -> None:
        super().__init__(seed, n, limits)
        self.burst_until = [0.0] * n

    def gpu(self, i: int, t: float) -> GpuSample:
        g = super().gpu(i, t)
        if self.rng.random() < 0.002:
            self.burst_until[i] = t + self.rng.uniform(2, 250)
        if t < self.burst_until[i] and not g.clock_reasons:
            return dataclasses.replace(g, clock_reasons=("sw_power_cap",))
        return g


def run(monkeypatch: pytest.MonkeyPatch, seeds: tuple[int, ...]) -> dict[str, int]:
    monkeypatch.setattr(pruned, "Host", BurstHost)
    real = clocks_mod._unthrottled
    skipped = {"early": 0, "late": 0, "found": 0}

    def counting(reasons, cp, clock_max, t0, now, limits):  # type: ignore[no-untyped-def]
        got = real(reasons, cp, clock_max, t0, now, limits)
        skipped["early" if t0 == now - limits.throttle_window_s else "late"] += got
        return got
    monkeypatch.setattr(clocks_mod, "_unthrottled", counting)
    for seed in seeds:
        skipped["found"] += pruned.compare(seed, 1.5, DEFAULT_LIMITS)["throttled-while-busy"]
    return skipped


def test_the_early_skip_fires_and_the_verdicts_are_those_of_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = run(monkeypatch, (4, 5))
    assert skipped["found"] > 0 and skipped["early"] > 50, skipped


def test_throttle_and_hang_are_those_of_main_before_session_6(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Against main's copies of the two detectors changed (``*_before_s6``), under the
    default limits and random ones; both find something."""
    monkeypatch.setattr(pruned, "Host", BurstHost)
    monkeypatch.setattr(pruned, "PAIRS", [
        (clocks_mod.detect_throttled_while_busy, clocks_before_s6.detect_throttled_while_busy),
        (spin_mod.detect_collective_hang, spin_before_s6.detect_collective_hang)])
    rng = random.Random(38)
    found = pruned.compare(6, 1.5, DEFAULT_LIMITS)
    for seed in (7, 8):
        found += pruned.compare(seed, 1.0, pruned.random_limits(rng))
    assert {"throttled-while-busy", "collective-hang"} <= set(found), found


def test_negative_control_reasons_read_over_the_last_30_s_only_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = clocks_mod._unthrottled

    def short(reasons, cp, clock_max, t0, now, limits):  # type: ignore[no-untyped-def]
        return real(reasons, cp, clock_max, max(t0, now - 30.0), now, limits)
    monkeypatch.setattr(clocks_mod, "_unthrottled", short)
    with pytest.raises(AssertionError):
        run(monkeypatch, (4, 5))
