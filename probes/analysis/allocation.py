"""Allocation against use: GPUs a job holds but does not use, and GPU processes no job owns.

Both cost a site money and jobs their memory: a job that reserved eight GPUs and computes on
none of them for half an hour (a hung rank, a debugger, a notebook left open), and a process
outside the scheduler on a Slurm node holding memory the next job will need (its OOM).

"Holds" comes from the agent's attribution of each GPU process (cgroup or environment); the
idle clock starts when the GPU's current job was first seen on it, never earlier, so a job
that just started loading is not blamed for the card's idle hour before it.  A process is a
stray only when its environment was readable and named no job, no container and no pod: an
unreadable environment is "unknown", never "stray".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from probes.analysis.detectors.window import cols, points_many
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
        self.idle_held: object = None
        """``held`` as ``idle`` was judged from (the same object: no GPU changed hands)."""
        self.quiet: set[int] = set()
        """The GPUs the last check proved quiet (``_surely_quiet``): read that way first."""
        self.epoch: object = None
        """The static facts of the sample last read (``static_epoch``): held strongly (read
        by ``HostState.apply_sample``, which skips ``update`` while they are a tick's)."""

    def update(self, sample: HostSample) -> None:
        # A v2 tick of the same static facts lists the same GPUs and processes' jobs (only
        # their memory moves): nothing to read again (issue 38, judge only what changed).
        epoch = sample.static_epoch
        if epoch is not None and epoch is self.epoch:
            return
        self.epoch = epoch
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
        if holds.idle_held is holds.held or not holds.idle:
            return list(holds.idle)  # every job they name still holds its GPUs here
        return [f for f in holds.idle if f.details.job in
                {job for job, _ in holds.held.values()}]
    holds.checked_at = sample.ts
    holds.idle = _idle(host, history, sample, holds, limits)
    holds.idle_held = holds.held
    return list(holds.idle)


def _idle(host: str, history: HostHistory, sample: HostSample, holds: HoldTracker,
          limits: DetectorLimits) -> list[Finding]:
    window = limits.alloc_idle_s
    idle_by_job: dict[str, list[tuple[int, float]]] = {}
    due = [(idx, job, since) for idx, (job, since) in holds.held.items()
           if sample.ts - since >= window]
    pct = limits.alloc_idle_util_pct
    # Either proof is sound, so the order is free: a GPU quiet at the last check is most
    # likely quiet now (an idle allocation's GPUs: the busy read would be wasted on them).
    was = [idx for idx, _, _ in due if idx in holds.quiet]
    quiet = _surely_quiet(history, was, sample.ts, window, pct)
    busy = _surely_busy(history, [idx for idx, _, _ in due if idx not in quiet], sample.ts,
                        window, pct)
    quiet |= _surely_quiet(history, [idx for idx, _, _ in due
                                     if idx not in busy and idx not in holds.quiet],
                           sample.ts, window, pct)
    holds.quiet = quiet
    for idx, job, since in due:
        if idx in busy:
            continue  # a sample of the window's end proves it busy: no verdict to read
        if idx in quiet:  # no point of the window over the line: covered is idle
            series = history.series(gpu_key(idx, "util_pct"))
            start = sample.ts - window  # the window's read up to its first minute
            head = series.columns(start, start + COVER_S) if series is not None else None
            if head is not None and head.t and head.t[0] - start <= COVER_S:
                idle_by_job.setdefault(job, []).append((idx, since))
            continue
        c = cols(history.series(gpu_key(idx, "util_pct")), sample.ts - window)
        if c is None or c.t[0] - (sample.ts - window) > COVER_S:
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


RECENT_S = 60.0
"""How much of an idle window's end ``_surely_busy`` reads (raw samples, most often)."""


def _surely_busy(history: HostHistory, gpus: list[int], now: float, window: float,
                 pct: float) -> set[int]:
    """The GPUs whose window ``[now - window, now]`` surely holds a point over ``pct``
    (so ``_idle`` finds them not idle), read from its last minute only.

    The window's read (every 15 s bucket and raw sample since its start, ~960 points a GPU
    read whole once a minute: issue 38, session 9) holds every sample of its last minute in
    some point whose high is at least that sample's (a bucket's high is its samples' max; the
    tiers' buckets start on multiples of their length, so a sample a coarsest bucket after
    the window's start lies in a bucket that starts inside it).  The margin covers the two
    codecs a value may pass (0.5 % steps in the bucket tiers, half precision raw).
    """
    lead = max(t.resolution_s for t in history.tiers)
    lo = max(now - RECENT_S, now - window + lead)
    if lo > now or not gpus:
        return set()
    over = pct + 0.5 + 2e-3 * abs(pct)
    recent = points_many(history, [gpu_key(i, "util_pct") for i in gpus], lo)
    return {i for i, c in zip(gpus, recent, strict=True)
            if c is not None and max(c.hi) > over}


COVER_S = 60.0
"""An idle window is covered when its first point is at most this after its start."""
COARSE_BINS = 8
"""Bins asked of ``_surely_quiet``'s coarse read (1 or 5 min buckets, a few dozen)."""


def _surely_quiet(history: HostHistory, gpus: list[int], now: float, window: float,
                  pct: float) -> set[int]:
    """The GPUs whose window surely holds no point over ``pct``, from a coarse read.

    Every point of the window's read holds samples some coarse bucket of a read that starts
    a coarsest bucket earlier holds too, so its high is at most that bucket's, give or take
    the codecs' rounding (0.5 % steps: 0.25 each way).  The GPUs of an idle allocation are
    read this way once a minute instead of ~960 points each (whether the window is covered
    is then read from its first minute: ``_idle``).
    """
    if not gpus:
        return set()
    lead = max(t.resolution_s for t in history.tiers)
    coarse = points_many(history, [gpu_key(i, "util_pct") for i in gpus], now - window - lead,
                         COARSE_BINS)
    out = set()
    for i, c in zip(gpus, coarse, strict=True):
        if c is None:
            continue
        top = max(c.hi)
        if top == top and top + 0.5 + 2e-3 * abs(top) <= pct:
            out.add(i)
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
