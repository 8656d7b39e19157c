"""Staged samples, slimmed: only the numbers the history writes, not the decoded sample.

A decoded 8-GPU ``HostSample`` holds ~16 KB (names, UUIDs, command lines, every field as a
Python object); the history stages ``STAGE_MAX`` of them per host before cutting columns,
which at 1024 hosts was ~250 MB of staging alone.  A ``Staged`` row keeps the numbers in
about a sixth of the space, GPU by GPU as plain tuples taken in C (``attrgetter``): building
a named tuple per GPU and per process cost 27 µs a sample, more than the column cutting
(issue 38).  The host's and the GPUs' dense numbers are one ``array('d')`` a sample (NaN for
None), not a tuple of float objects per GPU: ~0.4 KB instead of ~2 KB for 8 GPUs, staged
16 deep on a thousand hosts (issue 38, memory).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import NamedTuple

from probes.history.keys import GPU_FIELDS, HOST_FIELDS
from probes.wire.compact import GPU_ROW_FIELDS, SampleRow
from probes.wire.samples import HostSample


class StagedDisk(NamedTuple):
    """A disk's fields the history keeps (``await`` is the worse of the two)."""

    name: str
    util: float | None
    r_await: float | None
    w_await: float | None
    aqu_sz: float | None


ProcPair = tuple[int | None, float | None]
"""A process's pid and GPU memory (MiB)."""
HOST_NUMBERS = HOST_FIELDS[:-1]
"""The host's dense fields (``HOST_FIELDS`` less ``gpu_count``): a staged row's first numbers."""
GPU_NUMBERS = len(GPU_FIELDS)
"""Numbers a GPU takes in a staged row (its ``GPU_FIELDS``, in order)."""
_NAN = float("nan")


class Staged(NamedTuple):
    """One sample as staged: its time, the numbers kept, and how many GPUs answered.

    ``numbers`` holds the host's ``HOST_NUMBERS`` then, GPU by GPU in the sample's order,
    each one's ``GPU_FIELDS`` (NaN: None; the protocol refuses non-finite numbers, so NaN
    always means None, as in the columns the history cuts from it).  Beside it, in the
    same GPU order (no object per GPU): the GPUs' indices (``layout``) and each GPU's
    processes as (pid, MiB) pairs (None: not collected)."""

    ts: float
    layout: tuple[int, ...]
    numbers: array[float]
    procs: tuple[tuple[ProcPair, ...] | None, ...]
    disks: tuple[StagedDisk, ...]
    ok_count: float


_GPU = attrgetter(*GPU_FIELDS)
"""A GPU's dense fields: of a ``GpuSample``, or of a wire v2 ``GpuRow`` (named the same)."""
ROW_HOLDS_FIELDS = set(GPU_FIELDS) <= set(GPU_ROW_FIELDS)
"""Every dense GPU field is a moving one, in a tick's row (else ``stage_row`` is not used)."""
_PROCS = attrgetter("processes")
_PROC = attrgetter("pid", "used_mib")
_HOST = attrgetter(*HOST_NUMBERS)
_DISK = attrgetter("name", "util", "r_await", "w_await", "aqu_sz")
# ``tuple.__new__`` directly: ``_make`` would re-check the length, a third of the cost here.
_new_disk = partial(tuple.__new__, StagedDisk)
_new_staged = partial(tuple.__new__, Staged)
_chain = chain.from_iterable


def _numbers(host: object, gpus: Sequence[object]) -> array[float]:
    """The host's and the GPUs' dense numbers as one row, NaN for None (in C when none is
    None, else one pass in Python)."""
    values = [*_HOST(host), *_chain(map(_GPU, gpus))]
    try:
        return array("d", values)
    except TypeError:  # a None (a field not reported)
        return array("d", [_NAN if v is None else v for v in values])


def stage(s: HostSample, layout: tuple[int, ...], ok_count: float) -> Staged:
    """The part of ``s`` the history writes (the sample itself can then be let go);
    ``layout``: its GPUs' indices, in order (``GpuSteps.layout``)."""
    procs = tuple([ps if not ps else tuple(map(_PROC, ps)) for ps in map(_PROCS, s.gpus)])
    return _new_staged((s.ts, layout, _numbers(s.host, s.gpus), procs,
                        tuple(map(_new_disk, map(_DISK, s.disks))), ok_count))


def stage_row(s: HostSample, row: SampleRow, pids: Sequence[tuple[int | None, ...]],
              layout: tuple[int, ...], ok_count: float) -> Staged:
    """``stage`` of a sample the wire v2 kept as its row (``HostSample.wire_row``), without
    building its GPUs: their numbers from the row's Structs (the same objects the GPUs
    would hold), each GPU's processes as its static processes' ``pids`` (one tuple per
    GPU position of the sample's static epoch) with the row's amounts, in C throughout."""
    procs = tuple(map(tuple, map(zip, pids, map(_PROCS, row.gpus))))
    return _new_staged((s.ts, layout, _numbers(s.host, row.gpus), procs,
                        tuple(map(_new_disk, map(_DISK, s.disks))), ok_count))
