"""Triage on the demo simulator's data: onsets that hold still, one event named once, the
normal HGX layout left out, counts that agree, and times on the console's clock."""

from __future__ import annotations

import dataclasses
import itertools

from probes.analysis.findings import Finding
from probes.analysis.incident import (
    HostClock,
    TriageRecord,
    all_on_console,
    count,
    first_failure,
    propose_next,
    review,
)
from probes.config.fleet import HostSpec, demo_fleet
from probes.fleet_state import FleetState
from probes.triage import Severity, Step
from probes.wire.samples import HostSample
from tests.support.tui_fakes import SIM_STEP_S, T0, sim_items
from tui.views.triage_view import host_clocks, host_view

DEMO = [(s.name, ",".join(s.simulate)) for s in demo_fleet(speed=1.0, history_s=0)]


def demo_state(minutes: int, specs: list[tuple[str, str]] = DEMO,
               speed: float = 1.0) -> FleetState:
    """The demo's eight hosts after ``minutes`` simulated minutes, applied as they arrive."""
    fleet = FleetState([HostSpec(name=h, simulate=tuple(s.split(",")), seed=i + 1,
                                 speed=speed, expect_gpus=8)
                        for i, (h, s) in enumerate(specs)])
    streams = [[(h, it) for it in sim_items(h, s, seed=i + 1, minutes=minutes)]
               for i, (h, s) in enumerate(specs)]
    for batch in itertools.zip_longest(*streams):
        for pair in batch:
            if pair is not None:
                fleet.apply(pair[0], pair[1], getattr(pair[1], "ts", T0))
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return fleet


def findings(fleet: FleetState) -> list[Finding]:
    return [f for s in fleet.hosts.values() for f in s.findings()]


def test_a_detector_finding_keeps_its_onset_while_it_stays_true() -> None:
    # the leak detector fits the last hour: its window start moves every run, its onset not
    specs = [("gpu-a02", "leak:3"), ("gpu-a03", "throttle:5")]
    items = {h: sim_items(h, s, seed=i + 1, minutes=110) for i, (h, s) in enumerate(specs)}
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h, _ in specs])
    seen: dict[str, list[float]] = {"memory-leak": [], "throttled-while-busy": []}
    for h, stream in items.items():
        for item in stream:
            fleet.apply(h, item, T0)
            if isinstance(item, HostSample) and item.seq in (45, 75, 105):
                for f in fleet.hosts[h].findings():
                    if f.code in seen:
                        assert f.ts is not None
                        seen[f.code].append(f.ts)
    leak, hot = seen["memory-leak"], seen["throttled-while-busy"]
    assert len(leak) == 3 and len(set(leak)) == 1, leak
    assert len(hot) == 3 and len(set(hot)) == 1, hot
    # the growth began with the data (the scenario leaks from its first minute)
    assert leak[0] < T0 + 60.0
    # and the leak window (1 h) has slid past it by the last look
    assert leak[0] < T0 + 105 * SIM_STEP_S - 3600.0


def test_the_demo_incident_is_one_event_with_one_action() -> None:
    found = findings(demo_state(45))
    first = first_failure(found)
    assert first is not None and first.is_failure
    assert first.finding.xid == 79 and first.finding.host == "gpu-b02"
    assert {f.code for f in first.same_event} == {"gpu-dropout", "gpu-lost",
                                                 "gpu-fallen-off-bus"}
    # gpu-b03's watchdog is another job's: never a consequence of gpu-b02's Xid
    assert first.consequences == ()
    line = f"First failure: {first.headline}"
    assert line.endswith("Xid 79 on gpu-b02 GPU6; also NCCL timeout on gpu-b03")
    assert line.count("gpu-b02") == 1 and "lost" not in line and "dropout" not in line
    do = f"Do now: {first.do_now}"
    assert do == "Do now: drain gpu-b02, reboot it; RMA GPU6 if it recurs"
    # the banner's two lines fit 80 columns (78 inside its padding)
    assert len(line) <= 78 and len(do) <= 78


def test_the_normal_hgx_layout_is_no_finding_and_counts_agree() -> None:
    fleet = demo_state(45)
    found = findings(fleet)
    assert not [f for f in found if f.code == "topology-cross-numa"]
    assert not [f for f in found if f.severity is Severity.INFO]
    steps = review(found, [host_view(s) for s in fleet.hosts.values()], TriageRecord())
    gpu = steps[0]
    assert "topology (each GPU has a local NIC on 8 of 8 hosts)" in gpu.checked[0]
    assert gpu.checked[0].startswith("63 of 64 GPUs answer on 8 of 8 hosts")
    n = count(gpu)
    # gpu-a03's throughput-drop sits with its throttling GPU (issue 23's demo), and
    # gpu-b01's data starvation beside its saturated disk
    assert (n.total, n.at_worst, n.text) == (10, 2, "10 (2 crit)")
    assert any(f.code == "throughput-drop" and f.host == "gpu-a03" for f in gpu.findings)
    step, why = propose_next(steps)
    assert step is Step.GPU and why.startswith("GPU state: 10 findings, 2 critical (worst: ")


def test_a_job_log_finding_means_job_logs_are_followed() -> None:
    fleet = demo_state(45)
    found = findings(fleet)
    steps = review(found, [host_view(s) for s in fleet.hosts.values()], TriageRecord())
    nccl = steps[2]
    assert any(f.source and f.source.startswith("job:") for f in nccl.findings)
    # gpu-b03's (the NCCL timeout) and gpu-a03's (the training job)
    assert nccl.checked[0].startswith("job logs on 2 of 8 hosts")
    assert not any("no job logs" in c for r in steps for c in r.checked)


def test_a_fast_simulated_clock_is_shown_on_the_console_clock() -> None:
    # the demo runs ×60: 45 agent minutes after its hello are 45 console seconds
    fleet = demo_state(45, speed=60.0)
    now = T0 + 45 * SIM_STEP_S / 60.0 + 1.0
    clocks = host_clocks(list(fleet.hosts.values()), now)
    assert clocks["gpu-b02"] == HostClock(T0, 60.0)
    # replayed, the console's clock is the recording's: nothing to map
    assert host_clocks(list(fleet.hosts.values()), T0 + 45 * SIM_STEP_S) == {}
    shown = all_on_console(findings(fleet), clocks)
    assert max(f.ts for f in shown if f.ts is not None) <= now
    first = first_failure(findings(fleet), clocks=clocks)
    assert first is not None and first.finding.ts == T0 + 10.0  # the Xid at agent 600 s
    assert first.headline.startswith("22:13:30 Xid 79 on gpu-b02 GPU6")
    # the judgement is still made on agent time: the watchdog of gpu-b03's job, whose hang
    # began at agent 900 s (console 15 s), is named after it as a separate incident
    assert first.consequences == () and [f.code for f in first.others] == ["nccl-timeout"]


def test_a_real_hosts_time_is_left_alone() -> None:
    assert HostClock(T0).console(T0 + 600.0) == T0 + 600.0
    assert HostClock(T0, 60.0).console(T0 - 600.0) == T0 - 600.0  # its backlog is history
    f = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "gone", "real", gpu=1, ts=T0 + 5)
    assert all_on_console([f], {"sim": HostClock(T0, 60.0)}) == [f]
    assert dataclasses.replace(f, host="sim") != all_on_console(
        [dataclasses.replace(f, host="sim")], {"sim": HostClock(T0, 60.0)})[0]
