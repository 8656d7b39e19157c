"""Tiered history: raw points as they came, buckets that keep spikes, bounded memory."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from probes.history import (
    DEFAULT_TIERS,
    STAGE_MAX,
    HostHistory,
    Point,
    Tier,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
    reason_mask,
)
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, GpuState, HostSample, HostStats

T0 = 1_800_000_000.0
BASE_GPU = GpuSample(index=0, mem_used_mib=60000.0, mem_total_mib=81559.0, util_pct=95.0,
                     temp_c=65.0, power_w=600.0, power_limit_w=700.0, sm_clock_mhz=1980.0,
                     sm_clock_max_mhz=1980.0, pcie_width=16, pcie_width_max=16,
                     ecc_uncorrected_volatile=0, ecc_corrected_volatile=0,
                     remap_uncorrectable=0, remap_correctable=0)


def gpus(n: int = 8, **fields: object) -> tuple[GpuSample, ...]:
    return tuple(replace(BASE_GPU, index=i, **fields) for i in range(n))  # type: ignore[arg-type]


def sample(ts: float, gs: tuple[GpuSample, ...] | None = None, seq: int = 0,
           disks: tuple[DiskStats, ...] = (), **host: object) -> HostSample:
    stats = HostStats(**{"cpu_pct": 30.0, "mem_used_bytes": 400 * 2 ** 30,  # type: ignore[arg-type]
                         "swap_in_pages_s": 0.0, "swap_out_pages_s": 0.0, **host})
    return HostSample(ts=ts, seq=seq, gpus=gpus() if gs is None else gs, host=stats,
                      disks=disks)


def feed(h: HostHistory, seconds: float, interval: float = 1.0,
         make: Callable[[float, int], HostSample] | None = None) -> None:
    """Add samples every ``interval`` s for ``seconds``; ``make(t, i)`` builds one."""
    n = int(seconds / interval)
    for i in range(n):
        t = T0 + i * interval
        h.add(make(t, i) if make is not None else sample(t, seq=i))


def util_series(values: dict[int, float],
                default: float = 50.0) -> Callable[[float, int], HostSample]:
    base = gpus(1)

    def make(t: float, i: int) -> HostSample:
        return sample(t, (replace(base[0], util_pct=values.get(i, default)),), seq=i)
    return make



CLASSIC = (Tier(1.0, 2 * 3600.0), Tier(15.0, 12 * 3600.0), Tier(300.0, 30 * 86400.0))
"""The first layout (raw 2 h, 15 s for 12 h): the tier mechanics below are pinned to it, so
they do not move with ``DEFAULT_TIERS`` (whose spans ``test_history_budget.py`` checks)."""


class TestRawAndLatest:
    def test_raw_points_come_back_as_given_at_any_interval(self) -> None:
        for interval in (1.0, 10.0, 0.5):
            h = HostHistory(CLASSIC)
            vals = [float(v % 90) for v in range(100)]
            feed(h, 100 * interval, interval, util_series(dict(enumerate(vals))))
            s = h.series(gpu_key(0, "util_pct"))
            assert s is not None
            pts = s.points()
            assert [p.t for p in pts] == [T0 + i * interval for i in range(100)]
            assert [p.mean for p in pts] == pytest.approx(vals, abs=0.07)
            assert all(p.lo == p.hi == p.mean and p.n == 1 for p in pts)
            latest = s.latest()
            assert latest is not None and latest.t == T0 + 99 * interval

    def test_queries_see_samples_not_yet_written_out(self) -> None:
        h = HostHistory()
        feed(h, 3, 1.0, util_series({0: 10.0, 1: 20.0, 2: 30.0}))
        s = h.series(gpu_key(0, "util_pct"))
        assert s is not None
        assert [p.mean for p in s.points()] == [10.0, 20.0, 30.0]
        assert s.latest() == Point(T0 + 2, 30.0, 30.0, 30.0, 1)

    def test_since_until_bounds_are_inclusive(self) -> None:
        h = HostHistory()
        feed(h, 200)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        pts = s.points(since=T0 + 50, until=T0 + 60)
        assert [p.t for p in pts] == [T0 + i for i in range(50, 61)]

    def test_unknown_key_is_none(self) -> None:
        h = HostHistory()
        feed(h, 5)
        assert h.series(gpu_key(9, "util_pct")) is None
        assert h.series(gpu_key(0, "util_pct")) is not None

    def test_missing_values_are_skipped_not_zero(self) -> None:
        h = HostHistory()
        base = gpus(1)[0]

        def make(t: float, i: int) -> HostSample:
            return sample(t, (replace(base, util_pct=None if i % 2 else 40.0),), seq=i)
        feed(h, 600, 1.0, make)
        s = h.series(gpu_key(0, "util_pct"))
        assert s is not None
        raw = s.points(since=T0)
        assert len(raw) == 300 and {p.mean for p in raw} == {40.0}

    def test_time_going_backwards_is_dropped(self) -> None:
        h = HostHistory()
        h.add(sample(T0 + 10))
        h.add(sample(T0 + 5))
        h.add(sample(T0 + 10))
        h.add(sample(T0 + 11))
        assert h.dropped == 2
        s = h.series(host_key("cpu_pct"))
        assert s is not None and [p.t for p in s.points()] == [T0 + 10, T0 + 11]

    def test_half_precision_raw_values_are_close(self) -> None:
        h = HostHistory()
        base = gpus(1)[0]
        vals = [random.Random(3).uniform(0, 100) for _ in range(200)]

        def make(t: float, i: int) -> HostSample:
            return sample(t, (replace(base, util_pct=vals[i], power_w=600 + vals[i],
                                      mem_used_mib=70000.0 + i),), seq=i)
        feed(h, 200, 1.0, make)
        util = h.series(gpu_key(0, "util_pct"))
        power = h.series(gpu_key(0, "power_w"))
        mem = h.series(gpu_key(0, "mem_used_mib"))
        assert util is not None and power is not None and mem is not None
        assert [p.mean for p in util.points()] == pytest.approx(vals, abs=0.07)
        assert [p.mean for p in power.points()] == pytest.approx([600 + v for v in vals],
                                                                 abs=0.5)
        assert [p.mean for p in mem.points()] == [70000.0 + i for i in range(200)]


class TestTiers:
    def test_a_spike_survives_downsampling(self) -> None:
        h = HostHistory(CLASSIC)
        spike_at = 600
        feed(h, 3 * 3600, 1.0, util_series({spike_at: 100.0}, default=20.0))
        s = h.series(gpu_key(0, "util_pct"))
        assert s is not None
        pts = s.points(since=T0, until=T0 + 1800)
        assert all(p.n > 1 for p in pts), "the first hour is older than the raw tier"
        spike = [p for p in pts if p.t <= T0 + spike_at < p.t + 15]
        assert len(spike) == 1
        assert spike[0].hi == 100.0 and spike[0].lo == 20.0
        assert spike[0].mean == pytest.approx(20.0 + 80.0 / 15, abs=0.6)
        merged = s.points(since=T0, max_points=12)
        assert len(merged) <= 12
        assert max(p.hi for p in merged) == 100.0
        assert sum(p.n for p in merged) == 3 * 3600

    def test_stitched_query_is_coarse_then_fine_without_overlap(self) -> None:
        h = HostHistory(CLASSIC)
        feed(h, 3 * 3600)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        pts = s.points()
        ts = [p.t for p in pts]
        assert ts == sorted(set(ts))
        gaps = {round(b - a) for a, b in itertools.pairwise(ts)}
        assert gaps <= {1, 15}
        assert sum(p.n for p in pts) == 3 * 3600
        fine = [p for p in pts if p.n == 1]
        assert fine[0].t <= T0 + 3600 + 15
        assert pts[0].t <= T0

    def test_finest_tier_covering_since_is_used(self) -> None:
        h = HostHistory(CLASSIC)
        feed(h, 3 * 3600)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        recent = s.points(since=T0 + 3 * 3600 - 600)
        assert len(recent) == 600 and all(p.n == 1 for p in recent)

    def test_max_points_prefers_a_coarse_tier_and_keeps_the_tail(self) -> None:
        h = HostHistory(CLASSIC)
        feed(h, 3 * 3600)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        now = T0 + 3 * 3600 - 1
        pts = s.points(since=now - 3600, max_points=60)
        assert 55 <= len(pts) <= 60
        assert sum(p.n for p in pts) == pytest.approx(3600, abs=15)
        assert pts[-1].t >= now - 90

    def test_coarsest_tier_and_bounded_memory_over_a_long_run(self) -> None:
        tiers = (Tier(1.0, 300.0), Tier(10.0, 1200.0), Tier(60.0, 7200.0))
        h = HostHistory(tiers)
        feed(h, 4 * 3600, 2.0)
        h.flush()
        caps = [r.cap for r in h.store.rings]
        size = h.nbytes()
        feed_more = HostHistory(tiers)
        feed(feed_more, 8 * 3600, 2.0)
        feed_more.flush()
        assert [r.cap for r in feed_more.store.rings] == caps
        assert feed_more.nbytes() == size
        assert caps[0] <= 300 / 2 + STAGE_MAX + 1
        assert caps[2] <= 7200 / 60 + 2
        s = feed_more.series(host_key("cpu_pct"))
        assert s is not None
        pts = s.points()
        assert pts[0].t >= T0 + 8 * 3600 - 7200 - 300
        assert pts[0].n == 30

    def test_ten_second_samples_fill_fifteen_second_buckets(self) -> None:
        h = HostHistory(CLASSIC)
        feed(h, 4 * 3600, 10.0)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        old = s.points(since=T0, until=T0 + 600)
        assert {p.n for p in old} <= {1, 2} and all(p.t % 15 == 0 for p in old)

    def test_tiers_must_nest(self) -> None:
        with pytest.raises(ValueError):
            HostHistory((Tier(1, 10), Tier(15, 100), Tier(20, 1000)))
        with pytest.raises(ValueError):
            HostHistory(())
        with pytest.raises(ValueError):
            HostHistory((Tier(1, 60), Tier(15, 1000)))
        assert [t.resolution_s for t in DEFAULT_TIERS] == [1.0, 15.0, 60.0, 300.0]

    def test_single_tier_works(self) -> None:
        h = HostHistory((Tier(1.0, 100.0),))
        feed(h, 500)
        s = h.series(host_key("cpu_pct"))
        assert s is not None
        pts = s.points()
        assert 100 <= len(pts) <= 100 + STAGE_MAX + 1

    def test_partial_bucket_counts(self) -> None:
        h = HostHistory(CLASSIC)
        base = gpus(1)[0]

        def make(t: float, i: int) -> HostSample:
            return sample(t, (replace(base, temp_c=None if i % 3 else 70.0),), seq=i)
        feed(h, 3 * 3600, 1.0, make)
        s = h.series(gpu_key(0, "temp_c"))
        assert s is not None
        old = s.points(since=T0, until=T0 + 600)
        assert {p.n for p in old} == {5}


class TestRandomAgainstBruteForce:
    def test_raw_and_buckets_match_a_plain_list(self) -> None:
        rng = random.Random(11)
        h = HostHistory((Tier(1.0, 300.0), Tier(15.0, 3000.0), Tier(60.0, 30000.0)))
        truth: list[tuple[float, float]] = []
        t = T0
        base = gpus(1)[0]
        for i in range(5000):
            t += rng.choice((0.5, 1.0, 1.0, 2.0, 10.0, 40.0))
            v = float(rng.randrange(0, 100))
            truth.append((t, v))
            h.add(sample(t, (replace(base, util_pct=v),), seq=i))
        s = h.series(gpu_key(0, "util_pct"))
        assert s is not None
        now = truth[-1][0]
        raw = s.points(since=now - 200)
        assert [(p.t, p.mean) for p in raw] == [x for x in truth if x[0] >= now - 200]
        for p in s.points(since=truth[0][0], until=now - 400):
            if p.n == 1 and p.t in dict(truth):
                continue
            fits = []
            for res in (15.0, 60.0):
                inside = [v for tt, v in truth if p.t <= tt < p.t + res]
                fits.append(len(inside) == p.n and p.lo == min(inside)
                            and p.hi == max(inside)
                            and p.mean == pytest.approx(sum(inside) / len(inside), abs=0.3))
            assert any(fits), p


class TestKeysAndSteps:
    def test_disk_await_is_the_worse_of_read_and_write(self) -> None:
        h = HostHistory()
        d = (DiskStats("nvme0n1", util=50.0, r_await=3.0, w_await=9.0, aqu_sz=2.0),
             DiskStats("sda", util=1.0, r_await=None, w_await=0.5, aqu_sz=0.0))
        for i in range(5):
            h.add(sample(T0 + i, disks=d))
        aw = h.series(disk_key("nvme0n1", "await"))
        sda = h.series(disk_key("sda", "await"))
        assert aw is not None and sda is not None
        assert aw.latest() is not None and aw.latest().mean == 9.0  # type: ignore[union-attr]
        assert sda.latest() is not None and sda.latest().mean == 0.5  # type: ignore[union-attr]
        assert h.disks() == ["nvme0n1", "sda"]
        assert disk_key("sda", "util") in h.series_keys()

    def test_processes_are_bounded_and_forgotten(self) -> None:
        h = HostHistory(max_processes_per_gpu=2, process_forget_s=600)
        base = gpus(1)[0]

        def make(t: float, i: int) -> HostSample:
            procs = [GpuProcess(pid=100, name="a", user="u", used_mib=1000.0 + i)]
            if i < 100:
                procs += [GpuProcess(pid=p, name="b", user="u", used_mib=10.0)
                          for p in (200, 300, 400)]
            return sample(t, (replace(base, processes=tuple(procs)),), seq=i)
        feed(h, 50, 1.0, make)
        assert len(h.processes(0)) == 2
        s = h.series(proc_key(0, 100))
        assert s is not None and s.latest().mean == 1049.0  # type: ignore[union-attr]
        feed(h, 1000, 1.0, make)
        assert h.processes(0) == [100]
        assert h.series(proc_key(0, 200)) is None

    def test_step_series_record_changes_only(self) -> None:
        h = HostHistory()
        base = gpus(1)[0]
        ecc = {0: 0, 100: 2, 200: 2, 300: 0, 400: 5}

        def make(t: float, i: int) -> HostSample:
            e = max(v for k, v in ecc.items() if k <= i)
            e = [v for k, v in sorted(ecc.items()) if k <= i][-1]
            width = 16 if i < 250 else 8
            reasons = ("sw_thermal_slowdown",) if 50 <= i < 60 else ()
            return sample(t, (replace(base, ecc_uncorrected_volatile=e, pcie_width=width,
                                      clock_reasons=reasons),), seq=i)
        feed(h, 500, 1.0, make)
        st = h.steps(gpu_key(0, "ecc_uncorrected_volatile"))
        assert st is not None
        assert st.changes() == [(T0, 0.0), (T0 + 100, 2.0), (T0 + 300, 0.0), (T0 + 400, 5.0)]
        assert st.increase_total == 7.0 and st.first_increase_ts == T0 + 100
        width = h.steps(gpu_key(0, "pcie_width"))
        assert width is not None and width.peak == 16.0
        assert width.latest() == Point(T0 + 250, 8.0, 8.0, 8.0, 1)
        reasons = h.steps(gpu_key(0, "clock_reasons"))
        assert reasons is not None
        segs = reasons.segments(T0, T0 + 499)
        on = [(a, b) for a, b, v in segs if v]
        assert on == [(T0 + 50, T0 + 60)]
        assert reason_mask(["sw_thermal_slowdown"]) == int(segs[1][2])
        assert reasons.value_at(T0 + 55) == reason_mask(["sw_thermal_slowdown"])

    def test_dropout_is_visible_in_count_and_presence(self) -> None:
        h = HostHistory()

        def make(t: float, i: int) -> HostSample:
            gs = gpus()
            if i >= 300:
                gs = tuple(g for g in gs if g.index != 6)
            if i >= 400:
                gs = tuple(replace(g, state=GpuState.LOST) if g.index == 2 else g
                           for g in gs)
            return sample(t, gs, seq=i)
        feed(h, 500, 1.0, make)
        count = h.gpu_count_series()
        assert count is not None
        pts = count.points()
        assert pts[0].mean == 8 and pts[350].mean == 7 and pts[-1].mean == 6
        assert h.gpus_missing_since() == {6: T0 + 300}
        assert h.gpu_indices() == list(range(8))
        state = h.steps(gpu_key(2, "state"))
        assert state is not None and state.latest() == Point(T0 + 400, 3.0, 3.0, 3.0, 1)

    def test_gpu_coming_back_clears_missing(self) -> None:
        h = HostHistory()

        def make(t: float, i: int) -> HostSample:
            gs = gpus()
            return sample(t, gs if not 100 <= i < 150 else gs[:7], seq=i)
        feed(h, 120, 1.0, make)
        assert h.gpus_missing_since() == {7: T0 + 100}
        feed(h, 200, 1.0, make)
        assert h.gpus_missing_since() == {}
        s = h.series(gpu_key(7, "util_pct"))
        assert s is not None
        times = {p.t for p in s.points()}
        assert T0 + 120 not in times and T0 + 160 in times


def test_memory_per_gpu_day_is_in_budget() -> None:
    """A day at 1 Hz of an 8-GPU host: the target is ~250 MB for 64 such hosts."""
    h = HostHistory()
    pool = [sample(0.0, gpus(util_pct=float(90 + i % 7), mem_used_mib=60000.0 + i),
                   disks=(DiskStats("nvme0n1", util=20.0, r_await=0.4, w_await=0.3,
                                    aqu_sz=0.3),),
                   cpu_pct=float(30 + i % 5)) for i in range(50)]
    for i in range(86400):
        h.add(replace(pool[i % 50], ts=T0 + i, seq=i))
    h.flush()
    per_host = h.nbytes()
    assert per_host * 64 < 250e6, per_host
    assert not math.isnan(per_host)
