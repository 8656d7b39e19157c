"""Ranks mapped to hosts and GPUs, so a log's "rank 3 failed" names the machine to drain.

Two witnesses, in order of trust:

1. the agents: a GPU process whose environment says ``RANK``/``SLURM_PROCID`` and whose
   cgroup or environment names its Slurm job sits on a known GPU of a known host (NVML lists
   processes per device handle, so the GPU is the one the process uses, whatever its index);
2. the job's log: NCCL's init lines tie a rank to a host and a bus id, torchrun's failure
   table a rank to a host (``probes/rules/logrules/rank_places.py``);
3. Slurm's layout of the watched job, where it fixes a task's node and GPU (block
   distribution, one GPU a task: ``SlurmJob.task_gpus``): an ``srun``-launched rank is
   its task id.

A finding from a job's log keeps the host whose agent read the log (``host``) and gains
``job``, ``rank_host``, ``rank_gpu``, ``rank_bus_id`` and ``rank_serial`` where the rank is
placed; a rank is never placed by guessing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from probes.analysis.findings import Finding
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.rules.busid import normalize_bus_id
from probes.rules.logrules.rank_places import LoggedRank
from probes.wire.samples import JOB_SOURCE_PREFIX, Hello, HostSample

PlaceWitness = Literal["process", "log", "layout"]


@dataclass(frozen=True)
class RankPlace:
    """Where one rank of one job runs."""

    job: str | None
    rank: int
    host: str
    gpu: int | None = None
    bus_id: str | None = None
    serial: str | None = None
    witness: PlaceWitness = "process"
    world_size: int | None = None
    """The job's rank count as the process's environment said it (``WORLD_SIZE``)."""


@dataclass(frozen=True)
class HostRanks:
    """What one host tells about ranks: its newest sample, its hello, its logs' places."""

    host: str
    sample: HostSample | None
    hello: Hello | None
    logged: Mapping[int, LoggedRank]


def process_places(host: str, sample: HostSample | None,
                   hello: Hello | None) -> list[RankPlace]:
    """The ranks of the GPU processes in ``sample``, each on the GPU it was listed under."""
    if sample is None:
        return []
    ids = gpu_ids(hello)
    out = []
    for gpu in sample.gpus:
        for p in gpu.processes or ():
            if p.rank is None:
                continue
            bus, serial = ids.get(gpu.index, (None, None))
            if gpu.bus_id:
                bus = normalize_bus_id(gpu.bus_id)
            out.append(RankPlace(p.slurm_job, p.rank, host, gpu.index if gpu.index >= 0 else None,
                                 bus, serial, world_size=p.world_size))
    return out


_IDS: dict[int, tuple[Hello, dict[int, tuple[str | None, str | None]]]] = {}
_IDS_KEPT = 16384


def gpu_ids(hello: Hello | None) -> dict[int, tuple[str | None, str | None]]:
    """GPU index → (bus id as lspci writes it, serial), per hello: a hello changes once per
    connection, and reading bus ids every tick was most of placing a thousand hosts' ranks."""
    if hello is None:
        return {}
    kept = _IDS.get(id(hello))
    if kept is not None and kept[0] is hello:
        return kept[1]
    if len(_IDS) >= _IDS_KEPT:
        _IDS.clear()
    ids = {g.index: (normalize_bus_id(g.bus_id), g.serial) for g in hello.facts.gpus}
    _IDS[id(hello)] = (hello, ids)
    return ids


class RankIndex:
    """Every placed rank of every job the fleet shows, and the jobs each host runs."""

    def __init__(self, hosts: Iterable[HostRanks], watch: JobWatch = NO_JOB) -> None:
        """``watch``: the job the operator watches (its log's ranks are that job's, its hosts
        run it, its layout places the ranks nothing else placed)."""
        self.watched_job = watched_job = watch.job
        self.watched_hosts = frozenset(watch.hosts)
        """The hosts Slurm gave the watched job: they run it even when no GPU process says so
        (a simulated or Prometheus-read host, a process the agent may not read)."""
        self._by_job: dict[tuple[str | None, int], RankPlace] = {}
        self.jobs_of_host: dict[str, set[str]] = {}
        self.job_of_gpu: dict[tuple[str, int], str] = {}
        """(host, GPU index) → the job whose process the agent listed on that GPU."""
        self.nranks: dict[str | None, int] = {}
        """How many ranks a job has, as NCCL's init lines (``nranks``) told it."""
        self.comm_of_host: dict[str, str] = {}
        """The widest NCCL communicator a host's logs initialised (its id): the failure
        domain of a job no scheduler names."""
        logged: list[tuple[HostRanks, LoggedRank]] = []
        hellos: dict[str, Hello | None] = {}
        for h in hosts:
            for place in process_places(h.host, h.sample, h.hello):
                self._by_job.setdefault((place.job, place.rank), place)
                if place.world_size:
                    self.nranks[place.job] = max(self.nranks.get(place.job, 0),
                                                 place.world_size)
                if place.job is not None:
                    self.jobs_of_host.setdefault(h.host, set()).add(place.job)
                    if place.gpu is not None:
                        self.job_of_gpu.setdefault((h.host, place.gpu), place.job)
            hellos[h.host] = h.hello
            logged.extend((h, r) for r in h.logged.values())
        gpu_of_bus: dict[tuple[str, str], tuple[int, str | None]] = {}
        for host in {r.host for _, r in logged}:  # only hosts a log placed a rank on
            for index, (bus, serial) in gpu_ids(hellos.get(host)).items():
                if bus:
                    gpu_of_bus[(host, bus)] = (index, serial)
        widest: dict[str, int] = {}
        for h, r in logged:
            job = self.job_of_log(h.host)
            if r.nranks:
                self.nranks[job] = max(self.nranks.get(job, 0), r.nranks)
            if r.comm and (r.nranks or 0) >= widest.get(h.host, 0):
                widest[h.host] = r.nranks or 0
                self.comm_of_host[h.host] = r.comm
            if (job, r.rank) in self._by_job:
                continue  # the agents saw the process: they win over the log
            gpu, serial = gpu_of_bus.get((r.host, r.bus_id or ""), (None, None))
            self._by_job[(job, r.rank)] = RankPlace(job, r.rank, r.host, gpu, r.bus_id,
                                                    serial, "log")
        # the third witness: Slurm's own block layout of the watched job, one GPU a task
        # (``SlurmJob.task_gpus``), for the ranks no process or log line placed
        for task, (host, index) in watch.layout.items():
            if watched_job is not None and (watched_job, task) not in self._by_job:
                bus, serial = gpu_ids(hellos.get(host)).get(index, (None, None))
                self._by_job[(watched_job, task)] = RankPlace(
                    watched_job, task, host, index, bus, serial, "layout")

    def job_of_log(self, host: str) -> str | None:
        """The job whose log ``host``'s agent reads: the watched one when the host is in it
        or runs nothing known, else the one job its GPU processes run; None when unsure."""
        jobs = self.jobs_of_host.get(host, set())
        watched = self.watched_job
        if watched is not None and (watched in jobs or (not jobs and (
                not self.watched_hosts or host in self.watched_hosts))):
            return watched
        return next(iter(jobs)) if len(jobs) == 1 else None

    def comms_on(self, host: str) -> frozenset[str]:
        """The communicator a host's logs initialised, as a set (empty when none)."""
        comm = self.comm_of_host.get(host)
        return frozenset({comm}) if comm else frozenset()

    def jobs_on(self, host: str, gpu: int | None = None) -> frozenset[str]:
        """The jobs that run on ``host`` (on its GPU ``gpu`` when the agents said which): the
        failure domains a fault of that host or GPU belongs to."""
        if gpu is not None:
            job = self.job_of_gpu.get((host, gpu))
            if job is not None:
                return frozenset({job})
        jobs = set(self.jobs_of_host.get(host, ()))
        if self.watched_job is not None and host in self.watched_hosts:
            jobs.add(self.watched_job)
        return frozenset(jobs)

    def locate(self, job: str | None, rank: int) -> RankPlace | None:
        """Where ``rank`` of ``job`` runs, None when no witness placed it."""
        return self._by_job.get((job, rank))

    def ranks_of(self, job: str) -> list[RankPlace]:
        """Every placed rank of ``job``, by rank."""
        return sorted((p for (j, _), p in self._by_job.items() if j == job),
                      key=lambda p: p.rank)


def placed(findings: Sequence[Finding], index: RankIndex) -> list[Finding]:
    """``findings`` with each job-log finding told its job and its rank's host and GPU."""
    out = []
    for f in findings:
        if not (f.source or "").startswith(JOB_SOURCE_PREFIX):
            out.append(f)
            continue
        job = index.job_of_log(f.host)
        extra = dict(f.extra)
        if job is not None:
            extra["job"] = job
        elif f.host in index.comm_of_host:
            extra["comm"] = index.comm_of_host[f.host]
        rank = extra.get("rank")
        place = index.locate(job, rank) if isinstance(rank, int) else None
        gpu = f.gpu
        if place is not None:
            extra["rank_host"] = place.host
            extra["placed_by"] = place.witness
            for key, value in (("rank_gpu", place.gpu), ("rank_bus_id", place.bus_id),
                               ("rank_serial", place.serial)):
                if value is not None:
                    extra[key] = value
            if place.host != f.host:
                gpu = None  # the log's "GPU 1" is the rank's, on its host, not the reader's
        if extra != f.extra or gpu != f.gpu:
            f = replace(f, extra=extra, gpu=gpu)
        out.append(f)
    return out


def rank_where(f: Finding) -> str | None:
    """``rank 3 on gpu-b07 GPU1``: a placed rank in words, None when it was not placed."""
    rank, host, gpu = f.details.rank, f.details.rank_host, f.details.rank_gpu
    if rank is None or host is None:
        return None
    return f"rank {rank} on {host}" + (f" GPU{gpu}" if gpu is not None else "")
