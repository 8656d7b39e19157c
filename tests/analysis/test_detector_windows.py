"""The detectors read one field of every GPU together (``HostHistory.windows``), and a
query's staged points by position (issue 38, session 7): every finding and every window
must be those of before.

Random hosts (``test_detectors_pruned``'s: GPUs idle, busy, throttled, hot, pinned at the
power limit, hung, starved behind a busy disk or CPU, leaking, lost; the host swapping; gaps)
with more: GPUs that leave the samples for minutes and come back, a GPU that appears part
way (and the hello that lists it), restarts (a gap, then samples again from before the last
one, which the history drops).  Every minute the six changed detectors run against main's
copies from before (``detectors_before_s7``), finding by finding, ``extra`` included, under
the default limits and random ones; and every dense series' windows read together are
compared with the same windows read one by one from the history before
(``tests/history/history_before.py``).  Negative control: windows handed to the wrong GPU.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable

import pytest

from probes.analysis.detectors import (
    detect_data_starvation,
    detect_memory_leak,
    detect_power_pinned,
    detect_swap_activity,
    detect_temp_near_slowdown,
    detect_throttled_while_busy,
)
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.wire.samples import HostSample
from tests.analysis import detectors_before_s7 as before
from tests.analysis.test_detectors_pruned import T0, Host, hello, random_limits
from tests.history.history_before import HostHistoryBefore

PAIRS: list[tuple[Callable[..., list[Finding]], Callable[..., list[Finding]]]] = [
    (detect_throttled_while_busy, before.detect_throttled_while_busy),
    (detect_temp_near_slowdown, before.detect_temp_near_slowdown),
    (detect_power_pinned, before.detect_power_pinned),
    (detect_data_starvation, before.detect_data_starvation),
    (detect_swap_activity, before.detect_swap_activity),
    (detect_memory_leak, before.detect_memory_leak),
]
N = 5
"""GPUs a host can list; the last one appears part way."""
READS = ((300.0, 20), (600.0, 40), (3600.0, 240), (60.0, None), (5400.0, 8))
"""(seconds back, bins) of the windows compared: the detectors' own and a coarse one."""


def stream(seed: int, hours: float, limits: DetectorLimits
           ) -> list[tuple[HostSample, int]]:
    """Samples of a random host, each with how many GPUs its hello lists then."""
    src = Host(seed, N, limits)
    rng = random.Random(seed * 7919)
    appear = T0 + rng.uniform(600, 2400)
    away: dict[int, float] = {}
    starved = T0 + rng.uniform(900, 1800)
    """A CPU-bound loader from here for 15 min: every GPU in a saw-tooth."""
    out: list[tuple[HostSample, int]] = []
    t, k = T0, 0
    while t < T0 + hours * 3600:
        s = src.sample(k, t)
        if rng.random() < 0.003:
            away[rng.randrange(N)] = t + rng.uniform(20, 500)
        gpus = tuple(g for g in s.gpus
                     if away.get(g.index, 0.0) <= t and (g.index < N - 1 or t >= appear))
        stats = s.host
        if starved <= t < starved + 900:
            gpus = tuple(dataclasses.replace(g, util_pct=98.0 if (t // 8) % 2 else 1.0)
                         for g in gpus)
            stats = dataclasses.replace(stats, cpu_pct=rng.uniform(95, 100))
        out.append((HostSample(ts=s.ts, seq=k, gpus=gpus, host=stats, disks=s.disks),
                    N if t >= appear else N - 1))
        k += 1
        if rng.random() < 0.001:  # a restart: a gap, then a few samples from before
            t += rng.uniform(20, 120)
            for back in (30.0, 2.0, 0.0):
                out.append((HostSample(ts=t - back - 60.0, seq=0, gpus=gpus, host=s.host,
                                       disks=s.disks), out[-1][1]))
        t += 1.0 if src.rng.random() > 0.002 else src.rng.uniform(5, 400)
    return out


def _windows_differ(new: HostHistory, old: HostHistoryBefore) -> tuple[int, int]:
    """(windows that differ, windows compared)."""
    keys = [k for k in new.series_keys() if old.series(k) is not None]  # type: ignore[arg-type]
    now = new.last_ts or T0
    differ = 0
    for back, nb in READS:
        together = new.windows(keys, now - back, nb)
        for key, got in zip(keys, together, strict=True):
            want = old.series(key).unmerged(now - back, nb)  # type: ignore[arg-type, union-attr]
            differ += repr(got) != repr(want)
    return differ, len(keys) * len(READS)


def compare(seed: int, hours: float, limits: DetectorLimits) -> Counter[str]:
    """Feeds both histories; every minute, old and new detectors and windows must agree."""
    new, old = HostHistory(), HostHistoryBefore()
    hellos = {n: hello(n) for n in (N - 1, N)}
    found: Counter[str] = Counter()
    windows = 0
    for k, (s, listed) in enumerate(stream(seed, hours, limits)):
        new.add(s)
        old.add(s)
        if k % 60 != 59:
            continue
        hi = hellos[listed]
        for det, ref in PAIRS:
            got, want = det("h", new, hi, s, limits), ref("h", new, hi, s, limits)
            assert got == want, (det.__name__, s.ts - T0, got, want)
            found.update(f.code for f in got)
        if k % 300 == 299:
            differ, compared = _windows_differ(new, old)
            assert differ == 0, s.ts - T0
            windows += compared
    assert windows > 800
    assert new.dropped == old.dropped > 0  # restarts were replayed
    return found


def test_findings_and_windows_are_those_of_before() -> None:
    found = compare(1, 1.2, dataclasses.replace(DEFAULT_LIMITS, leak_max_hours_to_full=500.0))
    found += compare(2, 1.2, random_limits(random.Random(38)))
    assert {"throttled-while-busy", "temp-near-slowdown", "power-pinned", "data-starvation",
            "swap-activity", "memory-leak"} <= set(found), found


def test_negative_control_windows_handed_to_the_wrong_gpu_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = HostHistory.windows

    def rotated(self: HostHistory, keys: object, since: object, bins: object = None
                ) -> object:
        got = real(self, keys, since, bins)  # type: ignore[arg-type]
        return got[1:] + got[:1]

    monkeypatch.setattr(HostHistory, "windows", rotated)
    with pytest.raises(AssertionError):
        compare(1, 1.2, DEFAULT_LIMITS)
