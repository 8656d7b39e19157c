"""The Slurm job the operator watches (``--slurm-job``, ``:job``): a value the view layer
holds and hands to the reads that place ranks, not a field of the fold (issue #37 item 5).

Its log's findings are that job's, the hosts Slurm gave it run it, and where Slurm's layout
fixes a task's host and GPU, the rank is placed there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class JobWatch:
    """Which job is watched, its hosts and its task layout (all empty: none)."""

    job: str | None = None
    """The job's id; None: no job is watched."""
    hosts: frozenset[str] = frozenset()
    """The hosts Slurm gave the job (empty where it did not say: ``:job``)."""
    layout: Mapping[int, tuple[str, int]] = field(
        default_factory=lambda: MappingProxyType({}))
    """Task → (host, GPU) where Slurm's layout fixes them."""

    @classmethod
    def of(cls, job: str | None, hosts: Iterable[str] = (),
           layout: Mapping[int, tuple[str, int]] | None = None) -> JobWatch:
        """A watch of ``job`` (None: none), its hosts and layout copied."""
        if job is None:
            return NO_JOB
        return cls(job, frozenset(hosts), MappingProxyType(dict(layout or {})))

    def switched_to(self, job: str) -> JobWatch:
        """Watching ``job`` from now on (``:job``): the hosts and layout Slurm named were the
        other job's, so they go unless it is the same job."""
        return self if job == self.job else JobWatch(job)

    def key(self) -> tuple[str | None, frozenset[str], tuple[tuple[int, tuple[str, int]], ...]]:
        """What a remembered rank index was built for (equal keys: the same watch)."""
        return (self.job, self.hosts, tuple(sorted(self.layout.items())))


NO_JOB = JobWatch()
"""No job watched."""
