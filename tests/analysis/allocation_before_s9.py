"""``probes/analysis/allocation.py`` as on main at session 9's start (``12ea918``), copied
unchanged: the reference of ``test_fold_age`` and ``bench_fold_age.py``.  Not imported by the
console."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from probes.analysis.detectors.window import cols
from probes.analysis.findings import Finding
from probes.analysis.limits import DetectorLimits
from probes.analysis.tick_gpus import tick_gpus
from probes.history import HostHistory, gpu_key
from probes.triage import Code, Severity, Step
from probes.wire.compact import StaticEpoch, static_gpus
from probes.wire.samples import GpuProcess, HostSample

IDLE_CHECK_EVERY_S = 60.0
ACTION_IDLE = ("Ask the job's owner whether it is hung or waiting (py-spy dump on a rank, "
               "scontrol show job); release the GPUs if it is not working")
ACTION_STRAY = ("Find who started it (ps -o user,lstart,cmd -p PID); stop it or move it "
                "under Slurm before the next job on this node runs out of GPU memory")


def job_of(p: GpuProcess) -> str | None:
    return p.slurm_job


class HoldTracker:
    """Since when (agent time) each GPU has been held by the job it is held by now."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[str, float]] = {}
        self.checked_at = float("-inf")
        """Agent time of the last idle check (the window is read once a minute, not per tick)."""
        self.idle: list[Finding] = []
        self._epoch: object = None
        """The static facts of the sample last read (``static_epoch``): held strongly."""

    def update(self, sample: HostSample) -> None:
        # A v2 tick of the same static facts lists the same GPUs and processes' jobs (only
        # their memory moves): nothing to read again (issue 38, judge only what changed).
        epoch = sample.static_epoch
        if epoch is not None and epoch is self._epoch:
            return
        self._epoch = epoch
        held: dict[int, tuple[str, float]] = {}
        for g in static_gpus(sample):  # indices and jobs are static: the epoch's, if any
            jobs = sorted({j for p in g.processes or () if (j := job_of(p)) is not None})
            if not jobs:
                continue
            job = jobs[0]
            kept = self._held.get(g.index)
            held[g.index] = kept if kept is not None and kept[0] == job else (job, sample.ts)
        self._held = held

    @property
    def held(self) -> Mapping[int, tuple[str, float]]:
        """GPU index → (job, held since)."""
        return self._held


def idle_allocation_findings(host: str, history: HostHistory, sample: HostSample,
                             holds: HoldTracker, limits: DetectorLimits) -> list[Finding]:
    """A finding per job whose GPUs here stayed at ≈0 % for ``alloc_idle_s`` since it took
    them (the busiest 15 s bucket at or below ``alloc_idle_util_pct``)."""
    if sample.ts - holds.checked_at < IDLE_CHECK_EVERY_S and sample.ts >= holds.checked_at:
        return [f for f in holds.idle if f.details.job in
                {job for job, _ in holds.held.values()}]
    holds.checked_at = sample.ts
    holds.idle = _idle(host, history, sample, holds, limits)
    return list(holds.idle)


def _idle(host: str, history: HostHistory, sample: HostSample, holds: HoldTracker,
          limits: DetectorLimits) -> list[Finding]:
    window = limits.alloc_idle_s
    idle_by_job: dict[str, list[tuple[int, float]]] = {}
    for idx, (job, since) in holds.held.items():
        if sample.ts - since < window:
            continue
        c = cols(history.series(gpu_key(idx, "util_pct")), sample.ts - window)
        if c is None or c.t[0] - (sample.ts - window) > 60.0:
            continue  # the window is not covered: no verdict
        if max(c.hi) <= limits.alloc_idle_util_pct:
            idle_by_job.setdefault(job, []).append((idx, since))
    out = []
    for job, gpus in sorted(idle_by_job.items()):
        indices = sorted(i for i, _ in gpus)
        since = min(s for _, s in gpus)
        minutes = (sample.ts - since) / 60.0
        which = (f"GPU{indices[0]}" if len(indices) == 1
                 else "GPUs " + ",".join(str(i) for i in indices))
        out.append(Finding(
            Step.GPU, Code.GPU_ALLOCATED_IDLE, Severity.WARNING,
            f"job {job} holds {which} at ~0% utilisation for {minutes:.0f} min",
            host, gpu=indices[0] if len(indices) == 1 else None, ts=since, action=ACTION_IDLE,
            extra={"job": job, "gpus": indices, "idle_s": round(sample.ts - since)}))
    return out


def stray_process_findings(host: str, sample: HostSample,
                           limits: DetectorLimits) -> list[Finding]:
    """GPU processes outside any job, container or pod on a node whose other GPU processes
    run under Slurm, holding at least ``stray_min_mib``."""
    places = _strays_of(sample)
    if not places:
        return []
    _, gpus, rows = tick_gpus(sample)
    out = []
    for i, k in places:
        idx, p = gpus[i].index, (gpus[i].processes or ())[k]
        # a row's process lists only its static half: its memory is the row's
        used = p.used_mib if rows is None else (rows[i].processes or ())[k]
        if (used or 0.0) < limits.stray_min_mib:
            continue
        who = " ".join(x for x in (p.name, f"(pid {p.pid}" + (f", {p.user})" if p.user else ")"))
                       if x)
        out.append(Finding(
            Step.GPU, Code.GPU_STRAY_PROCESS, Severity.WARNING,
            f"GPU{idx}: {who} holds {used:,.0f} MiB outside any Slurm job",
            host, gpu=idx, ts=sample.ts, action=ACTION_STRAY,
            extra={"pid": p.pid, "user": p.user, "used_mib": used}))
    return out


def _strays_of(sample: HostSample) -> tuple[tuple[int, int], ...]:
    """``_may_stray``, read once per static epoch on a v2 stream: who may be a stray is
    static (the processes' static half), only their memory moves (issue 38)."""
    epoch = sample.static_epoch
    if not isinstance(epoch, StaticEpoch):
        return _may_stray(sample)
    if epoch.strays is None:
        epoch.strays = _may_stray(sample)
    return cast(tuple[tuple[int, int], ...], epoch.strays)


def _may_stray(sample: HostSample) -> tuple[tuple[int, int], ...]:
    """(GPU position, process position) of each process that would be a stray whatever its
    memory: on a node whose other GPU processes run under Slurm, its environment read and
    naming no job, container or pod."""
    places = [(i, k, p) for i, g in enumerate(static_gpus(sample))
              for k, p in enumerate(g.processes or ())]
    if not any(job_of(p) is not None for _, _, p in places):
        return ()  # not (now) a Slurm node: every process is "outside Slurm"
    return tuple((i, k) for i, k, p in places
                 if p.environ is True and job_of(p) is None and not p.container and not p.pod)
