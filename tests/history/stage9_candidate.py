"""A candidate ``stage_row`` that reads the tick's row only (issue 38, session 9; landed in
session 12 as ``probes.history.staged.stage_row``, this copy kept for its tests).

``probes.history.staged.stage_row`` takes a row sample's GPU numbers from its row but its
host's and disks' numbers, its disks' names and its time from the decoded sample
(``sample.host``, ``sample.disks``, ``sample.ts``), which the wire v2 decoder builds from
the same row (``CompactStream._sample``: the same objects).  This copy reads them from the
row (``HostRow``, ``DiskRow``, ``SampleRow.ts``) and packs the numbers in one call without
the intermediate tuple and process list (the count of numbers from the lengths).  Measured
at 0.88–0.93 of today's ``stage_row`` (``tests/bench/bench_stage9.py``), under the 15 % the
task asked for, so kept here with its equivalence test (``test_stage_row_rows.py``): it is
what would let the decoder stop building ``HostStats``/``DiskStats`` for a row sample.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from struct import Struct
from struct import error as StructError
from typing import Any

from probes.history import staged
from probes.history.staged import GPU_NUMBERS, HOST_NUMBERS, Staged

_HOSTS = len(HOST_NUMBERS)
_PACKS = staged._PACKS
_HOST, _GPU, _DISK_NUMS = staged._HOST, staged._GPU, staged._DISK_NUMS
_PROCS, _NAME, _chain = staged._PROCS, staged._NAME, staged._chain
_new_staged = staged._new_staged


def stage_row_rows(s: Any, row: Any, pids: Sequence[tuple[int | None, ...]],
                   layout: tuple[int, ...], ok_count: float,
                   lens: tuple[int, ...] | None = None) -> Staged:
    """``staged.stage_row``, every value from ``row`` (``s`` unread)."""
    gpus = row.gpus
    disks = row.disks
    amounts = list(map(_PROCS, gpus))
    if lens is None:
        lens = tuple(map(len, pids))
    if tuple(map(len, amounts)) == lens:
        n = _HOSTS + GPU_NUMBERS * len(gpus) + sum(lens) + 4 * len(disks)
        pack = _PACKS.get(n)
        if pack is None:
            if len(_PACKS) >= 4096:
                _PACKS.clear()
            pack = _PACKS[n] = Struct(f"{n}d").pack
        try:
            nums = array("d", pack(*_HOST(row.host), *_chain(map(_GPU, gpus)),
                                   *_chain(amounts), *_chain(map(_DISK_NUMS, disks))))
        except StructError:  # a field not reported (or not a number: as ``_numbers``)
            nums = staged._numbers(row.host, gpus, list(_chain(amounts)), disks)
        return _new_staged((row.ts, layout, nums, tuple(pids), tuple(map(_NAME, disks)),
                            ok_count))
    fitted: list[tuple[int | None, ...]] = []
    mib: list[float | None] = []
    for ps, am in zip(pids, amounts, strict=False):
        k = min(len(ps), len(am))
        fitted.append(ps[:k])
        mib += am[:k]
    return _new_staged((row.ts, layout, staged._numbers(row.host, gpus, mib, disks),
                        tuple(fitted), tuple(map(_NAME, disks)), ok_count))
