"""A Slurm job as the console sees it: each rank's host and GPU with the core's verdict, and
the job's findings, first failure first.

The rows come from the same places as everywhere else: the GPU processes the agents
attribute to the job (the GPU each is listed under), the ranks the job's log placed, the
hosts' GPU verdicts (``judge_gpus``) and the fleet's findings placed on ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.analysis.domains import Domain, domains_of, hosts_of
from probes.analysis.findings import Finding
from probes.analysis.incident import FirstFailure
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.fleet_state import FleetState, HostState
from probes.wire.events import JobChange
from tui.views.host_views import gpu_rows
from widgets.gpu_table import GpuRow
from widgets.job_table import JobLine


@dataclass(frozen=True)
class JobPicture:
    """Everything the job screen shows."""

    job: str
    lines: tuple[JobLine, ...]
    hosts: tuple[str, ...]
    findings: tuple[Finding, ...]
    """The job's own findings (its log's) and those of the GPUs it holds, worst first."""
    first: FirstFailure | None
    ranks: int | None = None
    """How many ranks the job has, where NCCL or the processes said it."""
    state: JobChange | None = None
    """What Slurm last said of the job (followed jobs only)."""


def _gpu_row(rows: dict[tuple[str, int], GpuRow], state: HostState, gpu: int) -> GpuRow | None:
    key = (state.name, gpu)
    if key not in rows:
        rows.update({(state.name, r.index): r for r in gpu_rows(state)})
    return rows.get(key)


def job_picture(fleet: FleetState, job: str, watch: JobWatch = NO_JOB) -> JobPicture:
    """The job's ranks on hosts and GPUs with their verdicts, and its findings."""
    rows: dict[tuple[str, int], GpuRow] = {}
    lines: list[JobLine] = []
    seen: set[tuple[str, int]] = set()
    for state in fleet.hosts.values():
        for g in state.last.gpus if state.last is not None else ():
            ranks = sorted({p.rank for p in g.processes or ()
                            if p.slurm_job == job and p.rank is not None})
            if not any(p.slurm_job == job for p in g.processes or ()):
                continue
            row = _gpu_row(rows, state, g.index)
            if row is not None:
                lines.append(JobLine(ranks[0] if ranks else None, state.name, row))
                seen.add((state.name, g.index))
    index = fleet.rank_index(watch)
    for place in index.ranks_of(job):
        placed_on = fleet.hosts.get(place.host)
        if place.witness != "log" or (place.gpu is not None
                                      and (place.host, place.gpu) in seen):
            continue
        row = _gpu_row(rows, placed_on, place.gpu) \
            if placed_on is not None and place.gpu is not None else None
        if row is not None:
            lines.append(JobLine(place.rank, place.host, row))
            seen.add((place.host, row.index))
        elif all(x.rank != place.rank for x in lines):
            lines.append(JobLine(place.rank, place.host, None, _unplaced_note(place)))
    # a GPU that fell off a node of the job took its rank's process with it: it is still
    # the job's trouble, listed without a rank
    for host in dict.fromkeys(x.host for x in lines if x.host in fleet.hosts):
        for row in gpu_rows(fleet.hosts[host]):
            if row.judged.gone and (host, row.index) not in seen:
                lines.append(JobLine(None, host, row))
                seen.add((host, row.index))
    index_jobs = Domain("job", job)
    found = [f for f in fleet.all_findings(watch=watch) if index_jobs in domains_of(f, index)]
    # a rank a finding names that no witness placed on a GPU: listed, saying why
    listed = {x.rank for x in lines if x.rank is not None}
    for f in found:
        rank = f.details.rank
        if rank is None or rank in listed:
            continue
        listed.add(rank)
        told = index.locate(job, rank)
        lines.append(JobLine(rank, told.host if told is not None else "?", None,
                             _unplaced_note(told)))
    lines.sort(key=lambda x: (x.rank is None, x.rank if x.rank is not None else 0, x.host,
                              x.gpu.index if x.gpu is not None else -1))
    hosts = tuple(dict.fromkeys([*(x.host for x in lines if x.host != "?"),
                                 *hosts_of(index_jobs, found, index)]))
    diagnosis = fleet.diagnosis(watch=watch)
    return JobPicture(job, tuple(lines), hosts, tuple(found), diagnosis.of_job(job),
                      index.nranks.get(job), fleet.jobs.get(job))


def _unplaced_note(place: object) -> str:
    """Why a rank has no GPU row: what evidence would have placed it."""
    if place is not None:
        return "host known (job log), GPU not: no bus id matched its host's GPUs"
    return ("not placed: no GPU process of this job, no NCCL init line, srun label or "
            "torchrun table names its host")
