"""Preflight judges the host as it is now: a GPU lost since the hello, a GPU in thermal
slowdown and a Fabric Manager that does not match the driver fail; the demo's troubles show
through ``rigwatch preflight --demo`` itself, within seconds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from probes.analysis.limits import DetectorLimits
from probes.analysis.preflight import CheckResult, CheckVerdict, HostInput, check_host
from probes.config.fleet import HostSpec, demo_fleet
from probes.outputs.fold_once import fold_once
from probes.transport.session import OnceResult, collect_once, lived
from probes.wire.samples import GpuState, HostSample
from tests.conftest import REPO

P, W, F, S = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL, CheckVerdict.SKIP


def _checks(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


@pytest.fixture(scope="module")
def healthy() -> OnceResult:
    r = asyncio.run(collect_once(HostSpec(name="h1", simulate=("healthy",), seed=1)))
    assert r.hello is not None and r.sample is not None, r.failure
    return r


def _inp(r: OnceResult, sample: HostSample | None = None, **kw: object) -> HostInput:
    return HostInput(r.spec.name, r.hello, sample or r.sample, expect_gpus=8,
                     **kw)  # type: ignore[arg-type]


def _without(sample: HostSample, index: int) -> HostSample:
    return replace(sample, gpus=tuple(g for g in sample.gpus if g.index != index))


def _gpu(sample: HostSample, index: int, **kw: object) -> HostSample:
    return replace(sample, gpus=tuple(replace(g, **kw) if g.index == index else g  # type: ignore[arg-type]
                                      for g in sample.gpus))


# --- the command, end to end -----------------------------------------------------------------

def test_preflight_demo_json_fails_the_lost_gpu_and_the_hot_gpu_within_seconds() -> None:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "preflight", "--demo", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    assert took < 10.0
    doc = json.loads(proc.stdout)
    hosts = {h["name"]: {c["check"]: c for c in h["checks"]} for h in doc["hosts"]}
    verdicts = {h["name"]: h["verdict"] for h in doc["hosts"]}
    # gpu-b02: Xid 79 took GPU 6 off the bus 600 s into its run; its hello still lists 8
    count = hosts["gpu-b02"]["gpu-count"]
    assert (count["verdict"], count["value"]) == ("fail", 7)
    assert count["detail"].startswith("GPU6 LOST (0000:ba:00.0): 7 of 8 GPUs answer now")
    assert verdicts["gpu-b02"] == "fail"
    # gpu-a03: GPU 5 at its slowdown temperature, clocks held down by the thermal slowdown
    temp, throttle = hosts["gpu-a03"]["gpu-temperature"], hosts["gpu-a03"]["gpu-throttle"]
    assert temp["verdict"] == "fail" and temp["value"][0].startswith("GPU5 ")
    assert throttle["verdict"] == "fail"
    assert throttle["value"] == ["GPU5 sw_thermal_slowdown, hw_thermal_slowdown"]
    assert verdicts["gpu-a03"] == "fail"
    # a healthy host's GPUs pass the same checks
    for check in ("gpu-count", "gpu-temperature", "gpu-throttle"):
        assert hosts["gpu-a01"][check]["verdict"] == "pass", hosts["gpu-a01"][check]
    # the other failures are the ones the demo was built to show
    beyond_fm = {name for name, checks in hosts.items()
                 if any(c["verdict"] == "fail" for k, c in checks.items()
                        if k != "fabric-manager")}
    assert beyond_fm == {"gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02", "gpu-b04"}
    # Fabric Manager fails exactly where its version is not the driver's
    for name, checks in hosts.items():
        fm, driver = checks["fabric-manager"], checks["software"]["value"]["driver"]
        assert fm["verdict"] == ("pass" if fm["value"] == driver else "fail"), name


def test_a_simulated_host_is_collected_after_its_history_and_a_real_one_once() -> None:
    b02 = next(s for s in demo_fleet() if s.name == "gpu-b02")
    run = lived(b02)
    assert run is not None and run.extra_args[-3:] == ("--count", "1", "--fast")
    assert lived(HostSpec(name="real")) is None
    assert lived(HostSpec(name="sim", simulate=("healthy",))) is None  # no history to live
    r = asyncio.run(collect_once(b02, to_now=True))
    assert r.failure is None and r.hello is not None and r.sample is not None
    assert len(r.hello.facts.gpus) == 8
    assert sorted(g.index for g in r.sample.gpus) == [0, 1, 2, 3, 4, 5, 7]
    assert {(f.code, f.gpu) for f in fold_once([r]).all_findings()} >= {("gpu-lost", 6), ("xid", 6)}


def test_a_host_that_cannot_start_is_a_failure_not_a_hang() -> None:
    spec = replace(demo_fleet()[0], python="/nonexistent/python3")
    start = time.monotonic()
    r = asyncio.run(collect_once(spec, timeout_s=15.0, to_now=True))
    assert time.monotonic() - start < 15.0
    assert r.hello is None and r.failure
    (check,) = check_host(HostInput(spec.name, None, failure=r.failure))
    assert (check.check, check.verdict) == ("reachable", F)


# --- GPU count against the hello, expect_gpus and the newest sample --------------------------

def test_a_gpu_missing_from_the_newest_sample_fails_though_the_hello_lists_it(
        healthy: OnceResult) -> None:
    assert healthy.sample is not None
    c = _checks(check_host(_inp(healthy, _without(healthy.sample, 6))))["gpu-count"]
    assert (c.verdict, c.value) == (F, 7)
    assert c.detail.startswith("GPU6 LOST (")
    # without expect_gpus, the hello's list is what is owed
    bare = replace(_inp(healthy, _without(healthy.sample, 6)), expect_gpus=None)
    assert _checks(check_host(bare))["gpu-count"].verdict is F
    assert _checks(check_host(_inp(healthy)))["gpu-count"].verdict is P


def test_lost_and_unresponsive_states_in_the_sample_fail(healthy: OnceResult) -> None:
    assert healthy.sample is not None
    for state, word in ((GpuState.LOST, "LOST"), (GpuState.UNRESPONSIVE, "UNRESPONSIVE")):
        c = _checks(check_host(_inp(healthy, _gpu(healthy.sample, 2, state=state))))
        assert c["gpu-count"].verdict is F and f"GPU2 {word}" in c["gpu-count"].detail


def test_expect_gpus_still_counts_and_no_sample_falls_back_to_the_hello(
        healthy: OnceResult) -> None:
    c = _checks(check_host(replace(_inp(healthy), expect_gpus=4)))["gpu-count"]
    assert c.verdict is F and c.detail == "8 GPUs answer now, 4 expected"
    early = _checks(check_host(HostInput("h1", healthy.hello, None, expect_gpus=8)))
    assert early["gpu-count"].verdict is P and "no sample yet" in early["gpu-count"].detail
    assert early["gpu-temperature"].verdict is S and early["gpu-throttle"].verdict is S


# --- temperature and throttling, judged by judge.py under the operator's limits --------------

def test_a_gpu_at_its_slowdown_fails_and_a_warm_one_warns(healthy: OnceResult) -> None:
    assert healthy.sample is not None
    hot = _checks(check_host(_inp(healthy, _gpu(healthy.sample, 5, temp_c=91.0))))
    assert hot["gpu-temperature"].verdict is F
    assert hot["gpu-temperature"].value == ["GPU5 91 °C (slowdown 90 °C)"]
    warm = _checks(check_host(_inp(healthy, _gpu(healthy.sample, 3, temp_c=80.0))))
    assert warm["gpu-temperature"].verdict is W
    assert _checks(check_host(_inp(healthy)))["gpu-temperature"].verdict is P


def test_the_operators_temperature_margins_are_the_ones_used(healthy: OnceResult) -> None:
    strict = DetectorLimits(temp_margin_c=30.0, temp_warm_margin_c=40.0)
    c = _checks(check_host(_inp(healthy), detectors=strict))["gpu-temperature"]
    assert c.verdict is F  # ~65 °C is within 30 °C of a 90 °C slowdown
    assert "30 °C or more below" in c.threshold


def test_thermal_slowdown_fails_and_the_power_cap_while_busy_warns(healthy: OnceResult) -> None:
    assert healthy.sample is not None
    held = _gpu(healthy.sample, 5, clock_reasons=("hw_thermal_slowdown",))
    c = _checks(check_host(_inp(healthy, held)))["gpu-throttle"]
    assert c.verdict is F and c.value == ["GPU5 hw_thermal_slowdown"]
    capped = _gpu(healthy.sample, 1, clock_reasons=("sw_power_cap",), util_pct=99.0)
    c = _checks(check_host(_inp(healthy, capped)))["gpu-throttle"]
    assert c.verdict is W and "at the power cap while busy: GPU1" in c.detail
    idle = _gpu(healthy.sample, 1, clock_reasons=("sw_power_cap", "gpu_idle"), util_pct=0.0)
    assert _checks(check_host(_inp(healthy, idle)))["gpu-throttle"].verdict is P


# --- Fabric Manager against the driver -------------------------------------------------------

def _fm(r: OnceResult, fm: str | None, topo: str | None = "keep") -> HostInput:
    assert r.hello is not None
    facts = r.hello.facts
    hello = replace(r.hello, facts=replace(facts, software=replace(facts.software,
                                                                   fabric_manager=fm)))
    if topo != "keep":
        hello = replace(hello, topo_text=topo)
    return HostInput("h1", hello, r.sample, expect_gpus=8)


def test_fabric_manager_must_be_the_drivers_exact_version(healthy: OnceResult) -> None:
    assert healthy.hello is not None
    driver = healthy.hello.facts.driver_version
    assert driver is not None
    same = _checks(check_host(_fm(healthy, driver)))["fabric-manager"]
    assert (same.verdict, same.value) == (P, driver)
    other = _checks(check_host(_fm(healthy, "550.54.15" if driver != "550.54.15"
                                   else "550.90.07")))["fabric-manager"]
    assert other.verdict is F and other.detail.startswith(f"{other.value} ≠ driver {driver}: ")


def test_an_nvswitch_board_without_fabric_manager_warns(healthy: OnceResult) -> None:
    # the simulated HGX H100: every GPU pair on NV18
    assert healthy.hello is not None and "NV18" in (healthy.hello.topo_text or "")
    assert _checks(check_host(_fm(healthy, None)))["fabric-manager"].verdict is W
    assert _checks(check_host(_fm(healthy, None, topo=None)))["fabric-manager"].verdict is S


def test_a_host_down_now_fails_reachable_even_with_an_earlier_answer(
        healthy: OnceResult) -> None:
    results = check_host(_inp(healthy, failure="connection lost: EOF"))
    first = results[0]
    assert (first.check, first.verdict) == ("reachable", F)
    assert first.detail.startswith("not answering now (connection lost: EOF)")
    assert _checks(results)["gpu-count"].verdict is P  # its last answer, still shown
    assert "reachable" not in _checks(check_host(_inp(healthy)))


async def test_the_console_screen_reads_a_stale_or_down_host_as_not_answering() -> None:
    from probes.fleet_state import FleetState, HostStatus
    from tests.support.tui_fakes import sim_items
    from tui.views.preflight_view import host_input

    fleet = FleetState([HostSpec(name="gpu-b02", expect_gpus=8)])
    for item in sim_items("gpu-b02", "xid79:6@600", seed=1, minutes=15):
        fleet.apply("gpu-b02", item, 0.0)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    state = fleet.hosts["gpu-b02"]
    inp = host_input(state)
    assert inp.failure is None and inp.findings  # the lost GPU's finding travels with it
    count = _checks(check_host(inp))["gpu-count"]
    assert count.verdict is F and count.detail.startswith("GPU6 LOST")
    state.reach.status = HostStatus.STALE
    assert host_input(state).failure == "stale"
    state.reach.status, state.reach.down_reason = HostStatus.UNREACHABLE, "connect timed out"
    assert host_input(state).failure == "connect timed out"
