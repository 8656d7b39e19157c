"""Every screen gives each GPU the same verdict, because the core judges it once.

Each demo scenario (and the edge cases where widgets used to judge for themselves: an idle
GPU at its power cap, 6 cores per GPU against ``cores_per_gpu_min: 8``, a changed
``leak_critical_hours``) goes through the console's fold and every view builder; the fleet
row, the wall, the host GPU table, the thermal panel, the memory panel, the findings and
triage must then agree GPU by GPU.  Asserted on the view objects and, where cheap, on the
rendered text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest

from probes.agent import SIM_SCENARIOS
from probes.analysis.findings import Finding
from probes.analysis.incident import TriageRecord, review
from probes.analysis.judge import CoreCount, GpuVerdict, TempLevel, temp_level
from probes.analysis.limits import DetectorLimits, PreflightLimits
from probes.analysis.preflight import CheckVerdict, HostInput, check_host
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState
from probes.triage import Code, Severity, Step
from probes.wire.events import SessionItem
from probes.wire.samples import Hello, HostSample
from tests.support.tui_fakes import SIM_STEP_S, T0, sim_items
from tui.views.host_views import gpu_rows, host_view, memory_growth_view, thermal_view
from tui.views.triage_view import host_view as triage_host
from tui.views.wall_view import wall_host
from widgets._format import TEMP_CLASS
from widgets._wall_layout import STATE_GLYPH, cell
from widgets.fleet_table import FleetLine, FleetTable
from widgets.gpu_table import GpuTable
from widgets.thermal_panel import gpu_line

MINUTES = 45
NOW = T0 + MINUTES * SIM_STEP_S + 1.0
_BY_CODE = (
    ({Code.GPU_LOST, Code.GPU_DROPOUT}, GpuVerdict.LOST),
    ({Code.GPU_UNRESPONSIVE}, GpuVerdict.UNRESPONSIVE),
    ({Code.MEMORY_LEAK}, GpuVerdict.LEAKING),
    ({Code.CLOCKS_THROTTLED, Code.THROTTLED_WHILE_BUSY}, GpuVerdict.THROTTLED),
    ({Code.TEMP_NEAR_SLOWDOWN}, GpuVerdict.HOT),
    ({Code.COLLECTIVE_HANG}, GpuVerdict.SPINNING),
)


def from_findings(findings: Iterable[Finding], gpu: int) -> GpuVerdict:
    """The verdict the findings alone give a GPU, worked out apart from the core's code."""
    codes = {f.code for f in findings if f.gpu == gpu or gpu in (f.extra.get("gpus") or ())}
    return next((v for found, v in _BY_CODE if codes & found), GpuVerdict.OK)


def fold(items: Iterable[SessionItem], name: str = "h", *,
         detectors: DetectorLimits | None = None,
         preflight: PreflightLimits | None = None) -> HostState:
    fleet = FleetState([HostSpec(name=name, expect_gpus=8)], detectors, preflight)
    for item in items:
        fleet.apply(name, item, NOW)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return fleet.hosts[name]


def sim(scenario: str, **limits: DetectorLimits | PreflightLimits | None) -> HostState:
    return fold(sim_items("h", scenario, seed=1, minutes=MINUTES), **limits)  # type: ignore[arg-type]


def assert_agree(state: HostState) -> dict[int, GpuVerdict]:
    """Every view of ``state`` gives each GPU the same verdict; returns the verdicts."""
    row = state.row(NOW)
    verdicts = {j.index: j.verdict for j in row.gpus}
    judged = {j.index: j for j in row.gpus}
    findings = state.findings()
    # triage: the GPU step's findings, as the triage screen reviews them
    steps = review(findings, [triage_host(state)], TriageRecord())
    # a GPU's verdict comes from findings triage lists: GPU state, or NCCL for a spin
    listed = [f for r in steps if r.step in (Step.GPU, Step.NCCL) for f in r.findings]
    wall = wall_host(state, "status", NOW, row)
    table = {r.index: r for r in gpu_rows(state)}
    assert set(table) >= set(verdicts), "every GPU keeps its row in the host's table"
    thermal = {g.index: g for g in thermal_view(state).gpus}
    memory = {g.index: g for g in memory_growth_view(state, 3600.0, None).gpus}
    slowdown = {g.index: g.temp_slowdown_c for g in state.hello.facts.gpus} \
        if state.hello else {}
    samples = {g.index: g for g in state.last.gpus} if state.last else {}
    for pos, (idx, verdict) in enumerate(sorted(verdicts.items())):
        assert from_findings(findings, idx) in (verdict, GpuVerdict.OK) or verdict in (
            GpuVerdict.LOST, GpuVerdict.UNRESPONSIVE), (idx, verdict)
        if verdict not in (GpuVerdict.LOST, GpuVerdict.UNRESPONSIVE):
            assert from_findings(findings, idx) is verdict, (idx, verdict)
            assert from_findings(listed, idx) is verdict, (idx, "triage")
        assert wall.gpus[pos].state is verdict
        assert cell("status", wall.status, wall.gpus[pos])[0] == STATE_GLYPH[verdict] \
            or wall.status != "streaming"
        if idx in table:
            r = table[idx]
            assert r.judged.verdict is verdict
            assert GpuTable.cells(r)[1][0].split()[-1].lower() == verdict.value
            throttle_class = GpuTable.cells(r)[7][1] == "cell--throttled"
            assert throttle_class is judged[idx].throttled
        if idx in thermal:
            g = thermal[idx]
            assert g.throttled is judged[idx].throttled
            assert ("THROTTLED" in gpu_line(g).plain) is judged[idx].throttled
            assert g.temp_level is judged[idx].temp
            assert (g.gone is not None) is judged[idx].gone
            s = samples.get(idx)
            assert s is not None or g.gone == verdict.value
            if s is not None:
                assert g.temp_level is temp_level(s.temp_c, slowdown.get(idx),
                                                  state.limits.detectors)
        throttled = any(f.gpu == idx and f.code in (Code.CLOCKS_THROTTLED,
                                                    Code.THROTTLED_WHILE_BUSY)
                        for f in findings)
        assert judged[idx].throttled is throttled
        if idx in memory:
            leak = next((f for f in findings if f.gpu == idx and f.code == Code.MEMORY_LEAK),
                        None)
            assert memory[idx].leaking is (leak is not None)
            assert memory[idx].urgency is (leak.severity if leak else None)
    hottest = max((j.temp for j in row.gpus), key=lambda t: t.rank, default=TempLevel.UNKNOWN)
    assert row.temp_level is hottest
    temp = FleetTable.cells(FleetLine(row))[4]
    assert temp[1] == TEMP_CLASS.get(hottest) or row.max_temp_c is None
    return verdicts


@pytest.mark.parametrize("scenario", SIM_SCENARIOS)
def test_every_demo_scenario_agrees(scenario: str) -> None:
    verdicts = assert_agree(sim(scenario))
    assert len(verdicts) == 8


def test_the_scenarios_show_their_verdicts() -> None:
    """The test above is not vacuous: the demo's troubles reach the verdicts."""
    assert GpuVerdict.LOST in assert_agree(sim("xid79")).values()
    assert assert_agree(sim("throttle"))[5] is GpuVerdict.THROTTLED
    loose = DetectorLimits(leak_min_mib_h=100.0, leak_max_hours_to_full=1000.0)
    assert assert_agree(sim("leak", detectors=loose))[3] is GpuVerdict.LEAKING


def _with_gpu0(items: list[SessionItem], **changes: object) -> list[SessionItem]:
    """``items`` with GPU 0 of the last sample changed."""
    last = max(i for i, item in enumerate(items) if isinstance(item, HostSample))
    sample = items[last]
    assert isinstance(sample, HostSample)
    gpus = (replace(sample.gpus[0], **changes), *sample.gpus[1:])  # type: ignore[arg-type]
    return [*items[:last], replace(sample, gpus=gpus), *items[last + 1:]]


@pytest.mark.parametrize(("util", "throttled"), [(3.0, False), (97.0, True)])
def test_power_cap_counts_only_when_busy(util: float, throttled: bool) -> None:
    """An idle GPU at its power cap is not throttled on any screen; a busy one is on all."""
    items = _with_gpu0(sim_items("h", "healthy", seed=1, minutes=MINUTES),
                       clock_reasons=("sw_power_cap",), util_pct=util)
    state = fold(items)
    verdicts = assert_agree(state)
    assert (verdicts[0] is GpuVerdict.THROTTLED) is throttled
    thermal = thermal_view(state).gpus[0]
    assert thermal.reasons == ("SW power cap",) and thermal.throttled is throttled


@pytest.mark.parametrize(("minimum", "expected"), [(8.0, CoreCount.FEW), (4.0, CoreCount.OK)])
def test_cores_per_gpu_follow_preflight(minimum: float, expected: CoreCount) -> None:
    """6 cores per GPU: the host panel and preflight read the same configured minimum."""
    items = sim_items("h", "healthy", seed=1, minutes=MINUTES)
    items = [replace(i, facts=replace(i.facts, cpu_cores_physical=48))
             if isinstance(i, Hello) else i for i in items]
    limits = PreflightLimits(cores_per_gpu_min=minimum)
    state = fold(items, preflight=limits)
    view = host_view(state)
    assert view is not None and view.health is not None
    assert view.health.cores is expected and view.health.cores_per_gpu == 6.0
    assert state.hello is not None
    (check,) = [c for c in check_host(HostInput("h", state.hello, state.last), limits)
                if c.check == "cpu-cores-per-gpu"]
    assert (check.verdict is CheckVerdict.WARN) is (expected is CoreCount.FEW)


@pytest.mark.parametrize("critical_hours", [6.0, 12.0, 48.0])
def test_leak_urgency_follows_leak_critical_hours(critical_hours: float) -> None:
    """The simulated leak fills its GPU in ~29 h: critical only under a 48 h setting, on the
    finding and on the memory panel alike (the panel used to have its own 6 h)."""
    limits = DetectorLimits(leak_min_mib_h=100.0, leak_max_hours_to_full=1000.0,
                            leak_critical_hours=critical_hours)
    state = sim("leak", detectors=limits)
    (leak,) = [f for f in state.findings() if f.code == Code.MEMORY_LEAK]
    hours = leak.hours_to_full
    assert hours is not None and 12.0 < hours < 48.0
    want = Severity.CRITICAL if hours < critical_hours else Severity.WARNING
    assert leak.severity is want
    (trend,) = [g for g in memory_growth_view(state, 3600.0, None).gpus if g.leaking]
    assert trend.urgency is want
    assert_agree(state)
