"""A host's fold stays as cheap at six hours as at one (issue 38, session 9), judging as before.

Collective-hang no longer reads a GPU's hour of busy power at 15 s when a coarse read proves
no point of it reaches the floor (``LIMIT_SHARE`` of the limit: the hour of a GPU hung for an
hour), and the idle-allocation check no longer reads a busy GPU's 30 min of raw samples when
its last minute proves it busy.  Both must find exactly what the copies of main at session
9's start find (``detectors_before_s9``, ``spin_before_s9``, ``allocation_before_s9``,
``sample_judge_before_s9``): at every tick, the detected findings and the per-sample judges'
findings of the two are compared whole (codes, onsets, severities, text, ``extra``).

Streams (``bench_fold_age``'s replay, the agent's simulator as wire v2): the demo's hung
collective and an idle allocation over hours; random hosts whose GPUs switch every 5–50 min
between busy, idle, near the idle line (0–1 %, 0.5–2.5 %), hung and hung but one, with
silences of 20–900 s.  Negative controls, each of which makes the comparison fail: a GPU
proved busy from the minute before its window, 0.5 % called busy, a quiet bound without the
codecs' margin, a quiet window's coverage read from 10 min instead of 1, a collective-hang
floor bound twice too lax.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from probes import agent
from probes.agent.simulator import Simulator
from probes.analysis import allocation
from probes.analysis.detectors import spin
from probes.analysis.limits import DEFAULT_LIMITS
from tests.bench.bench_fold_age import Differs, replay

REGIMES = ("busy",) * 3 + ("idle",) * 3 + ("almost", "low", "edge", "hung", "hung-but-one")
"""Weighted: idle long enough for a 30 min window (and a coarsest bucket before it) to be
quiet.  ``almost``: 0–1 % (idle); ``low``: 0.5–2.5 %; ``edge``: 1.05–1.24 %, over the line
raw but 1.0 % in the bucket tiers' 0.5 % steps."""


class RandomSim(Simulator):
    """The simulator's healthy host whose GPUs switch regime every 10–80 min."""

    def __init__(self, seed: int, plan: list[tuple[float, str]] | None = None) -> None:
        super().__init__(agent.parse_scenarios("healthy"), seed, f"r{seed}")
        rng = random.Random(seed * 31)
        self.plan: list[tuple[float, str]] = plan or []
        t = 0.0
        while t < 48 * 3600 and plan is None:
            self.plan.append((t, rng.choice(REGIMES)))
            t += rng.uniform(600.0, 4800.0)

    def regime(self, t: float) -> str:
        now = "busy"
        for start, what in self.plan:
            if start > t:
                break
            now = what
        return now

    def sample(self, t: float) -> Any:
        gpus, host, disks = super().sample(t)
        what = self.regime(t)
        r = self.rng
        for g in gpus:
            if what == "busy" or (what == "hung-but-one" and g["index"] == 0):
                continue
            util = {"idle": 0.0, "almost": round(r.uniform(0.0, 1.0), 1),
                    "low": round(r.uniform(0.5, 2.5), 1),
                    "edge": round(r.uniform(1.05, 1.24), 2)}.get(what, 100.0)
            g["util_pct"] = util
            g["power_w"] = round(160.0 + r.uniform(-5, 5) if util == 100.0
                                 else 70.0 + r.uniform(-3, 3), 1)
            g["clock_reasons"] = ["gpu_idle"] if util <= 5 else []
        return gpus, host, disks


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Counts the new shortcuts taken: the hour bounded by the floor, GPUs proved busy or
    quiet."""
    seen: Counter[str] = Counter()
    below, busy, quiet = spin.below, allocation._surely_busy, allocation._surely_quiet

    def below_counted(top: float, ceiling: float) -> bool:
        got = below(top, ceiling)
        seen["floor bound"] += got and abs(ceiling - 0.6 * 700.0) < 1e-9
        return got

    def busy_counted(*a: Any) -> set[int]:
        got = busy(*a)
        seen["idle checks"] += 1
        seen["GPUs proved busy"] += len(got)
        return got

    def quiet_counted(*a: Any) -> set[int]:
        got = quiet(*a)
        seen["GPUs proved quiet"] += len(got)
        return got

    spin.below = below_counted
    allocation._surely_busy = busy_counted  # type: ignore[assignment]
    allocation._surely_quiet = quiet_counted  # type: ignore[assignment]
    try:
        yield seen
    finally:
        spin.below = below
        allocation._surely_busy = busy
        allocation._surely_quiet = quiet


def findings_of(before: Any, after: Any) -> Counter[str]:
    """Ticks at which each code was found (the two sides found the same)."""
    return Counter(after.codes)


def test_the_hung_host_over_hours_judges_as_before() -> None:
    """The demo's gpu-b03 (hung at 900 s) at 2 s for 1.8 h: its busy hour then only hung."""
    with counting() as seen:
        before, after, _, _ = replay("hang", 1.8, 2.0, check=True, measure=False)
    assert seen["floor bound"] > 100, seen
    assert "collective-hang" in findings_of(before, after)


def test_an_idle_allocation_and_a_flipping_host_judge_as_before() -> None:
    with counting() as seen:
        replay("idle", 0.9, 1.0, check=True, measure=False)
        assert seen["GPUs proved quiet"] > 100, seen
        _before, _after, _, _ = replay("flip", 3.0, 3.0, check=True, measure=False)
        assert seen["GPUs proved busy"] > 100, seen
        idle_at = seen["idle checks"]
        replay("healthy", 6.0, 10.0, check=True, measure=False)
    assert seen["idle checks"] > idle_at


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_hosts_judge_as_before(seed: int) -> None:
    with counting() as seen:
        _before, _after, _, _ = replay(f"r{seed}", 2.5, 2.0, check=True, measure=False,
                                     sim=RandomSim(seed), gaps=0.0015, seed=seed)
    assert seen["idle checks"] > 20, seen


def test_random_hosts_find_idle_allocations_and_hangs() -> None:
    """The random streams are not vacuous: across seeds they find both troubles and take
    every shortcut."""
    codes: Counter[str] = Counter()
    with counting() as seen:
        for seed in range(1, 7):
            _, after, _, _ = replay(f"r{seed}", 2.5 if seed < 5 else 1.5, 3.0, check=True,
                                    measure=False, sim=RandomSim(seed), seed=seed,
                                    gaps=0.002 if seed < 5 else 0.0)
            codes += after.codes
    assert codes["gpu-allocated-idle"] and codes["collective-hang"], codes
    assert seen["GPUs proved busy"] and seen["GPUs proved quiet"] and seen["floor bound"], seen


def test_negative_control_an_idle_check_reading_before_its_window_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Proving a GPU busy from the minute before its window misses the first idle check."""
    busy = allocation._surely_busy
    monkeypatch.setattr(allocation, "_surely_busy",
                        lambda h, g, now, w, pct: busy(h, g, now - w, w, pct))
    with pytest.raises(Differs):
        replay("flip", 3.0, 3.0, check=True, measure=False)


def test_negative_control_an_idle_check_calling_half_a_percent_busy_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    busy = allocation._surely_busy
    monkeypatch.setattr(allocation, "_surely_busy",
                        lambda h, g, now, w, pct: busy(h, g, now, w, pct - 1.0))
    with pytest.raises(Differs):  # 0–1 %: idle
        replay("almost", 1.0, 3.0, check=True, measure=False, sim=RandomSim(1, [(0.0, "almost")]))


def test_negative_control_a_lax_floor_bound_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    below = spin.below
    monkeypatch.setattr(spin, "below", lambda top, ceiling: below(top, 2.0 * ceiling))
    with pytest.raises(Differs):
        replay("hang", 1.0, 2.0, check=True, measure=False, limits=DEFAULT_LIMITS)


def test_negative_control_a_quiet_bound_without_its_codecs_margin_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = allocation._surely_quiet
    monkeypatch.setattr(allocation, "_surely_quiet",
                        lambda h, g, now, w, pct: quiet(h, g, now, w, pct + 0.51))
    # 1.05–1.24 % for 5 min, then idle: raw in the window's read (not idle), 1.0 % in the
    # coarse read's buckets
    plan = [(0.0, "idle"), (2400.0, "edge"), (2700.0, "idle"), (4200.0, "edge"),
            (4500.0, "idle")]
    with pytest.raises(Differs):
        replay("edge", 2.0, 3.0, check=True, measure=False, sim=RandomSim(1, plan))


def test_negative_control_a_quiet_window_read_as_covered_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The coverage of a quiet window is read from its first minute: read from its second,
    silences after which the window is not covered must show."""
    monkeypatch.setattr(allocation, "COVER_S", 600.0)
    with pytest.raises(Differs):
        for seed in (1, 2, 3):
            replay(f"r{seed}", 2.5, 3.0, check=True, measure=False, sim=RandomSim(seed),
                   gaps=0.004, seed=seed)
