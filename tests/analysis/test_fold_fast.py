"""The fold's fast paths agree with the slow ones, and sparse samples survive the tiers."""

from __future__ import annotations

from dataclasses import replace

from probes.history import HostHistory, gpu_key
from probes.wire.samples import GpuSample, HostSample, HostStats

T0 = 1_800_000_000.0
GPU = GpuSample(index=0, mem_used_mib=60_000.0, mem_total_mib=81_559.0, util_pct=95.0,
                temp_c=65.0, power_w=600.0, power_limit_w=700.0, sm_clock_mhz=1980.0,
                sm_clock_max_mhz=1980.0, pcie_width=16, pcie_width_max=16)


def _sample(ts: float, mem: float) -> HostSample:
    gpus = tuple(replace(GPU, index=i, mem_used_mib=mem + 512.0 * i) for i in range(8))
    return HostSample(ts=ts, seq=int(ts), gpus=gpus,
                      host=HostStats(cpu_pct=30.0, mem_used_bytes=400 * 2**30))


def test_samples_ten_minutes_apart_are_all_read_back_in_the_hour() -> None:
    """The demo at --speed 600: a sample every 600 s for 2 h.  The raw tier spans 15 min, so
    a sample must not age out of it before it has been folded into the coarse tiers; the 1 h
    window (as the leak detector reads it: 40 points) holds every sample in it."""
    h = HostHistory()
    key = gpu_key(3, "mem_used_mib")
    for i in range(13):
        now = T0 + 600.0 * i + 0.3
        h.add(_sample(now, 60_000.0 + 100.0 * i))
        series = h.series(key)
        assert series is not None
        got = series.columns(since=now - 3600, max_points=40)
        want = [T0 + 600.0 * j + 0.3 for j in range(i + 1) if T0 + 600.0 * j + 0.3 > now - 3600]
        assert len(got.t) == len(want), (i, [round(t - now) for t in got.t])
        # Each point is the sample itself or the coarse bucket that holds it alone.
        for t, w in zip(got.t, want, strict=True):
            assert w - 60 < t <= w
    # Every sample also survives into the 5-minute tier: nothing is skipped on the way down.
    all_points = h.series(key).columns()  # type: ignore[union-attr]
    assert len(all_points.t) == 13
    assert all_points.mean[-1] > all_points.mean[0] + 1000
