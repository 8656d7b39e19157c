"""The history's memory budget (1024 8-GPU hosts for a day in well under 1 GB) and that the
default tiers still serve each reader's window: charts, detectors and staged samples."""

from __future__ import annotations

from dataclasses import replace

import pytest

from probes.history import (
    DEFAULT_TIERS,
    STAGE_MAX,
    HostHistory,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
)
from probes.wire.samples import DiskStats, GpuProcess, GpuState, HostSample
from tests.history.test_history import feed, gpus, sample

CHART_POINTS = 240
"""As ``tui.views.host_views.CHART_POINTS`` (the core may not import it)."""


def busy(t: float, i: int) -> HostSample:
    """An 8-GPU host with a process per GPU and two disks, values moving every sample."""
    gs = tuple(replace(g, util_pct=float(i % 100), temp_c=50.0 + i % 30,
                       mem_used_mib=60000.0 + i % 1000, state=GpuState.OK,
                       processes=(GpuProcess(pid=4000 + g.index, name="python", user="ml",
                                             used_mib=1000.0 + i % 500),))
               for g in gpus(8))
    disks = (DiskStats(name="nvme0n1", util=float(i % 90), r_await=1.5, w_await=2.0,
                       aqu_sz=0.4),
             DiskStats(name="nvme1n1", util=10.0, r_await=0.5, w_await=None, aqu_sz=0.1))
    return sample(t, gs, seq=i, disks=disks, cpu_pct=float(i % 70))


class TestBudget:
    def test_a_day_of_an_eight_gpu_host_fits_half_a_megabyte(self) -> None:
        # Raw rows at 1 Hz: as many as the raw tier spans, then no more.
        raw = HostHistory()
        feed(raw, DEFAULT_TIERS[0].span_s + 300, 1.0, busy)
        raw.flush()
        ring = raw.store.rings[0]
        assert ring.cap <= DEFAULT_TIERS[0].span_s + STAGE_MAX + 1
        raw_bytes = ring.nbytes()
        assert raw_bytes / ring.cap < 200, "a raw row of 8 GPUs stays under 200 bytes"
        # Bucket rows: what one costs, times as many as each tier spans (a sample every
        # 5 min over 26 h fills every tier's span, if not every bucket of the finer ones).
        day = HostHistory()
        feed(day, 26 * 3600, 300.0, busy)
        day.flush()
        total = float(raw_bytes)
        for tier, r in zip(DEFAULT_TIERS[1:], day.store.rings[1:], strict=True):
            assert r.cap <= tier.span_s / tier.resolution_s + 2, "bounded: flat once full"
            fixed = 64 * (len(r.cols) + 2)
            per_row = (r.nbytes() - fixed) / r.cap
            assert per_row < 400, "a bucket row of 8 GPUs stays under 400 bytes"
            total += fixed + per_row * (tier.span_s / tier.resolution_s + 1)
        assert total < 0.55e6
        assert 1024 * total < 600e6, "1024 hosts' history leaves room under 1 GB"

    def test_staging_holds_only_the_numbers_kept(self) -> None:
        h = HostHistory()
        feed(h, STAGE_MAX - 1, 1.0, busy)
        assert h._staged and not any(isinstance(r, HostSample) for r in h._staged)


class TestReadersWindows:
    @pytest.fixture(scope="class")
    def day(self) -> HostHistory:
        h = HostHistory()
        feed(h, 25 * 3600, 15.0, busy)
        return h

    @pytest.mark.parametrize(("window_h", "at_least"), [(1, 200), (6, 200), (24, 200)])
    def test_each_chart_window_gets_its_points(self, day: HostHistory, window_h: int,
                                               at_least: int) -> None:
        s = day.series(gpu_key(3, "temp_c"))
        assert s is not None and day.last_ts is not None
        pts = s.points(since=day.last_ts - window_h * 3600, max_points=CHART_POINTS)
        assert at_least <= len(pts) <= CHART_POINTS
        assert pts[0].t <= day.last_ts - window_h * 3600 + 0.05 * window_h * 3600

    def test_detector_windows_read_fine_points(self, day: HostHistory) -> None:
        assert day.last_ts is not None
        s = day.series(host_key("cpu_pct"))
        assert s is not None
        recent = s.points(since=day.last_ts - 600)
        assert len(recent) == 41 and all(p.n == 1 for p in recent)
        hour = s.points(since=day.last_ts - 3600, max_points=40)
        assert 35 <= len(hour) <= 40 and sum(p.n for p in hour) >= 235


class TestStagedReadsAsWritten:
    def test_queries_agree_before_and_after_the_staged_rows_are_written(self) -> None:
        staged, written = HostHistory(), HostHistory()
        for h in (staged, written):
            feed(h, 3 * STAGE_MAX + 5, 1.0, busy)
        written.flush()
        assert staged._staged and not written._staged
        for key in (gpu_key(2, "util_pct"), gpu_key(5, "mem_used_mib"), host_key("gpu_count"),
                    host_key("cpu_pct"), disk_key("nvme0n1", "await"),
                    disk_key("nvme1n1", "await"), proc_key(4, 4004)):
            a, b = staged.series(key), written.series(key)
            assert a is not None and b is not None, key
            pa, pb = a.points(), b.points()  # the raw tier is half precision, staging exact
            assert [p.t for p in pa] == [p.t for p in pb], key
            assert [p.mean for p in pa] == pytest.approx([p.mean for p in pb], rel=1e-3), key
            la, lb = a.latest(), b.latest()
            assert la is not None and lb is not None and la.t == lb.t, key
            assert la.mean == pytest.approx(lb.mean, rel=1e-3), key
        assert staged.processes(4) == written.processes(4) == [4004]
        assert staged.disks() == written.disks() == ["nvme0n1", "nvme1n1"]
        assert staged.series_keys() == written.series_keys()
        gc = staged.series(host_key("gpu_count"))
        assert gc is not None and {p.mean for p in gc.points()} == {8.0}
