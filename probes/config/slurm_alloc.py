"""Which CPUs and GPUs of each node a job holds: the detail lines of ``scontrol -d show job``.

Slurm prints one line per group of nodes with the same allocation (``src/api/job_info.c``,
``slurm_sprint_job_info``; seen on Debian 12's 22.05)::

         Nodes=n[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)

The rest of that text is not read: its free-text fields (the job's name, account, MCS
label, paths, comment, mail user) may hold anything, newlines and ``Key=`` included.  A
detail line is recognised only as a whole line in exactly this shape, and only for the
nodes Slurm's own node list names.  Slurm prints each allocated node once; so a node named
twice means a job field holds text shaped like these lines, and then no placement is read
at all (:class:`AllocationUnclear`) rather than picking one of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.config.hostlist import HostlistError, expand_hostlist
from probes.config.slurm_cli import SlurmError

_DETAIL = re.compile(
    r"^ {5}Nodes=(?P<nodes>[\w.\[\],-]{1,4096}) CPU_IDs=(?P<cpus>[\d,-]{0,4096}) "
    r"Mem=(?P<mem>\d{1,20}) GRES=(?P<gres>[\w:(),.-]{0,4096})$")
_GPU_IDX = re.compile(r"(?:^|,)gpu(?::[\w.-]{1,64})?:\d{1,6}\(IDX:(?P<idx>[\d,-]{0,4096})\)")
MAX_IDS = 65_536
"""The most CPU ids or GPU indices one detail line may list (a node has hundreds)."""


class AllocationUnclear(SlurmError):
    """The detail lines cannot be told apart from text a job field holds."""

    title = "Slurm allocation unclear"


@dataclass(frozen=True)
class NodeAllocation:
    """What one node gives the job (``scontrol -d show job``'s detail line)."""

    node: str
    cpu_ids: tuple[int, ...]
    """The node's CPU ids held by the job (``CPU_IDs=0-1``), ascending."""
    gpu_indices: tuple[int, ...]
    """The node's GPU indices held by the job (``GRES=gpu:2(IDX:0-1)``), ascending; these are
    Slurm's gres indices, the order of the node's ``gres.conf`` files (``nvidia0``…)."""
    mem_mib: int
    """Memory held on the node in MiB (``Mem=``; 0 when memory is not a consumable)."""

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "cpu_ids": list(self.cpu_ids),
                "gpu_indices": list(self.gpu_indices), "mem_mib": self.mem_mib}


def id_list(text: str) -> tuple[int, ...]:
    """``0-2,5`` → (0, 1, 2, 5).

    Raises:
        ValueError: not such a list, or more than :data:`MAX_IDS` ids.
    """
    out: list[int] = []
    for item in filter(None, text.split(",")):
        first, _, last = item.partition("-")
        lo, hi = int(first), int(last or first)
        if hi < lo or len(out) + hi - lo + 1 > MAX_IDS:
            raise ValueError(f"not an id list: {text[:80]!r}")
        out.extend(range(lo, hi + 1))
    return tuple(sorted(set(out)))


def _gpus(gres: str) -> tuple[int, ...]:
    found: list[int] = []
    for m in _GPU_IDX.finditer(gres):
        found.extend(id_list(m.group("idx")))
    return tuple(sorted(set(found)))


def parse_allocation(text: str, nodes: tuple[str, ...]) -> tuple[NodeAllocation, ...]:
    """The detail lines of ``scontrol -d show job`` text, in the order of ``nodes`` (Slurm's
    node list of the job, from ``squeue``); a node without a line is left out.

    Raises:
        AllocationUnclear: a line names a node twice or a node not in ``nodes``, or a line
            in the detail shape cannot be read.
    """
    wanted = set(nodes)
    found: dict[str, NodeAllocation] = {}
    for line in text.split("\n"):
        m = _DETAIL.match(line)
        if m is None:
            continue
        try:
            names = expand_hostlist(m.group("nodes"))
            cpus, gpus = id_list(m.group("cpus")), _gpus(m.group("gres"))
        except (HostlistError, ValueError):
            raise AllocationUnclear(f"an allocation line cannot be read: "
                                    f"{line.strip()[:120]!r}") from None
        for name in names:
            if name not in wanted:
                raise AllocationUnclear(f"an allocation line names {name!r}, which is not "
                                        "a node of the job (a job field holds text shaped "
                                        "like Slurm's allocation lines)")
            if name in found:
                raise AllocationUnclear(f"the allocation lines name node {name!r} twice "
                                        "(a job field holds text shaped like them)")
            found[name] = NodeAllocation(name, cpus, gpus, int(m.group("mem")))
    return tuple(found[n] for n in nodes if n in found)
