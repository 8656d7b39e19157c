"""``throughput-drop``: a job's training throughput falls and stays down; tied to what changed
on the same host at the same time, and placed under that cause's triage step."""

from __future__ import annotations

import json
import subprocess
import sys

from probes.analysis.findings import Finding
from probes.analysis.limits import DetectorLimits
from probes.analysis.throughput import ThroughputTracker, find_drop, throughput_findings
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.triage import Code, Severity, Step
from probes.wire.protocol import decode_line
from tests.conftest import AGENT_SOURCE

JOB = "job:/scratch/train.log"


def _titan(step: int, tps: int) -> str:
    # torchtitan's progress line (pytorch/torchtitan PR #1287)
    return (f"[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: {step}  loss:  6.1384"
            f"  memory: 49.66GiB(52.28%)  tps: {tps:,}  tflops: 339.16  mfu: 34.29%")


def _tracker(values: list[int], every_s: float = 60.0) -> ThroughputTracker:
    tr = ThroughputTracker()
    for i, v in enumerate(values):
        tr.add(JOB, _titan(10 * (i + 1), v), 1000.0 + i * every_s)
    return tr


def test_a_sustained_fall_is_a_drop_dated_from_its_start() -> None:
    tr = _tracker([5860, 5840, 5880, 5850, 5870, 5855, 5862, 4100, 4080, 4120, 4090, 4110, 4105])
    (drop,) = tr.drops()
    assert drop.onset == 1000.0 + 7 * 60.0 and drop.readings == 6
    assert drop.baseline == 5860 and drop.now == 4102.5 and drop.unit == "tokens/s"


def test_short_or_shallow_dips_and_recoveries_are_not_drops() -> None:
    assert _tracker([5860] * 8 + [4100, 4100, 4100]).drops() == []  # 2 min: not yet 5
    assert _tracker([5860] * 8 + [5000] * 10).drops() == []  # 15 %: under the 20 % default
    assert _tracker([5860] * 8 + [4100] * 6 + [5860]).drops() == []  # recovered
    assert _tracker([5860] * 8 + [5000] * 10).drops(DetectorLimits(throughput_drop_share=0.1))


def test_a_long_drop_does_not_become_its_own_baseline() -> None:
    values = [100.0] * 20 + [60.0] * 60  # three times longer down than up
    drop = find_drop(JOB, "it/s", [i * 60.0 for i in range(80)], values)
    assert drop is not None and drop.baseline == 100.0 and drop.readings == 60


def _throttled(ts: float) -> Finding:
    return Finding(Step.GPU, Code.THROTTLED_WHILE_BUSY, Severity.WARNING,
                   "GPU5 throttled while busy", "h", gpu=5, ts=ts)


def test_the_drop_goes_under_its_cause_or_under_model_code() -> None:
    tr = _tracker([5860] * 8 + [4100] * 8)
    onset = 1000.0 + 8 * 60.0
    (alone,) = throughput_findings("h", tr, [])
    assert (alone.step, alone.code, alone.ts) == (Step.MODEL, "throughput-drop", onset)
    (tied,) = throughput_findings("h", tr, [_throttled(onset - 120.0)])
    assert (tied.step, tied.gpu, tied.extra["cause"]) == (Step.GPU, 5, "throttled-while-busy")
    assert "a GPU throttled" in tied.summary and "30% below" in tied.summary
    old = _throttled(onset - 3600.0)  # long before: not what changed at the same time
    assert throughput_findings("h", tr, [old])[0].step is Step.MODEL


def test_clocks_held_down_name_the_drop_before_a_warm_card_does() -> None:
    """The temperature warning often starts first (the card warms, then throttles): the drop
    is still put on the throttling, whichever window dated its finding earlier."""
    tr = _tracker([5860] * 8 + [4100] * 8)
    onset = 1000.0 + 8 * 60.0
    warm = Finding(Step.GPU, Code.TEMP_NEAR_SLOWDOWN, Severity.WARNING, "GPU5 at 90 °C", "h",
                   gpu=5, ts=onset - 300.0)
    (tied,) = throughput_findings("h", tr, [warm, _throttled(onset - 60.0)])
    assert tied.extra["cause"] == "throttled-while-busy"
    (alone,) = throughput_findings("h", tr, [warm])
    assert alone.extra["cause"] == "temp-near-slowdown"


def test_the_demo_throttle_scenario_raises_a_drop_tied_to_the_throttling() -> None:
    """The real agent, simulating ``train`` beside ``throttle:5``, through the console's model."""
    args = ["--simulate", "train,throttle:5", "--interval", "60", "--fast", "--count", "50",
            "--seed", "3", "--hostname=gpu-c01"]
    proc = subprocess.run([sys.executable, "-I", "-", *args], input=AGENT_SOURCE,
                          capture_output=True, check=True, timeout=120)
    fleet = FleetState([HostSpec("gpu-c01", expect_gpus=8)])
    for i, line in enumerate(proc.stdout.splitlines()):
        fleet.apply("gpu-c01", decode_line(line), now=float(i))
    host = fleet.hosts["gpu-c01"]
    found = host.findings()
    drop = next(f for f in found if f.code == "throughput-drop")
    assert drop.step is Step.GPU and drop.gpu == 5
    assert drop.extra["cause"] in ("throttled-while-busy", "clocks-throttled")
    assert drop.source == "job:/var/log/train/rank0.log" and "tps:" in (drop.evidence or "")
    assert 25.0 <= float(drop.extra["drop_pct"]) <= 40.0  # type: ignore[arg-type]
    (speed,) = host.logs.speed.speeds()  # what the host screen's Training row shows
    assert speed.dropped and speed.unit == "tokens/s" and speed.share < 0.8
    # the job's nccl-tests check ran healthy: no nccl finding
    assert not any(f.step is Step.NCCL for f in found)
    json.dumps(drop.extra)


def test_the_train_scenario_alone_is_healthy() -> None:
    args = ["--simulate", "train", "--interval", "60", "--fast", "--count", "40", "--seed", "3"]
    proc = subprocess.run([sys.executable, "-I", "-", *args], input=AGENT_SOURCE,
                          capture_output=True, check=True, timeout=120)
    fleet = FleetState([HostSpec("sim", expect_gpus=8)])
    for i, line in enumerate(proc.stdout.splitlines()):
        fleet.apply("sim", decode_line(line), now=float(i))
    assert fleet.hosts["sim"].findings() == []
    unit, points = fleet.hosts["sim"].logs.speed.series("job:/var/log/train/rank0.log")
    assert unit == "tokens/s" and len(points) == 40


def test_with_no_finding_beside_it_idle_gpus_name_the_drop_waiting_for_work() -> None:
    """A loader that cannot keep up: the GPUs' utilisation falls with the throughput."""
    from probes.history import HostHistory
    from probes.wire.samples import GpuSample, HostSample

    history = HostHistory()
    for i in range(30):
        ts = 1000.0 + i * 60.0
        util = 95.0 if i < 16 else 55.0
        history.add(HostSample(ts=ts, seq=i, gpus=tuple(
            GpuSample(index=g, util_pct=util, sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0)
            for g in range(8))))
    tr = _tracker([5860] * 16 + [4100] * 14)
    (found,) = throughput_findings("h", tr, [], history=history)
    assert found.step is Step.GPU and found.extra["cause"] == "gpu-idle"
    assert found.extra["util_fall_pct"] == 40.0 and "waited for work" in found.summary
    busy = HostHistory()
    for i in range(30):
        busy.add(HostSample(ts=1000.0 + i * 60.0, seq=i, gpus=(GpuSample(index=0, util_pct=95.0),)))
    assert throughput_findings("h", tr, [], history=busy)[0].step is Step.MODEL
