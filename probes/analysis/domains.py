"""Failure domains: which findings may explain which.

"B is a consequence of A" holds only when A and B share a job (the same Slurm job, or the
same NCCL communicator when there is no scheduler) or the same host.  Two jobs that happen
to run on neighbouring hosts do not hang each other's collectives: a GPU that fell off the
bus under job 48206 says nothing about job 48207's watchdog timeout.  So every finding is
placed in the domains it belongs to, and triage looks for a first failure in each domain
apart.

- A finding from a job's log belongs to that job (``extra["job"]``, placed by
  ``job_ranks.placed``), else to the communicator its log initialised (``extra["comm"]``),
  else to the host whose log it is.
- A finding about a host or one of its GPUs belongs to every job running there: the job
  whose process the agent listed on that GPU, else the host's jobs (a host down, a kernel
  fault, a lost GPU whose process died with it); a host that runs no known job is its own
  domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from probes.analysis.findings import Finding
from probes.analysis.job_ranks import RankIndex
from probes.triage import Code
from probes.wire.samples import JOB_SOURCE_PREFIX

DomainKind = Literal["job", "comm", "host", "switch", "rack"]


@dataclass(frozen=True, order=True)
class Domain:
    """One failure domain: a Slurm job, an NCCL communicator, or a host on its own."""

    kind: DomainKind
    key: str

    @property
    def label(self) -> str:
        """``Slurm job 48206``, ``NCCL communicator 0x5ae7``, ``host gpu-b02``."""
        if self.kind == "job":
            return f"Slurm job {self.key}"
        if self.kind == "comm":
            return f"NCCL communicator {self.key}"
        return f"{self.kind} {self.key}"

    @property
    def job(self) -> str | None:
        """The Slurm job id, for a job's domain."""
        return self.key if self.kind == "job" else None


def domains_of(f: Finding, index: RankIndex | None) -> tuple[Domain, ...]:
    """The domains ``f`` belongs to (at least one)."""
    places: tuple[DomainKind, ...] = ("switch", "rack")
    for kind in places:  # a switch- or rack-suspect: its own domain, and its hosts' jobs
        place = f.details.switch if kind == "switch" else f.details.rack
        if place is not None and f.code in (Code.SWITCH_SUSPECT, Code.RACK_SUSPECT):
            theirs = sorted({j for h in f.details.hosts
                             for j in (index.jobs_on(h, None) if index is not None else ())})
            return (Domain(kind, place), *(Domain("job", j) for j in theirs))
    job = f.details.job
    if isinstance(job, str) and job:
        return (Domain("job", job),)
    comm = f.details.comm
    if isinstance(comm, str) and comm:
        return (Domain("comm", comm),)
    if (f.source or "").startswith(JOB_SOURCE_PREFIX) or index is None:
        return (Domain("host", f.host),)
    jobs = index.jobs_on(f.host, f.gpu)
    if not jobs:
        comms = index.comms_on(f.host)
        if comms:
            return tuple(Domain("comm", c) for c in sorted(comms))
        return (Domain("host", f.host),)
    return tuple(Domain("job", j) for j in sorted(jobs))


def group(findings: Iterable[Finding], index: RankIndex | None
          ) -> dict[Domain, list[Finding]]:
    """Each domain's findings, in the order given (a finding may be in several)."""
    out: dict[Domain, list[Finding]] = {}
    for f in findings:
        for d in domains_of(f, index):
            out.setdefault(d, []).append(f)
    return out


def hosts_of(domain: Domain, findings: Sequence[Finding], index: RankIndex | None
             ) -> tuple[str, ...]:
    """The hosts a domain spans, as far as the ranks and findings tell."""
    hosts: dict[str, None] = {}
    if domain.kind == "host":
        return (domain.key,)
    if index is not None and domain.kind == "job":
        hosts.update(dict.fromkeys(p.host for p in index.ranks_of(domain.key)))
        hosts.update(dict.fromkeys(h for h, jobs in index.jobs_of_host.items()
                                   if domain.key in jobs))
        if index.watched_job == domain.key:
            hosts.update(dict.fromkeys(sorted(index.watched_hosts)))
    for f in findings:
        where = f.details.rank_host
        hosts[where if where is not None else f.host] = None
    return tuple(hosts)
