"""The judgements that used to live in widgets, made in the core from the operator's limits.

Power near its limit, a saturated disk, a PCIe link below what it can do and memory used
high are decided in ``probes.analysis.judge`` from ``DetectorLimits``; the view builders put
the verdicts in the views and the widgets only render them.  Each verdict is checked on its
own, then through the console's fold and view builders with a changed limit, so a widget
that judged with its own constant again would disagree here.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from probes.analysis.judge import (
    disk_saturated,
    gpu_link_shortfall,
    host_health,
    judge_gpu,
    link_verdict,
    mem_high,
    peer_link,
    power_near_limit,
)
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState
from probes.triage import Code, Severity
from probes.wire.samples import DiskStats, GpuSample, HostSample, HostStats
from tests.support.tui_fakes import T0, gpu, hello, sample
from tui.views.host_views import gpu_rows, host_view, iostat_view, thermal_view, topo_view
from tui.views.wall_view import wall_host
from widgets._wall_layout import cell
from widgets.fleet_table import FleetLine, FleetTable
from widgets.gpu_table import GpuTable
from widgets.iostat_panel import render_iostat
from widgets.thermal_panel import power_part
from widgets.topo_matrix import pcie_text

# ---- each verdict on its own -------------------------------------------------------------


def test_power_near_limit_follows_power_near_share() -> None:
    assert power_near_limit(686.0, 700.0)  # 98 % of the limit
    assert not power_near_limit(630.0, 700.0)  # 90 %
    assert not power_near_limit(686.0, 700.0, DetectorLimits(power_near_share=0.99))
    assert power_near_limit(630.0, 700.0, DetectorLimits(power_near_share=0.9))
    assert not power_near_limit(None, 700.0) and not power_near_limit(686.0, None)
    assert not power_near_limit(5.0, 0.0)  # no limit reported: never "near" it


def test_disk_saturated_follows_disk_saturated_util_pct() -> None:
    assert disk_saturated(90.0) and disk_saturated(99.9)
    assert not disk_saturated(89.9) and not disk_saturated(None)
    assert not disk_saturated(math.nan)
    assert not disk_saturated(92.0, DetectorLimits(disk_saturated_util_pct=95.0))
    assert disk_saturated(80.0, DetectorLimits(disk_saturated_util_pct=80.0))


def test_mem_high_follows_mem_high_pct() -> None:
    assert mem_high(95.0) and mem_high(100.0)
    assert not mem_high(94.9) and not mem_high(None) and not mem_high(math.nan)
    assert not mem_high(96.0, DetectorLimits(mem_high_pct=97.0))
    assert mem_high(80.0, DetectorLimits(mem_high_pct=80.0))


def test_host_ram_high_reads_the_same_limit() -> None:
    stats = HostStats(mem_used_bytes=96, mem_total_bytes=100)
    assert host_health(stats, None, None, None).mem_high
    strict = DetectorLimits(mem_high_pct=97.0)
    assert not host_health(stats, None, None, None, detectors=strict).mem_high


def test_link_verdict_lanes_lost_whatever_the_load() -> None:
    narrow = replace(gpu(3, 0), pcie_width=8, pcie_width_max=16, util_pct=0.0)
    v = link_verdict(narrow)
    assert v.width_low and not v.gen_low and v.shortfall is Severity.WARNING


@pytest.mark.parametrize(("util", "want"), [(97.0, Severity.INFO), (3.0, None)])
def test_link_verdict_lower_generation_counts_only_under_load(util: float,
                                                              want: Severity | None) -> None:
    """An idle GPU trains down to save power: marked, but no verdict (the topology panel
    used to call it "gen down" with the parser's rule while every other screen said ok)."""
    slow = replace(gpu(2, 0), pcie_gen=3, pcie_gen_max=5, util_pct=util)
    v = link_verdict(slow)
    assert v.gen_low and not v.width_low and v.shortfall is want
    assert v.shortfall is judge_gpu(slow, None, (), None).link
    # "busy" is the operator's power_cap_busy_util_pct: raising it past the load clears it
    lazy = DetectorLimits(power_cap_busy_util_pct=99.0)
    assert link_verdict(slow, lazy).shortfall is None


def test_judge_gpu_carries_mem_and_power_verdicts_by_the_limits() -> None:
    g = replace(gpu(0, 0), mem_used_mib=77_000.0, mem_total_mib=80_000.0,
                power_w=686.0, power_limit_w=700.0)  # 96 % memory, 98 % power
    j = judge_gpu(g, None, (), None)
    assert j.mem_high and j.power_high
    loose = DetectorLimits(mem_high_pct=97.0, power_near_share=0.99)
    j = judge_gpu(g, None, (), None, loose)
    assert not j.mem_high and not j.power_high


# ---- through the fold and the view builders ----------------------------------------------


def _fold(limits: DetectorLimits | None = None) -> HostState:
    """One host whose GPU 0 draws 98 % of its limit with 96 % of its memory used, on a
    x8 link beside seven x16 siblings, with a disk at 92 % util."""
    fleet = FleetState([HostSpec(name="h", expect_gpus=8)], limits)
    fleet.apply("h", hello("h"), T0)
    for step in range(30):
        s = sample("h", step)
        g0 = replace(s.gpus[0], mem_used_mib=0.96 * (s.gpus[0].mem_total_mib or 0),
                     power_w=686.0, power_limit_w=700.0, pcie_width=8, pcie_width_max=16)
        busy = DiskStats("nvme0n1", util=92.0, aqu_sz=4.0)
        s = HostSample(ts=s.ts, seq=s.seq, gpus=(g0, *s.gpus[1:]), host=s.host,
                       disks=(busy,))
        fleet.apply("h", s, T0 + step)
    return fleet.hosts["h"]


def test_every_screen_reads_the_core_verdicts_at_the_default_limits() -> None:
    state = _fold()
    row = state.row(T0 + 30)
    assert not row.mem_high  # the host's GPUs together: one at 96 %, the rest ~75 %
    assert FleetTable.cells(FleetLine(row))[5][1] is None
    table = {r.index: r for r in gpu_rows(state)}
    assert table[0].judged.mem_high and not table[1].judged.mem_high
    assert GpuTable.cells(table[0])[3][1] == "cell--mem-high"
    assert GpuTable.cells(table[1])[3][1] is None
    wall = wall_host(state, "mem", T0 + 30, row)
    assert cell("mem", "streaming", wall.gpus[0])[1] == "mem-high"
    assert cell("mem", "streaming", wall.gpus[1])[1] != "mem-high"
    thermal = {g.index: g for g in thermal_view(state).gpus}
    assert thermal[0].power_high and not thermal[1].power_high
    assert "sev-warning" in power_part(thermal[0]).markup
    (disk,) = iostat_view(state).disks
    assert disk.saturated and all(disk.util_saturated)
    assert any(f.code == "disk-saturated" for f in state.findings())
    assert "▲ saturated" in render_iostat(iostat_view(state), 160).plain
    topo = topo_view(state)
    assert topo is not None
    links = {lk.index: lk for lk in topo.links_state}
    assert pcie_text(links[0]) == ("Gen5 ▼ x8/16", "lanes lost", Severity.WARNING)
    assert pcie_text(links[1]) == ("Gen5 x16", "", None)


def test_a_changed_limit_moves_every_verdict() -> None:
    loose = DetectorLimits(mem_high_pct=97.0, power_near_share=0.99,
                           disk_saturated_util_pct=95.0)
    state = _fold(loose)
    table = {r.index: r for r in gpu_rows(state)}
    assert not table[0].judged.mem_high
    assert GpuTable.cells(table[0])[3][1] is None
    row = state.row(T0 + 30)
    wall = wall_host(state, "mem", T0 + 30, row)
    assert cell("mem", "streaming", wall.gpus[0])[1] != "mem-high"
    thermal = {g.index: g for g in thermal_view(state).gpus}
    assert not thermal[0].power_high
    assert "sev-warning" not in power_part(thermal[0]).markup
    (disk,) = iostat_view(state).disks
    assert not disk.saturated and not any(disk.util_saturated)
    assert "saturated" not in render_iostat(iostat_view(state), 160).plain
    assert not any(f.code == "disk-saturated" for f in state.findings())
    tight = DetectorLimits(mem_high_pct=50.0)
    state = _fold(tight)
    row = state.row(T0 + 30)
    assert row.mem_high and FleetTable.cells(FleetLine(row))[5][1] == "cell--mem-high"
    view = host_view(state)
    assert view is not None and view.health is not None
    assert not view.health.mem_high  # 600 GiB of 2 TiB RAM


# ---- a link held to its siblings' when its own maximum is not collected --------------------


def _no_max(width: int, gen: int = 5, util: float = 97.0) -> GpuSample:
    return replace(gpu(0, 0), pcie_width=width, pcie_gen=gen, pcie_width_max=None,
                   pcie_gen_max=None, util_pct=util)


def test_a_link_x8_beside_x16_siblings_is_short() -> None:
    """dcgm-exporter publishes the current link only: without a maximum the x8 used to
    read ok beside seven x16 siblings (review ux §3 item 4)."""
    host = [_no_max(16)] * 7 + [_no_max(8)]
    peers = peer_link(host)
    assert peers == (5, 16)
    assert gpu_link_shortfall(_no_max(8)) is None  # alone, nothing to hold it to
    v = link_verdict(_no_max(8), peers=peers)
    assert v.shortfall is Severity.WARNING and v.width_low and v.width_cap == 16
    assert link_verdict(_no_max(16), peers=peers).shortfall is None
    # a lower generation than the siblings' counts only under load, as against a maximum
    assert gpu_link_shortfall(_no_max(16, gen=4), peers=peers) is Severity.INFO
    assert gpu_link_shortfall(_no_max(16, gen=4, util=2.0), peers=peers) is None
    # a maximum the GPU reports wins over its siblings: an x8 card in an x8 slot is fine
    own = replace(_no_max(8), pcie_width_max=8, pcie_gen_max=5)
    assert gpu_link_shortfall(own, peers=peers) is None


def test_the_sibling_verdict_reaches_the_findings_and_every_screen() -> None:
    fleet = FleetState([HostSpec(name="h", expect_gpus=8)])
    fleet.apply("h", hello("h"), T0)
    for step in range(5):
        s = sample("h", step)
        gpus = tuple(replace(g, pcie_gen_max=None, pcie_width_max=None,
                             pcie_width=8 if g.index == 2 else 16) for g in s.gpus)
        fleet.apply("h", replace(s, gpus=gpus), T0 + step)
    state = fleet.hosts["h"]
    (f,) = [f for f in state.findings() if f.code == Code.PCIE_LINK_DOWNGRADED]
    assert f.gpu == 2 and f.severity is Severity.WARNING
    assert f.summary == "GPU 2 PCIe x8 (its siblings x16)"
    table = {r.index: r for r in gpu_rows(state)}
    assert table[2].judged.link is Severity.WARNING
    assert GpuTable.cells(table[2])[8] == ("Gen5 x8 < Gen5 x16", "cell--degraded")
    assert GpuTable.cells(table[3])[8] == ("Gen5 x16", None)
    topo = topo_view(state)
    assert topo is not None
    links = {lk.index: lk for lk in topo.links_state}
    assert pcie_text(links[2]) == ("Gen5 ▼ x8/16", "lanes lost", Severity.WARNING)
    assert pcie_text(links[3]) == ("Gen5 x16", "", None)
