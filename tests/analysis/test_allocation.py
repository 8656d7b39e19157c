"""Allocation against use (issue #21 item 5): a job's GPUs idle for half an hour, and GPU
processes outside any job on a Slurm node."""

from __future__ import annotations

from dataclasses import replace

from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.triage import Code
from probes.wire.events import Connected
from probes.wire.samples import GpuProcess, HostSample
from tests.support.tui_fakes import T0, hello, sample

STEP_S = 10.0


def _tick(step: int, jobs: dict[int, str | None], util: dict[int, float],
          extra: dict[int, GpuProcess] | None = None) -> HostSample:
    s = sample("n1", 0)
    gpus = []
    for g in s.gpus:
        procs = []
        if g.index in jobs:
            procs.append(GpuProcess(50000 + g.index, "python", "alice", 30000.0,
                                    slurm_job=jobs[g.index], rank=g.index, environ=True))
        if extra and g.index in extra:
            procs.append(extra[g.index])
        gpus.append(replace(g, util_pct=util.get(g.index, g.util_pct), processes=tuple(procs)))
    return replace(s, ts=T0 + step * STEP_S, seq=step, gpus=tuple(gpus))


def _run(ticks: list[HostSample], limits: DetectorLimits | None = None) -> FleetState:
    fleet = FleetState([HostSpec(name="n1")], limits)
    fleet.apply("n1", Connected(T0), T0)
    fleet.apply("n1", hello("n1"), T0)
    for s in ticks:
        fleet.apply("n1", s, s.ts)
    return fleet


def _codes(fleet: FleetState, code: Code) -> list:  # type: ignore[type-arg]
    return [f for f in fleet.hosts["n1"].findings() if f.code == code]


def test_a_job_holding_gpus_at_zero_for_half_an_hour_is_reported_once_per_job() -> None:
    jobs = {i: "48211" for i in range(8)}
    idle = {0: 0.0, 1: 0.0, 2: 0.4}  # GPUs 0-2 idle, the rest busy (the fake's 90 %+)
    fleet = _run([_tick(n, jobs, idle) for n in range(200)])  # 33 min
    found = _codes(fleet, Code.GPU_ALLOCATED_IDLE)
    assert len(found) == 1, found
    f = found[0]
    assert f.extra["job"] == "48211" and f.extra["gpus"] == [0, 1, 2]
    assert "job 48211 holds GPUs 0,1,2 at ~0% utilisation" in f.summary


def test_the_idle_clock_starts_when_the_job_took_the_gpu() -> None:
    # the card idled 30 min with no job, then a job took it 10 min ago: not the job's fault
    ticks = [_tick(n, {}, {0: 0.0}) for n in range(180)]
    ticks += [_tick(n, {0: "48211"}, {0: 0.0}) for n in range(180, 240)]
    assert _codes(_run(ticks), Code.GPU_ALLOCATED_IDLE) == []
    # a new job on the same GPU restarts the clock, too
    ticks = [_tick(n, {0: "1"}, {0: 0.0}) for n in range(180)]
    ticks += [_tick(n, {0: "2"}, {0: 0.0}) for n in range(180, 200)]
    assert _codes(_run(ticks), Code.GPU_ALLOCATED_IDLE) == []


def test_one_busy_burst_in_the_window_is_not_idle_and_the_limits_are_the_operators() -> None:
    jobs = {0: "7"}
    ticks = [_tick(n, jobs, {0: 55.0 if n == 150 else 0.0}) for n in range(200)]
    assert _codes(_run(ticks), Code.GPU_ALLOCATED_IDLE) == []
    short = DetectorLimits(alloc_idle_s=300.0)
    ticks = [_tick(n, jobs, {0: 0.0}) for n in range(40)]
    assert len(_codes(_run(ticks, short), Code.GPU_ALLOCATED_IDLE)) == 1


def _stray(environ: bool | None, **kw: object) -> GpuProcess:
    return GpuProcess(777, "python3", "bob", 12000.0, environ=environ, **kw)  # type: ignore[arg-type]


def test_a_process_outside_any_job_on_a_slurm_node_is_a_stray() -> None:
    jobs = {i: "48211" for i in range(4)}
    fleet = _run([_tick(0, jobs, {}, {5: _stray(True)})])
    (f,) = _codes(fleet, Code.GPU_STRAY_PROCESS)
    assert f.gpu == 5 and "python3 (pid 777, bob) holds 12,000 MiB outside any Slurm job" in \
        f.summary


def test_what_is_not_a_stray() -> None:
    jobs = {i: "48211" for i in range(4)}
    for other in (_stray(False),  # environment unreadable: unknown, not stray
                  _stray(None),
                  _stray(True, container="3f1c2a9d8e7b", runtime="docker"),
                  _stray(True, pod="0a1b2c3d-0000-4000-8000-000000000000"),
                  GpuProcess(778, "nvidia-smi", "root", 100.0, environ=True)):  # tiny
        assert _codes(_run([_tick(0, jobs, {}, {5: other})]), Code.GPU_STRAY_PROCESS) == [], other
    # no Slurm job on the node at all: a plain workstation's processes are nobody's strays
    assert _codes(_run([_tick(0, {}, {}, {5: _stray(True)})]), Code.GPU_STRAY_PROCESS) == []
