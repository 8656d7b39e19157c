"""The history detectors rule windows out from their points before merging them, and the
schedule finds an idle tick in one comparison (issue 38 item 1): the verdicts must be those
of before, finding by finding.

Random hosts (hours of 1 Hz samples: GPUs idle, busy, throttled with low clocks and slowing
reasons, hot near and past the slowdown, pinned at the power limit, spinning in a hung
collective, starved in a saw-tooth behind a busy disk or CPU, leaking; GPUs dropping out,
the host swapping, gaps in the stream; values placed right at each threshold) run through
the detectors of main before the change (``detectors_before``, copied) and the new ones at
every minute, under the default limits and random ones; every finding is compared field by
field, ``extra`` included, in order.  Negative controls: a bound that rules out a window a
little too eagerly, and an idle window a little too wide, make the comparisons fail.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable

import pytest

import probes.analysis.detectors as detectors_mod
from probes.analysis.detectors import (
    DetectorSchedule,
    detect_collective_hang,
    detect_data_starvation,
    detect_memory_leak,
    detect_power_pinned,
    detect_temp_near_slowdown,
    detect_throttled_while_busy,
)
from probes.analysis.detectors import clocks as clocks_mod
from probes.analysis.detectors import memory as memory_mod
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.wire.samples import (
    DatasetDevice,
    DiskStats,
    GpuInfo,
    GpuProcess,
    GpuSample,
    GpuState,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
)
from tests.analysis import detectors_before as before

T0 = 1_800_000_000.0
LIMIT_W = 700.0
SM_MAX = 1980.0
SLOWDOWN_C = 90.0
PAIRS: list[tuple[Callable[..., list[Finding]], Callable[..., list[Finding]]]] = [
    (detect_throttled_while_busy, before.detect_throttled_while_busy),
    (detect_temp_near_slowdown, before.detect_temp_near_slowdown),
    (detect_power_pinned, before.detect_power_pinned),
    (detect_data_starvation, before.detect_data_starvation),
    (detect_collective_hang, before.detect_collective_hang),
    (detect_memory_leak, before.detect_memory_leak),
]
MODES = ("idle", "busy", "throttled", "hot", "pinned", "saw", "edge")


def hello(n: int) -> Hello:
    facts = HostFacts(hostname="h", kernel=None, os_name=None, python=None,
                      driver_version=None, cuda_version=None, cpu_model=None,
                      cpu_cores_logical=None, cpu_cores_physical=None, mem_total_bytes=None,
                      swap_total_bytes=None,
                      gpus=tuple(GpuInfo(index=i, uuid=None, bus_id=f"0000:{16 + i:02x}:00.0",
                                         name="H100", mem_total_mib=81559.0,
                                         temp_slowdown_c=SLOWDOWN_C) for i in range(n)))
    return Hello(ts=T0, protocol=1, agent_version="t", facts=facts,
                 datasets=(DatasetDevice("/data", "nvme0n1"),))


class Host:
    """A random host whose GPUs change what they do every few minutes."""

    def __init__(self, seed: int, n: int, limits: DetectorLimits) -> None:
        self.rng = random.Random(seed)
        self.n = n
        self.limits = limits
        self.mode = ["busy"] * n
        self.until = [0.0] * n
        self.hang_until = 0.0
        self.disk_busy_until = 0.0
        self.cpu_busy_until = 0.0
        self.swap_until = 0.0
        self.gone: dict[int, float] = {}
        self.leak = [self.rng.choice([0.0, 0.0, 120.0, 130.0, 260.0, 2000.0])
                     for _ in range(n)]

    def _edge(self, i: int, t: float) -> tuple[float, float, float, float]:
        """util, temp, power, clock right at the limits' thresholds (± a hair)."""
        lim, r = self.limits, self.rng
        hair = r.choice([-1e-7, 0.0, 1e-7, -0.05, 0.05])
        near = SLOWDOWN_C - lim.temp_margin_c
        return (lim.throttle_busy_util_pct + hair, near + hair,
                lim.power_pinned_share * LIMIT_W + hair,
                lim.throttle_clock_share * SM_MAX + hair * 100)

    def gpu(self, i: int, t: float) -> GpuSample:
        r = self.rng
        if t >= self.until[i]:
            self.mode[i] = r.choice(MODES)
            self.until[i] = t + r.uniform(60, 900)
        mode = self.mode[i]
        util, temp, power, clock = (r.uniform(90, 100), r.uniform(60, 75),
                                    r.uniform(450, 600), SM_MAX)
        reasons: tuple[str, ...] = ()
        if mode == "idle":
            util, power, reasons = r.uniform(0, 3), r.uniform(60, 90), ("gpu_idle",)
        elif mode == "throttled":
            clock = r.uniform(900, 1500)
            if r.random() < 0.7:
                reasons = r.choice([("sw_thermal_slowdown",), ("sw_power_cap",),
                                    ("sw_thermal_slowdown", "hw_thermal_slowdown")])
        elif mode == "hot":
            temp = r.uniform(SLOWDOWN_C - 8, SLOWDOWN_C + 1)
        elif mode == "pinned":
            power = r.uniform(0.9, 1.01) * LIMIT_W
        elif mode == "saw":
            util = 98.0 if (t // 8) % 2 else 1.0
        elif mode == "edge":
            util, temp, power, clock = self._edge(i, t)
        if t < self.hang_until:
            util, power = 100.0, r.uniform(150, 170)
        mem = 60000.0 + self.leak[i] * (t - T0) / 3600.0 + r.uniform(0, 40)
        return GpuSample(index=i, mem_used_mib=mem, mem_total_mib=81559.0,
                         util_pct=round(util, 7), temp_c=temp, power_w=power,
                         power_limit_w=LIMIT_W, sm_clock_mhz=clock, sm_clock_max_mhz=SM_MAX,
                         clock_reasons=reasons, pcie_width=16, pcie_width_max=16,
                         processes=(GpuProcess(40000 + i, "python", "u", mem - 500.0),))

    def sample(self, k: int, t: float) -> HostSample:
        r = self.rng
        if r.random() < 0.002:
            self.hang_until = t + r.uniform(200, 900)
        if r.random() < 0.003:
            self.disk_busy_until = t + r.uniform(300, 1500)
        if r.random() < 0.002:
            self.cpu_busy_until = t + r.uniform(300, 1500)
        if r.random() < 0.003:
            self.swap_until = t + r.uniform(30, 200)
        if r.random() < 0.001:
            self.gone[r.randrange(self.n)] = t + r.uniform(30, 600)
        gpus = []
        for i in range(self.n):
            if self.gone.get(i, 0.0) > t:
                gpus.append(GpuSample(index=i, state=GpuState.LOST))
                continue
            gpus.append(self.gpu(i, t))
        busy = t < self.disk_busy_until
        disk = DiskStats("nvme0n1", util=r.uniform(95, 100) if busy else r.uniform(5, 30),
                         r_await=r.uniform(20, 40) if busy else r.uniform(0.2, 1),
                         w_await=0.4, aqu_sz=r.uniform(20, 30) if busy else 0.3)
        swapping = t < self.swap_until
        stats = HostStats(cpu_pct=r.uniform(85, 100) if t < self.cpu_busy_until
                          else r.uniform(20, 50), mem_used_bytes=400 * 2 ** 30,
                          swap_in_pages_s=r.uniform(500, 3000) if swapping else 0.0,
                          swap_out_pages_s=r.uniform(0, 3000) if swapping else 0.0)
        return HostSample(ts=t, seq=k, gpus=tuple(gpus), host=stats, disks=(disk,))


def random_limits(rng: random.Random) -> DetectorLimits:
    return dataclasses.replace(
        DEFAULT_LIMITS, throttle_min_share=rng.choice([0.3, 0.5, 0.8]),
        throttle_busy_util_pct=rng.choice([50.0, 80.0, 95.0]),
        throttle_clock_share=rng.choice([0.6, 0.85]),
        temp_margin_c=rng.choice([2.0, 5.0]), temp_min_share=rng.choice([0.2, 0.6]),
        power_pinned_share=rng.choice([0.9, 0.97]), power_min_share=rng.choice([0.3, 0.7]),
        starve_disk_util_pct=rng.choice([70.0, 90.0]), starve_cpu_pct=rng.choice([60.0, 90.0]),
        hang_util_pct=rng.choice([90.0, 98.0]), hang_power_share=rng.choice([0.3, 0.5]),
        leak_min_mib_h=rng.choice([100.0, 256.0]), leak_max_hours_to_full=500.0,
        min_coverage=rng.choice([0.5, 0.8]))


def compare(seed: int, hours: float, limits: DetectorLimits, n: int = 4) -> Counter[str]:
    """Feeds a random host, runs old and new detectors every minute; returns the codes found."""
    src = Host(seed, n, limits)
    h, hi = HostHistory(), hello(n)
    found: Counter[str] = Counter()
    t, k = T0, 0
    while t < T0 + hours * 3600:
        s = src.sample(k, t)
        h.add(s)
        if k % 60 == 59:
            for new, old in PAIRS:
                got, want = new("h", h, hi, s, limits), old("h", h, hi, s, limits)
                assert got == want, (new.__name__, t - T0, got, want)
                found.update(f.code for f in got)
        k += 1
        t += 1.0 if src.rng.random() > 0.002 else src.rng.uniform(5, 400)  # gaps
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("to_full_h", [DEFAULT_LIMITS.leak_max_hours_to_full, 500.0])
def test_verdicts_are_those_of_merging_every_window(seed: int, to_full_h: float) -> None:
    limits = dataclasses.replace(DEFAULT_LIMITS, leak_max_hours_to_full=to_full_h)
    found = compare(seed, 2.0, limits)
    assert sum(found.values()) > 0


def test_verdicts_agree_under_other_limits_and_every_detector_finds_something() -> None:
    rng = random.Random(7)
    found: Counter[str] = Counter()
    for seed in range(10, 14):
        found += compare(seed, 1.5, random_limits(rng))
    found += compare(99, 1.5, DEFAULT_LIMITS)
    assert {"throttled-while-busy", "temp-near-slowdown", "power-pinned",
            "data-starvation", "collective-hang", "memory-leak"} <= set(found), found


def test_negative_control_a_bound_a_little_too_eager_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def eager(c: object, floor: float) -> bool:
        return max(c.mean) < floor + 0.5  # type: ignore[attr-defined]
    monkeypatch.setattr(clocks_mod, "all_below", eager)
    with pytest.raises(AssertionError):
        for seed in (1, 2, 3):
            compare(seed, 2.0, DEFAULT_LIMITS)


def ticks(seed: int, n: int) -> list[float]:
    """Sample times as the fold may see them: mostly 1 s apart, some half-seconds, repeats,
    steps back and long gaps."""
    rng = random.Random(seed)
    t, out = T0, []
    for _ in range(n):
        x = rng.random()
        t += 1.0 if x < 0.9 else rng.choice([0.5, 0.0, -0.3, -61.0, 119.0, 1e-4, 300.0])
        out.append(t)
    return out


def schedules(monkeypatch: pytest.MonkeyPatch, seed: int, stretch: float) -> None:
    calls: list[tuple[str, float]] = []

    def fake(name: str) -> Callable[..., list[Finding]]:
        def det(host: str, history: HostHistory, hello: Hello | None, sample: HostSample,
                limits: DetectorLimits) -> list[Finding]:
            calls.append((name, sample.ts))
            return []
        return det
    dets = tuple(fake(f"d{i}") for i in range(len(detectors_mod.DETECTORS)))
    every = {d: e for d, (_, e) in zip(dets, detectors_mod.SCHEDULE, strict=True)}
    monkeypatch.setattr(detectors_mod, "DETECTORS", dets)
    monkeypatch.setattr(detectors_mod, "EVERY_S", every)
    monkeypatch.setattr(before, "DETECTORS", dets)
    monkeypatch.setattr(before, "EVERY_S", every)
    new, old = DetectorSchedule(stretch=stretch), before.ScheduleBefore(stretch=stretch)
    h = HostHistory()
    for ts in ticks(seed, 3000):
        s = HostSample(ts=ts, seq=0)
        calls.clear()
        got = new.run("h", h, None, s)
        ran_new = list(calls)
        calls.clear()
        want = old.run("h", h, None, s)
        assert (got, ran_new) == (want, calls), ts - T0


@pytest.mark.parametrize(("seed", "stretch"), [(1, 1.0), (2, 1.0), (3, 3.41)])
def test_the_schedule_runs_what_it_ran_before(monkeypatch: pytest.MonkeyPatch, seed: int,
                                              stretch: float) -> None:
    schedules(monkeypatch, seed, stretch)


def test_negative_control_an_idle_window_too_wide_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detectors_mod, "IDLE_SLACK_S", -0.6)
    with pytest.raises(AssertionError):
        schedules(monkeypatch, 1, 1.0)


def test_negative_control_a_leak_called_flat_too_eagerly_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    flat = memory_mod._surely_flat
    monkeypatch.setattr(memory_mod, "_surely_flat",
                        lambda p, nbins, need: flat(p, nbins, 2.5 * need))
    limits = dataclasses.replace(DEFAULT_LIMITS, leak_max_hours_to_full=500.0)
    with pytest.raises(AssertionError):
        for seed in (1, 2, 3):
            compare(seed, 2.0, limits)
