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
from collections.abc import Callable, Sequence
from functools import partial
from itertools import chain
from operator import attrgetter
from struct import Struct
from struct import error as StructError
from typing import NamedTuple

from probes.wire.compact import GPU_ROW_FIELDS, SampleRow
from probes.wire.samples import HostSample
from tests.history.before_s13.keys import GPU_FIELDS, HOST_FIELDS


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

    ``numbers`` holds, in this order: the host's ``HOST_NUMBERS``; GPU by GPU in the
    sample's order, each one's ``GPU_FIELDS``; each GPU's processes' GPU memory (MiB, in
    ``pids``' order); each disk's util, r_await, w_await and aqu_sz.  NaN is None there
    (the protocol refuses non-finite numbers, so NaN always means None, as in the columns
    the history cuts from it).  Beside it, in the same GPU order (no object per GPU or per
    process): the GPUs' indices (``layout``, shared by the host's samples), each GPU's
    processes' pids (None: not collected; a wire v2 tick's are its static epoch's, shared)
    and the disks' names.  ``procs`` and ``disks`` give them back as pairs and
    ``StagedDisk``s, as they were staged before (issue 38, memory: ~3.8 KB a sample of
    8 GPUs and 3 disks became ~1 KB)."""

    ts: float
    layout: tuple[int, ...]
    numbers: array[float]
    pids: tuple[tuple[int | None, ...] | None, ...]
    disk_names: tuple[str, ...]
    ok_count: float

    @property
    def procs(self) -> tuple[tuple[ProcPair, ...] | None, ...]:
        """Each GPU's processes as (pid, MiB) pairs (None: not collected)."""
        nums = self.numbers
        at = len(HOST_NUMBERS) + GPU_NUMBERS * len(self.layout)
        out: list[tuple[ProcPair, ...] | None] = []
        for ps in self.pids:
            if ps is None:
                out.append(None)
                continue
            end = at + len(ps)
            out.append(tuple(zip(ps, map(_none, nums[at:end]), strict=True)))
            at = end
        return tuple(out)

    @property
    def disks(self) -> tuple[StagedDisk, ...]:
        """The disks' names and numbers."""
        names = self.disk_names
        if not names:
            return ()
        nums = self.numbers
        at = len(nums) - 4 * len(names)
        return tuple([_new_disk((name, *map(_none, nums[at + 4 * i:at + 4 * i + 4])))
                      for i, name in enumerate(names)])


def _none(v: float) -> float | None:
    return None if v != v else v


_GPU = attrgetter(*GPU_FIELDS)
"""A GPU's dense fields: of a ``GpuSample``, or of a wire v2 ``GpuRow`` (named the same)."""
ROW_HOLDS_FIELDS = set(GPU_FIELDS) <= set(GPU_ROW_FIELDS)
"""Every dense GPU field is a moving one, in a tick's row (else ``stage_row`` is not used)."""
_PROCS = attrgetter("processes")
_PROC = attrgetter("pid", "used_mib")
_HOST = attrgetter(*HOST_NUMBERS)
_DISK_NUMS = attrgetter("util", "r_await", "w_await", "aqu_sz")
_NAME = attrgetter("name")
_PID = attrgetter("pid")
_MIB = attrgetter("used_mib")
# ``tuple.__new__`` directly: ``_make`` would re-check the length, a third of the cost here.
_new_disk = partial(tuple.__new__, StagedDisk)
_new_staged = partial(tuple.__new__, Staged)
_chain = chain.from_iterable


_HOSTS = len(HOST_NUMBERS)
_PACKS: dict[int, Callable[..., bytes]] = {}
"""A ``Struct(n doubles).pack`` by count of numbers (a host's count changes only when its
GPUs, processes or disks do)."""


def _numbers(host: object, gpus: Sequence[object], mib: Sequence[float | None],
             disks: Sequence[object]) -> array[float]:
    """A staged row's numbers (``Staged``), NaN for None.

    Packed by one ``struct`` call into the array's bytes: ``array('d', values)`` converted
    each of a list's numbers for ~40 ns and a ``None in values`` scan came first (issue 38:
    ~3.7 µs of a ~10 µs staging, 8 GPUs); a pack converts each number the same way
    (``PyFloat_AsDouble``) and refuses None, so the NaN pass runs only for a sample with a
    field not reported."""
    values = (*_HOST(host), *_chain(map(_GPU, gpus)), *mib, *_chain(map(_DISK_NUMS, disks)))
    pack = _PACKS.get(len(values))
    if pack is None:
        if len(_PACKS) >= 4096:  # bounded, whatever the hosts send
            _PACKS.clear()
        pack = _PACKS[len(values)] = Struct(f"{len(values)}d").pack
    try:
        return array("d", pack(*values))
    except StructError:  # a field not reported (or not a number: array's error, below)
        return array("d", [_NAN if v is None else v for v in values])


def stage(s: HostSample, layout: tuple[int, ...], ok_count: float) -> Staged:
    """The part of ``s`` the history writes (the sample itself can then be let go);
    ``layout``: its GPUs' indices, in order (``GpuSteps.layout``)."""
    plists = list(map(_PROCS, s.gpus))
    pids = tuple([None if ps is None else tuple(map(_PID, ps)) for ps in plists])
    mib = [m for ps in plists if ps for m in map(_MIB, ps)]
    return _new_staged((s.ts, layout, _numbers(s.host, s.gpus, mib, s.disks), pids,
                        tuple(map(_NAME, s.disks)), ok_count))


def stage_row(s: HostSample, row: SampleRow, pids: Sequence[tuple[int | None, ...]],
              layout: tuple[int, ...], ok_count: float,
              lens: tuple[int, ...] | None = None) -> Staged:
    """``stage`` of a sample the wire v2 kept as its row (``HostSample.wire_row``), without
    building its GPUs: every number and the disks' names read from the row (the decoder
    builds ``s.host`` and ``s.disks`` from the same row objects), the time from ``s`` (a
    host's clock correction moves ``s.ts``, never the row's: ``HostClockWatch``), each
    GPU's processes as its static processes' ``pids`` (one tuple per GPU position of the
    sample's static epoch, kept as they are) with the row's amounts, paired as ``zip``
    pairs them (the shorter decides).  ``lens``: ``pids``' lengths, where the caller keeps
    them with ``pids`` (not counted again each sample).

    The usual case packs its numbers in one call, without the tuple and the process list
    ``_numbers`` builds first (session 9's candidate, landed in session 12: ~0.8 of the
    staging before, ``bench_stage9.py``)."""
    gpus = row.gpus
    disks = row.disks
    amounts = list(map(_PROCS, gpus))
    if lens is None:
        lens = tuple(map(len, pids))
    if tuple(map(len, amounts)) == lens:
        n = _HOSTS + GPU_NUMBERS * len(gpus) + sum(lens) + 4 * len(disks)
        pack = _PACKS.get(n)
        if pack is None:
            if len(_PACKS) >= 4096:  # bounded, whatever the hosts send
                _PACKS.clear()
            pack = _PACKS[n] = Struct(f"{n}d").pack
        try:
            nums = array("d", pack(*_HOST(row.host), *_chain(map(_GPU, gpus)),
                                   *_chain(amounts), *_chain(map(_DISK_NUMS, disks))))
        except StructError:  # a field not reported (or not a number: as ``_numbers``)
            nums = _numbers(row.host, gpus, list(_chain(amounts)), disks)
        # the epoch's own tuple, shared by the samples of that epoch
        return _new_staged((s.ts, layout, nums, tuple(pids), tuple(map(_NAME, disks)),
                            ok_count))
    fitted: list[tuple[int | None, ...]] = []
    mib: list[float | None] = []
    for ps, am in zip(pids, amounts, strict=False):
        k = min(len(ps), len(am))
        fitted.append(ps[:k])
        mib += am[:k]
    return _new_staged((s.ts, layout, _numbers(row.host, gpus, mib, disks),
                        tuple(fitted), tuple(map(_NAME, disks)), ok_count))


# --- reading a staged row in place ----------------------------------------------------------
# ``procs`` and ``disks`` build tuples of every pair and disk; the history's per-sample
# readers need one value, or the pids alone (issue 38: ~50k builds each at 1024 hosts).

def proc_mib(r: Staged, gpu: int, pid: int) -> float | None:
    """GPU ``gpu``'s process ``pid``'s memory in ``r`` (None: not there, or not reported):
    ``procs``' first pair of that pid on that GPU, read from ``numbers`` where it sits."""
    layout = r.layout
    if gpu not in layout:
        return None
    at = _HOSTS + GPU_NUMBERS * len(layout)
    for idx, ps in zip(layout, r.pids, strict=True):
        if ps is None:
            continue
        if idx == gpu and pid in ps:
            return _none(r.numbers[at + ps.index(pid)])
        at += len(ps)
    return None


def disk_numbers(r: Staged, name: str) -> tuple[float | None, float | None, float | None,
                                                float | None] | None:
    """Disk ``name``'s util, r_await, w_await and aqu_sz in ``r`` (its first listing, as
    ``disks`` gives it), or None where ``r`` lists no such disk."""
    names = r.disk_names
    if name not in names:
        return None
    nums = r.numbers
    at = len(nums) - 4 * len(names) + 4 * names.index(name)
    return (_none(nums[at]), _none(nums[at + 1]), _none(nums[at + 2]), _none(nums[at + 3]))
