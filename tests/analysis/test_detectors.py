"""Detectors on synthetic histories (positives and the shapes that fool naive ones), and on
the agent's simulator scenarios end to end."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace

import pytest

from probes.agent import LEAK_MIB_PER_H
from probes.analysis.detectors import (
    DEFAULT_LIMITS,
    DetectorLimits,
    DetectorSchedule,
    detect_counters_increasing,
    detect_data_starvation,
    detect_gpu_dropout,
    detect_link_downgrade_appeared,
    detect_memory_leak,
    detect_power_pinned,
    detect_swap_activity,
    detect_temp_near_slowdown,
    detect_throttled_while_busy,
    detector_stretch,
    run_detectors,
)
from probes.analysis.detectors.memory import leak_estimate
from probes.analysis.findings import Finding
from probes.history import HostHistory, gpu_key
from probes.triage import Severity, Step
from probes.wire.protocol import decode_line
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
from tests.conftest import REPO

T0 = 1_800_000_000.0
TOTAL = 81559.0
GPU = GpuSample(index=0, mem_used_mib=60000.0, mem_total_mib=TOTAL, util_pct=95.0,
                temp_c=65.0, power_w=600.0, power_limit_w=700.0, sm_clock_mhz=1980.0,
                sm_clock_max_mhz=1980.0, pcie_width=16, pcie_width_max=16, pcie_gen=5,
                pcie_gen_max=5, ecc_uncorrected_volatile=0, ecc_corrected_volatile=0,
                remap_uncorrectable=0, remap_correctable=0)
DISK = DiskStats("nvme0n1", util=18.0, r_await=0.4, w_await=0.3, aqu_sz=0.3)

GpuFn = Callable[[float, int, GpuSample], GpuSample]
"""(seconds since start, GPU index, the healthy GPU) -> the GPU at that time."""


def hello(n: int = 8, slowdown: float | None = 90.0, dataset_on: str | None = None) -> Hello:
    facts = HostFacts(hostname="h", kernel=None, os_name=None, python=None,
                      driver_version=None, cuda_version=None, cpu_model=None,
                      cpu_cores_logical=None, cpu_cores_physical=None, mem_total_bytes=None,
                      swap_total_bytes=None,
                      gpus=tuple(GpuInfo(index=i, uuid=None, bus_id=f"0000:{16 + i:02x}:00.0",
                                         name="H100", mem_total_mib=TOTAL,
                                         temp_slowdown_c=slowdown) for i in range(n)))
    ds = (DatasetDevice("/data", dataset_on),) if dataset_on else ()
    return Hello(ts=T0, protocol=1, agent_version="t", facts=facts, datasets=ds)


def build(seconds: float, interval: float = 1.0, n: int = 8, gpu: GpuFn | None = None,
          host: Callable[[float], HostStats] | None = None,
          disks: Callable[[float], tuple[DiskStats, ...]] | None = None,
          drop: Callable[[float, int], bool] | None = None) -> HostHistory:
    """A history fed ``seconds`` of samples; each hook changes what a healthy host shows."""
    h = HostHistory()
    base = [replace(GPU, index=i, processes=(GpuProcess(40000 + i, "python", "u", 59480.0),))
            for i in range(n)]
    for k in range(int(seconds / interval)):
        t = k * interval
        gs = []
        for i, g in enumerate(base):
            if drop is not None and drop(t, i):
                continue
            gs.append(gpu(t, i, g) if gpu is not None else g)
        stats = host(t) if host is not None else HostStats(
            cpu_pct=35.0, mem_used_bytes=400 * 2 ** 30, swap_in_pages_s=0.0,
            swap_out_pages_s=0.0)
        h.add(HostSample(ts=T0 + t, seq=k, gpus=tuple(gs), host=stats,
                         disks=disks(t) if disks is not None else (DISK,)))
    return h


def codes(findings: list[Finding]) -> list[tuple[str, int | None]]:
    return [(f.code, f.gpu) for f in findings]


def on_gpu(idx: int, fn: GpuFn) -> GpuFn:
    return lambda t, i, g: fn(t, i, g) if i == idx else g


def mem(fn: Callable[[float], float], idx: int = 3) -> GpuFn:
    """GPU ``idx``'s memory (and its process's) follows ``fn(t)``."""
    def f(t: float, i: int, g: GpuSample) -> GpuSample:
        if i != idx:
            return g
        m = fn(t)
        return replace(g, mem_used_mib=m,
                       processes=(GpuProcess(40000 + i, "python", "u", m - 520.0),))
    return f


class TestMemoryLeak:
    def test_steady_leak_with_allocator_sawtooth_and_noise(self) -> None:
        rng = random.Random(1)

        def m(t: float) -> float:
            return 66000.0 + 600.0 * t / 3600 + 1500.0 * ((t % 240) / 240) + rng.uniform(0, 30)
        h = build(2 * 3600, gpu=mem(m))
        found = detect_memory_leak("h", h, hello())
        assert codes(found) == [("memory-leak", 3)]
        f = found[0]
        assert f.step is Step.GPU and f.severity is Severity.WARNING
        slope = f.extra["slope_mib_h"]
        assert isinstance(slope, float) and 540 <= slope <= 660
        hours = f.extra["hours_to_full"]
        assert isinstance(hours, float) and 10 < hours < 30
        assert f.summary.startswith("GPU3 memory grows ")
        assert "MiB/h; full in ~" in f.summary and "of 81,559 MiB" in f.summary
        assert "pid 40003 (python)" in f.summary and f.extra["pid"] == 40003
        assert f.action and f.ts is not None and f.ts <= T0 + 3600 + 120

    def test_close_to_full_is_critical(self) -> None:
        h = build(2 * 3600, gpu=mem(lambda t: 76000.0 + 1200.0 * t / 3600))
        found = detect_memory_leak("h", h, hello())
        assert [f.severity for f in found] == [Severity.CRITICAL]

    @pytest.mark.parametrize("shape", [
        pytest.param(lambda t: 60000.0 if t < 2400 else 66000.0, id="one-step"),
        pytest.param(lambda t: 60000.0 if t < 5400 else 64000.0, id="step-in-second-half"),
        pytest.param(lambda t: 60000.0 + 8000.0 * ((t % 600) / 600), id="sawtooth"),
        pytest.param(lambda t: 79000.0 if int(t) == 6000 else 60000.0, id="spike"),
        pytest.param(lambda t: 60000.0 if int(t) != 3000 else 100.0, id="dip"),
        pytest.param(lambda t: 60000.0 + 100.0 * t / 3600, id="slow-growth"),
        pytest.param(lambda t: 10000.0 + 400.0 * t / 3600, id="far-from-full"),
    ])
    def test_shapes_that_are_not_a_leak(self, shape: Callable[[float], float]) -> None:
        h = build(2 * 3600, gpu=mem(shape))
        assert detect_memory_leak("h", h, hello()) == []

    def test_needs_half_an_hour(self) -> None:
        h = build(20 * 60, gpu=mem(lambda t: 70000.0 + 3000.0 * t / 3600))
        assert detect_memory_leak("h", h, hello()) == []
        h = build(40 * 60, gpu=mem(lambda t: 70000.0 + 3000.0 * t / 3600))
        assert codes(detect_memory_leak("h", h, hello())) == [("memory-leak", 3)]

    def test_estimate_of_a_staircase_leak(self) -> None:
        h = build(3 * 3600, interval=10.0,
                  gpu=mem(lambda t: 62000.0 + 64.0 * math.floor(t / 240)))
        e = leak_estimate(h.series(gpu_key(3, "mem_used_mib")), T0 + 3 * 3600 - 10)
        assert e is not None and e.slope_mib_h == pytest.approx(960, rel=0.1)
        assert e.first_half_mib_h > 500 and e.second_half_mib_h > 500


class TestThrottle:
    def test_thermal_slowdown_while_busy(self) -> None:
        def f(t: float, i: int, g: GpuSample) -> GpuSample:
            if t < 300:
                return g
            return replace(g, temp_c=89.0, sm_clock_mhz=1400.0,
                           clock_reasons=("sw_thermal_slowdown", "hw_thermal_slowdown"))
        h = build(900, gpu=on_gpu(5, f))
        found = detect_throttled_while_busy("h", h, hello())
        assert codes(found) == [("throttled-while-busy", 5)]
        s = found[0].summary
        assert "GPU5 throttled 100% of the last 5 min" in s
        assert "hw_thermal_slowdown, sw_thermal_slowdown" in s and "SM 1,400 of 1,980" in s
        assert "cooling" in (found[0].action or "")

    def test_low_clock_without_a_reason_while_busy(self) -> None:
        h = build(600, gpu=on_gpu(1, lambda t, i, g: replace(g, sm_clock_mhz=1500.0)))
        assert codes(detect_throttled_while_busy("h", h, hello())) == [
            ("throttled-while-busy", 1)]

    def test_power_cap_counts_only_when_busy(self) -> None:
        busy = build(600, gpu=on_gpu(2, lambda t, i, g: replace(
            g, clock_reasons=("sw_power_cap",), power_w=699.0)))
        assert codes(detect_throttled_while_busy("h", busy, hello())) == [
            ("throttled-while-busy", 2)]
        idle = build(600, gpu=on_gpu(2, lambda t, i, g: replace(
            g, util_pct=30.0, clock_reasons=("sw_power_cap",))))
        assert detect_throttled_while_busy("h", idle, hello()) == []

    def test_idle_gpu_with_low_clocks_is_fine(self) -> None:
        h = build(600, gpu=lambda t, i, g: replace(g, util_pct=0.0, sm_clock_mhz=345.0,
                                                   clock_reasons=("gpu_idle",)))
        assert detect_throttled_while_busy("h", h, hello()) == []

    def test_short_burst_is_not_sustained(self) -> None:
        def f(t: float, i: int, g: GpuSample) -> GpuSample:
            if 500 <= t < 560:
                return replace(g, sm_clock_mhz=1200.0, clock_reasons=("hw_slowdown",))
            return g
        h = build(700, gpu=on_gpu(4, f))
        assert detect_throttled_while_busy("h", h, hello()) == []

    def test_needs_a_full_window(self) -> None:
        h = build(120, gpu=lambda t, i, g: replace(g, clock_reasons=("hw_slowdown",)))
        assert detect_throttled_while_busy("h", h, hello()) == []


class TestTempAndPower:
    def test_near_slowdown_sustained(self) -> None:
        h = build(600, gpu=on_gpu(6, lambda t, i, g: replace(g, temp_c=87.0)))
        found = detect_temp_near_slowdown("h", h, hello())
        assert codes(found) == [("temp-near-slowdown", 6)]
        assert "87 °C" in found[0].summary and "90 °C slowdown" in found[0].summary

    def test_short_heat_or_no_threshold_is_silent(self) -> None:
        h = build(600, gpu=on_gpu(6, lambda t, i, g: replace(g, temp_c=88.0)
                                  if 400 < t < 460 else g))
        assert detect_temp_near_slowdown("h", h, hello()) == []
        hot = build(600, gpu=lambda t, i, g: replace(g, temp_c=88.0))
        assert detect_temp_near_slowdown("h", hot, hello(slowdown=None)) == []
        assert detect_temp_near_slowdown("h", hot, None) == []

    def test_power_pinned(self) -> None:
        h = build(900, gpu=on_gpu(0, lambda t, i, g: replace(g, power_w=696.0)))
        found = detect_power_pinned("h", h, hello())
        assert codes(found) == [("power-pinned", 0)]
        assert found[0].severity is Severity.INFO and "of its 700 W limit" in found[0].summary
        assert detect_power_pinned("h", build(900), hello()) == []
        burst = build(900, gpu=lambda t, i, g: replace(g, power_w=699.0) if t > 700 else g)
        assert detect_power_pinned("h", burst, hello()) == []


class TestHardware:
    def test_gpu_missing_versus_hello(self) -> None:
        h = build(120, drop=lambda t, i: i == 6 and t >= 60)
        found = detect_gpu_dropout("h", h, hello())
        assert codes(found) == [("gpu-dropout", 6)]
        f = found[0]
        assert f.severity is Severity.CRITICAL and f.ts == T0 + 60
        assert "GPU6 (0000:16:00.0) dropped out" in f.summary
        assert "7 of 8 GPUs answer" in f.summary

    def test_gpu_missing_versus_earlier_samples_without_hello(self) -> None:
        h = build(120, drop=lambda t, i: i == 2 and t >= 100)
        assert codes(detect_gpu_dropout("h", h, None)) == [("gpu-dropout", 2)]

    def test_gpu_never_seen_but_in_hello(self) -> None:
        h = build(30, n=7)
        assert codes(detect_gpu_dropout("h", h, hello(8))) == [("gpu-dropout", 7)]

    def test_lost_and_unresponsive_states(self) -> None:
        def f(t: float, i: int, g: GpuSample) -> GpuSample:
            if i == 1 and t >= 50:
                return GpuSample(index=1, state=GpuState.LOST)
            if i == 4 and t >= 80:
                return GpuSample(index=4, state=GpuState.UNRESPONSIVE)
            return g
        h = build(100, gpu=f)
        found = detect_gpu_dropout("h", h, hello())
        assert codes(found) == [("gpu-dropout", 1), ("gpu-dropout", 4)]
        assert found[0].ts == T0 + 50 and "is lost" in found[0].summary
        assert "6 of 8 GPUs answer" in found[0].summary

    def test_lost_gpu_known_by_bus_id(self) -> None:
        def f(t: float, i: int, g: GpuSample) -> GpuSample:
            return GpuSample(index=-1, state=GpuState.LOST, bus_id="0000:13:00.0") \
                if i == 3 else g
        h = build(30, gpu=f)
        assert codes(detect_gpu_dropout("h", h, hello())) == [("gpu-dropout", 3)]

    def test_healthy_has_no_dropout(self) -> None:
        assert detect_gpu_dropout("h", build(60), hello()) == []

    def test_link_width_drop_during_run(self) -> None:
        h = build(300, gpu=on_gpu(2, lambda t, i, g: replace(g, pcie_width=8)
                                  if t >= 200 else g))
        found = detect_link_downgrade_appeared("h", h, hello())
        assert codes(found) == [("link-downgrade-appeared", 2)]
        assert "x16 to x8" in found[0].summary and found[0].ts == T0 + 200

    def test_static_narrow_link_and_gen_changes_are_not_this(self) -> None:
        h = build(300, gpu=lambda t, i, g: replace(g, pcie_width=8 if i == 2 else 16,
                                                   pcie_gen=1 if t > 100 else 5))
        assert detect_link_downgrade_appeared("h", h, hello()) == []

    def test_ecc_and_remap_counters(self) -> None:
        def f(t: float, i: int, g: GpuSample) -> GpuSample:
            if i == 5:
                return replace(g, ecc_uncorrected_volatile=2 if t >= 100 else 0,
                               remap_uncorrectable=1 if t >= 150 else 0)
            if i == 6:
                return replace(g, ecc_corrected_volatile=int(t))
            if i == 7:
                return replace(g, ecc_corrected_volatile=10 + int(t > 100) * 5)
            return g
        h = build(300, gpu=f)
        found = detect_counters_increasing("h", h, hello())
        assert codes(found) == [("ecc-increasing", 5), ("remap-increasing", 5),
                                ("ecc-increasing", 6)]
        assert found[0].severity is Severity.CRITICAL and found[0].ts == T0 + 100
        assert "grew by 2" in found[0].summary
        assert found[2].severity is Severity.WARNING

    def test_counter_reset_is_not_growth(self) -> None:
        h = build(300, gpu=on_gpu(1, lambda t, i, g: replace(
            g, ecc_uncorrected_volatile=3 if t < 100 else 0)))
        assert detect_counters_increasing("h", h, hello()) == []


def starving_gpu(t: float, i: int, g: GpuSample) -> GpuSample:
    """Busy 12 s, idle 8 s: the loader cannot keep up."""
    return replace(g, util_pct=97.0 if t % 20 < 12 else 2.0)


BUSY_DISK = (DiskStats("nvme0n1", util=99.0, r_await=28.0, w_await=0.4, aqu_sz=31.0),
             DiskStats("sda", util=1.0, r_await=0.1, w_await=0.5, aqu_sz=0.0))


class TestStarvationAndSwap:
    def test_sawtooth_with_a_saturated_disk(self) -> None:
        h = build(600, gpu=starving_gpu, disks=lambda t: BUSY_DISK)
        found = detect_data_starvation("h", h, hello(dataset_on="nvme0n1"))
        assert codes(found) == [("data-starvation", None)]
        s = found[0].summary
        assert "nvme0n1 is 99% busy" in s and "await 28 ms" in s and "holding /data" in s
        assert "8 of 8 GPUs" in s and "40%" in s
        assert found[0].extra["disk"] == "nvme0n1"

    def test_sawtooth_with_a_cpu_bound_loader(self) -> None:
        h = build(600, gpu=starving_gpu, host=lambda t: HostStats(cpu_pct=97.0))
        found = detect_data_starvation("h", h, hello())
        assert codes(found) == [("data-starvation", None)]
        assert "CPU is 97% busy" in found[0].summary

    def test_no_suspect_or_steady_gpus_is_not_starvation(self) -> None:
        assert detect_data_starvation("h", build(600, gpu=starving_gpu), hello()) == []
        assert detect_data_starvation("h", build(600, disks=lambda t: BUSY_DISK), hello()) == []

    def test_idle_gpus_on_a_busy_disk_are_not_starving(self) -> None:
        h = build(600, gpu=lambda t, i, g: replace(g, util_pct=0.0),
                  disks=lambda t: BUSY_DISK)
        assert detect_data_starvation("h", h, hello()) == []

    def test_one_gpu_sawtooth_is_not_the_host(self) -> None:
        h = build(600, gpu=on_gpu(0, starving_gpu), disks=lambda t: BUSY_DISK)
        assert detect_data_starvation("h", h, hello()) == []

    def test_sustained_swap(self) -> None:
        h = build(300, host=lambda t: HostStats(cpu_pct=30.0, swap_in_pages_s=900.0,
                                                swap_out_pages_s=300.0 if t > 200 else 0.0))
        found = detect_swap_activity("h", h, hello())
        assert codes(found) == [("swap-activity", None)]
        assert "900 pages/s in" in found[0].summary

    def test_swap_burst_is_not_sustained(self) -> None:
        h = build(300, host=lambda t: HostStats(swap_in_pages_s=5000.0 if 270 < t < 285
                                                else 0.0))
        assert detect_swap_activity("h", h, hello()) == []


class TestRunAll:
    def test_healthy_host_has_no_findings(self) -> None:
        assert run_detectors("h", build(2 * 3600, interval=5.0), hello()) == []

    def test_worst_first_and_empty_history(self) -> None:
        assert run_detectors("h", HostHistory(), hello()) == []
        h = build(900, gpu=lambda t, i, g: replace(g, power_w=699.0) if i == 0 else g,
                  drop=lambda t, i: i == 7 and t > 800)
        found = run_detectors("h", h, hello())
        assert codes(found) == [("gpu-dropout", 7), ("power-pinned", 0)]

    def test_limits_change_verdicts(self) -> None:
        h = build(2 * 3600, gpu=mem(lambda t: 60000.0 + 100.0 * t / 3600))
        assert detect_memory_leak("h", h, hello()) == []
        loose = DetectorLimits(leak_min_mib_h=50.0, leak_max_hours_to_full=1000.0)
        assert codes(detect_memory_leak("h", h, hello(), None, loose)) == [("memory-leak", 3)]
        assert DEFAULT_LIMITS.leak_min_mib_h == 256.0


# ------------------------------------------------------------------------------ agent


def agent_history(scenario: str, count: int, interval: float) -> tuple[Hello, HostHistory]:
    proc = subprocess.run(
        [sys.executable, "-m", "probes.agent", "--simulate", scenario, "--fast", "--count",
         str(count), "--interval", str(interval), "--seed", "1", "--hostname", "h"],
        cwd=REPO, capture_output=True, check=True, timeout=120)
    first: Hello | None = None
    h = HostHistory()
    for line in proc.stdout.splitlines():
        msg = decode_line(line)
        if isinstance(msg, Hello):
            first = msg
        elif isinstance(msg, HostSample):
            h.add(msg)
    assert first is not None
    return first, h


class TestSimulatorScenarios:
    def test_leak(self) -> None:
        first, h = agent_history("leak:3", 720, 10)
        limits = DEFAULT_LIMITS
        if limits.leak_min_mib_h > LEAK_MIB_PER_H:
            # The simulator leaks tens of MiB/h, under the default threshold: judge it with
            # limits scaled to it (the slope must still come out right).
            limits = DetectorLimits(leak_min_mib_h=LEAK_MIB_PER_H / 2,
                                    leak_max_hours_to_full=10000.0)
        found = run_detectors("h", h, first, limits=limits)
        assert codes(found) == [("memory-leak", 3)]
        assert found[0].extra["slope_mib_h"] == pytest.approx(LEAK_MIB_PER_H, rel=0.25)

    def test_throttle(self) -> None:
        first, h = agent_history("throttle:5", 240, 10)
        assert sorted(codes(run_detectors("h", h, first))) == [
            ("temp-near-slowdown", 5), ("throttled-while-busy", 5)]

    def test_disk_saturated(self) -> None:
        # the simulator's loader stalls for 60 s of every 150 s
        first, h = agent_history("disk-saturated", 60, 10)
        found = run_detectors("h", h, first)
        assert codes(found) == [("data-starvation", None)]
        assert "nvme0n1" in found[0].summary

    def test_xid79(self) -> None:
        first, h = agent_history("xid79:6@600", 90, 10)
        found = run_detectors("h", h, first)
        assert codes(found) == [("gpu-dropout", 6)]
        assert found[0].ts is not None and found[0].ts - (h.first_ts or 0) == 600

    def test_healthy(self) -> None:
        first, h = agent_history("healthy", 720, 10)
        assert run_detectors("h", h, first) == []


def test_onsets_hold_while_a_finding_stays_and_restart_when_it_comes_back() -> None:
    from probes.analysis.detectors import keep_onsets

    def leak(ts: float, gpu: int = 3) -> Finding:
        return Finding(Step.GPU, "memory-leak", Severity.WARNING, "grows", "h", gpu=gpu, ts=ts)

    onsets: dict[tuple[str, str, int | None, int | None], float] = {}
    assert [f.ts for f in keep_onsets([leak(1000.0)], onsets)] == [1000.0]
    # the fitted window slid: the detector now dates it later, its onset stays
    assert [f.ts for f in keep_onsets([leak(1800.0), leak(1700.0, gpu=5)], onsets)] == [
        1000.0, 1700.0]
    # an earlier date (more history read) moves it back
    assert [f.ts for f in keep_onsets([leak(900.0)], onsets)] == [900.0]
    # gone (GPU5 too), then back: a new onset
    assert keep_onsets([], onsets) == [] and onsets == {}
    assert [f.ts for f in keep_onsets([leak(5000.0)], onsets)] == [5000.0]
    undated = Finding(Step.GPU, "nvlink-down", Severity.WARNING, "x", "h", gpu=1)
    assert keep_onsets([undated], onsets) == [undated]


@pytest.mark.parametrize(("stretch", "first_rerun_s"), [(1.0, 60.0), (3.0, 180.0)])
def test_a_very_large_fleet_runs_each_detector_less_often(stretch: float,
                                                          first_rerun_s: float) -> None:
    """At 10,000 hosts every detector's period is stretched (``detector_stretch``): the
    detectors' CPU stays that of a 3,000-host fleet."""
    schedule = DetectorSchedule(DEFAULT_LIMITS, stretch)
    h = HostHistory()
    ran = []
    for k in range(16):  # a host read every 15 s (Prometheus) for four minutes
        s = HostSample(ts=T0 + 15.0 * k, seq=k, gpus=(GPU,))
        h.add(s)
        if schedule.run("h", h, hello(1), s) is not None:
            ran.append(15.0 * k)
    assert ran[0] == 0.0
    assert ran[1] == first_rerun_s + 15.0  # the first sample past the period


def test_the_stretch_grows_with_the_fleet_past_3000_hosts() -> None:
    assert detector_stretch(8) == 1.0
    assert detector_stretch(3000) == 1.0
    assert detector_stretch(10_000) == pytest.approx(10 / 3)
