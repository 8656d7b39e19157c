"""Staged samples, slimmed: only the numbers the history writes, not the decoded sample.

A decoded 8-GPU ``HostSample`` holds ~16 KB (names, UUIDs, command lines, every field as a
Python object); the history stages ``STAGE_MAX`` of them per host before cutting columns,
which at 1024 hosts was ~250 MB of staging alone.  A ``Staged`` row keeps the same attribute
names for the fields the history reads (so the column cutting and the staged-sample queries
read either alike) in about a sixth of the space.
"""

from __future__ import annotations

from collections import namedtuple
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from probes.history.keys import GPU_FIELDS
from probes.wire.samples import HostSample


class StagedProc(NamedTuple):
    """A process's pid and GPU memory."""

    pid: int | None
    used_mib: float | None


if TYPE_CHECKING:  # what mypy sees: the fields read by name (the dense ones by attrgetter)
    class StagedGpu(tuple[Any, ...]):
        """A GPU's dense fields (``GPU_FIELDS``) and its processes."""

        index: int  # type: ignore[assignment]  # (shadows tuple.index; read as a field only)
        processes: tuple[StagedProc, ...] | None
else:  # the fields: its index, the table's charted fields (``GPU_FIELDS``), its processes
    StagedGpu = namedtuple("StagedGpu", ("index", *GPU_FIELDS, "processes"))


class StagedHost(NamedTuple):
    """The host's dense fields (``HOST_FIELDS`` less ``gpu_count``)."""

    cpu_pct: float | None
    mem_used_bytes: float | None
    swap_in_pages_s: float | None
    swap_out_pages_s: float | None


class StagedDisk(NamedTuple):
    """A disk's fields the history keeps (``await`` is the worse of the two)."""

    name: str
    util: float | None
    r_await: float | None
    w_await: float | None
    aqu_sz: float | None


class Staged(NamedTuple):
    """One sample as staged: its time, the numbers kept, and how many GPUs answered."""

    ts: float
    gpus: tuple[StagedGpu, ...]
    host: StagedHost
    disks: tuple[StagedDisk, ...]
    ok_count: float


_GPU = attrgetter("index", *GPU_FIELDS, "processes")
_PROCS_AT = len(GPU_FIELDS) + 1
"""Where a ``StagedGpu`` holds its processes."""
_PROC = attrgetter("pid", "used_mib")
_HOST = attrgetter("cpu_pct", "mem_used_bytes", "swap_in_pages_s", "swap_out_pages_s")
_DISK = attrgetter("name", "util", "r_await", "w_await", "aqu_sz")
# ``tuple.__new__`` directly: ``_make`` would re-check the length, a third of the cost here.
_new_gpu = partial(tuple.__new__, StagedGpu)
_new_proc = partial(tuple.__new__, StagedProc)
_new_disk = partial(tuple.__new__, StagedDisk)
_new_host = partial(tuple.__new__, StagedHost)


def slim(s: HostSample, ok_count: float) -> Staged:
    """The part of ``s`` the history writes (the sample itself can then be let go)."""
    gpus: list[StagedGpu] = list(map(_new_gpu, map(_GPU, s.gpus)))
    for i, g in enumerate(gpus):
        ps = g.processes
        if ps:
            gpus[i] = _new_gpu((*g[:_PROCS_AT], tuple(map(_new_proc, map(_PROC, ps)))))
    return Staged(s.ts, tuple(gpus), _new_host(_HOST(s.host)),
                  tuple(map(_new_disk, map(_DISK, s.disks))), ok_count)
