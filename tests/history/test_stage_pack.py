"""Staging a sample with one ``struct`` pack, against the staging before (issue 38, session 7).

``staged._numbers`` built a list of the sample's numbers, scanned it for None and converted
it with ``array('d', values)``; it now packs them with one ``Struct(n doubles).pack`` into
the array's bytes (NaN pass only where a field is None), and ``stage_row`` compares the
processes' counts with the lengths kept beside the epoch's pids.  Held to main's code at
590dba1 (``_old_numbers``/``_old_stage``/``_old_stage_row`` below): every sample of random
built streams (``test_block_columns``: None fields, GPUs, processes and disks changing, a pid
or a disk listed twice) and of the agent simulator's mutated v2 streams (``test_row_fold``:
GPUs dropped and re-indexed, processes coming and going, odd values), through the row path
and the built path, is staged both ways with the same arguments and compared field by field,
the numbers bit for bit, the pids by identity too (an epoch's tuple is kept, not copied);
odd numbers (ints past 2**53, bools, ±0, ±inf, NaN) pack as ``array`` converts them, and a
value that is not a number fails as before.  Negative control: a pack of float32 is caught.
The whole history's answers are held to the code before by ``test_staged_numbers.py`` and
``test_block_columns.py``.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from struct import Struct
from typing import Any

import pytest

from probes.history import HostHistory, staged
from probes.history import host as history_host
from probes.history.staged import Staged
from probes.wire.samples import HostSample
from tests.history.test_block_columns import _random_stream
from tests.history.test_row_fold import _decode, _streams

# --- the staging before (main at 590dba1) ----------------------------------------------------


def _old_numbers(host: object, gpus: Sequence[object], mib: Sequence[float | None],
                 disks: Sequence[object]) -> array[float]:
    values = [*staged._HOST(host), *staged._chain(map(staged._GPU, gpus)), *mib,
              *staged._chain(map(staged._DISK_NUMS, disks))]
    if None in values:
        return array("d", [staged._NAN if v is None else v for v in values])
    return array("d", values)


def _old_stage(s: HostSample, layout: tuple[int, ...], ok_count: float) -> Staged:
    plists = list(map(staged._PROCS, s.gpus))
    pids = tuple([None if ps is None else tuple(map(staged._PID, ps)) for ps in plists])
    mib = [m for ps in plists if ps for m in map(staged._MIB, ps)]
    return staged._new_staged((s.ts, layout, _old_numbers(s.host, s.gpus, mib, s.disks), pids,
                               tuple(map(staged._NAME, s.disks)), ok_count))


def _old_stage_row(s: HostSample, row: Any, pids: Sequence[tuple[int | None, ...]],
                   layout: tuple[int, ...], ok_count: float) -> Staged:
    amounts = list(map(staged._PROCS, row.gpus))
    if len(pids) == len(amounts) and list(map(len, pids)) == list(map(len, amounts)):
        kept = tuple(pids)
        mib: list[float | None] = list(staged._chain(amounts))
    else:
        fitted: list[tuple[int | None, ...]] = []
        mib = []
        for ps, am in zip(pids, amounts, strict=False):
            n = min(len(ps), len(am))
            fitted.append(ps[:n])
            mib += am[:n]
        kept = tuple(fitted)
    return staged._new_staged((s.ts, layout, _old_numbers(s.host, row.gpus, mib, s.disks),
                               kept, tuple(map(staged._NAME, s.disks)), ok_count))


# --- comparing -----------------------------------------------------------------------------

def _same(new: Staged, old: Staged, pids: object = None) -> bool:
    """Field by field; the numbers bit for bit (NaN included); an epoch's pids by identity."""
    if (new.ts, new.layout, new.pids, new.disk_names, new.ok_count) != \
            (old.ts, old.layout, old.pids, old.disk_names, old.ok_count):
        return False
    if type(new.numbers) is not array or new.numbers.typecode != "d":
        return False
    if new.numbers.tobytes() != old.numbers.tobytes():
        return False
    return pids is None or (new.pids is pids) == (old.pids is pids)


@contextmanager
def _both_ways(log: list[bool]) -> Iterator[None]:
    """``HostHistory.add`` stages each sample both ways (the new row kept), logging whether
    the two agree."""
    new_stage, new_row = history_host.stage, history_host.stage_row

    def stage(s: HostSample, layout: tuple[int, ...], ok: float) -> Staged:
        got = new_stage(s, layout, ok)
        log.append(_same(got, _old_stage(s, layout, ok)))
        return got

    def stage_row(s: HostSample, row: Any, pids: Any, layout: tuple[int, ...], ok: float,
                  lens: tuple[int, ...] | None = None) -> Staged:
        got = new_row(s, row, pids, layout, ok, lens)
        log.append(_same(got, _old_stage_row(s, row, pids, layout, ok), pids))
        return got

    history_host.stage, history_host.stage_row = stage, stage_row  # type: ignore[assignment]
    try:
        yield
    finally:
        history_host.stage, history_host.stage_row = new_stage, new_row


@pytest.fixture(scope="module")
def feeds() -> list[list[HostSample]]:
    out = [_random_stream(11, 700), _random_stream(12, 700)]
    rows = _streams()
    for hello, lines in (rows[1], rows[2], rows[5], rows[8], rows[11]):
        lazy = _decode(hello, lines, eager=False)
        out += [lazy, [dataclasses.replace(s) for s in lazy]]
    return out


def _agree(feeds: list[list[HostSample]]) -> list[bool]:
    log: list[bool] = []
    with _both_ways(log):
        for feed in feeds:
            h = HostHistory()
            for s in feed:
                h.add(s)
    return log


def test_staging_packed_equals_the_staging_before(feeds: list[list[HostSample]]) -> None:
    rows = sum(s.wire_row is not None for feed in feeds for s in feed)
    assert rows >= 500  # the row path is exercised, not only the built one
    log = _agree(feeds)
    assert len(log) > 2900
    assert all(log), f"{log.count(False)} of {len(log)} staged samples differ"


class _Obj:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def _host(*v: object) -> _Obj:
    return _Obj(**dict(zip(staged.HOST_NUMBERS, v, strict=True)))


@pytest.mark.parametrize("values", [
    (0, True, 2**53 + 1, 10**300),  # ints (mem bytes) and a bool, converted as array does
    (-0.0, float("inf"), float("-inf"), float("nan")),
    (None, 1.5, None, 2.0),
    (5e-324, 1.7976931348623157e308, -1e-310, 3),
])
def test_odd_numbers_pack_as_array_converts_them(values: tuple[object, ...]) -> None:
    gpu = _Obj(**dict(zip(staged.GPU_FIELDS, (1, None, -0.0, 7.25, 2**60), strict=True)))
    disk = _Obj(util=None, r_await=0, w_await=-0.0, aqu_sz=1e308)
    for mib in ([], [None, 3, 2.5]):
        new = staged._numbers(_host(*values), [gpu, gpu], mib, [disk])
        old = _old_numbers(_host(*values), [gpu, gpu], mib, [disk])
        assert new.tobytes() == old.tobytes()


@pytest.mark.parametrize("bad, error", [("x", TypeError), (10**400, OverflowError)])
def test_a_value_not_a_number_fails_as_before(bad: object, error: type[Exception]) -> None:
    for fn in (staged._numbers, _old_numbers):
        with pytest.raises(error):
            fn(_host(1.0, bad, 2.0, None), [], [], [])


def test_negative_control_a_float32_pack_is_seen(feeds: list[list[HostSample]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    class _F32(dict[int, Any]):
        """Each count's pack through float32 (rounded), as a wrong pack would."""

        def get(self, n: int, default: Any = None) -> Any:
            single, double = Struct(f"{n}f"), Struct(f"{n}d")
            return lambda *v: double.pack(*single.unpack(single.pack(*v)))

    monkeypatch.setattr(staged, "_PACKS", _F32())
    log = _agree(feeds[2:4])  # the simulator's: few fields unreported
    assert log.count(False) > len(log) // 2
