"""The staged samples' numbers as one ``array('d')`` a sample (issue 38, memory).

``staged.Staged`` held a tuple of float objects per GPU and a named tuple for the host
(~2 KB a sample of 8 GPUs, staged 16 deep per host); it now holds one ``array('d')`` a
sample, NaN for None.  Held to the code before (main at baf2c43: its ``stage``,
``stage_row``, ``_columns_of`` and ``_extractor`` are kept here, in a ``HostHistory`` that
stages as it did): the agent simulator's streams and ``test_row_fold``'s mutated ones (GPUs
dropped and re-indexed, processes changing, odd values, ``None`` fields), fed both through
the row path (lazy v2 samples) and through the built path (``dataclasses.replace`` copies),
answer every query the same (series points, binned points, latest, keys, GPUs, processes,
disks, step series) every few samples, staged and written.  Negative control: the GPUs'
numbers read one host number off are caught.  And a staged sample is smaller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import pytest

from probes.history import HostHistory
from probes.history import host as history_host
from probes.history.host import DISK_FIELDS, GPU_FIELDS, HOST_FIELDS, _disk_values, _floats
from probes.history.keys import gpu_key, host_key
from probes.history.staged import StagedDisk
from probes.wire.samples import HostSample
from tests.bench.bench_fleet_memory import deep_size
from tests.history.test_row_fold import _decode, _steps_digest, _streams
from tests.support.fingerprint import fingerprint

# --- the staging before (main at baf2c43) ----------------------------------------------------

_GPU = attrgetter(*GPU_FIELDS)
_PROCS = attrgetter("processes")
_PROC = attrgetter("pid", "used_mib")
_HOST = attrgetter("cpu_pct", "mem_used_bytes", "swap_in_pages_s", "swap_out_pages_s")
_DISK = attrgetter("name", "util", "r_await", "w_await", "aqu_sz")
_HOST_GET = attrgetter(*HOST_FIELDS[:-1])
_NONE5 = (None,) * len(GPU_FIELDS)
_DISK_GET = attrgetter("util", "r_await", "w_await", "aqu_sz")
_NAME_GET = attrgetter("name")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


class _OldHost(NamedTuple):
    cpu_pct: float | None
    mem_used_bytes: float | None
    swap_in_pages_s: float | None
    swap_out_pages_s: float | None


class _OldStaged(NamedTuple):
    ts: float
    layout: tuple[int, ...]
    gpus: tuple[tuple[float | None, ...], ...]
    procs: tuple[Any, ...]
    host: _OldHost
    disks: tuple[StagedDisk, ...]
    ok_count: float

    @property
    def disk_names(self) -> tuple[str, ...]:
        """What the code before read as ``tuple(d.name for d in r.disks)``."""
        return tuple(map(_NAME_GET, self.disks))

    @property
    def pids(self) -> tuple[tuple[int | None, ...] | None, ...]:
        """Each GPU's pids, as ``HostHistory.processes`` reads them now."""
        return tuple(None if ps is None else tuple(map(_FIRST, ps)) for ps in self.procs)


_new_disk = partial(tuple.__new__, StagedDisk)
_new_host = partial(tuple.__new__, _OldHost)
_new_staged = partial(tuple.__new__, _OldStaged)


def _old_stage(s: HostSample, layout: tuple[int, ...], ok_count: float) -> Any:
    procs = tuple([ps if not ps else tuple(map(_PROC, ps)) for ps in map(_PROCS, s.gpus)])
    return _new_staged((s.ts, layout, tuple(map(_GPU, s.gpus)), procs,
                        _new_host(_HOST(s.host)), tuple(map(_new_disk, map(_DISK, s.disks))),
                        ok_count))


def _old_stage_row(s: HostSample, row: Any, pids: Any, layout: tuple[int, ...],
                   ok_count: float, lens: Any = None) -> Any:
    """(``lens``: the pids' lengths today's caller passes since session 7; not read.)"""
    procs = tuple(map(tuple, map(zip, pids, map(_PROCS, row.gpus))))
    return _new_staged((s.ts, layout, tuple(map(_GPU, row.gpus)), procs,
                        _new_host(_HOST(s.host)), tuple(map(_new_disk, map(_DISK, s.disks))),
                        ok_count))


def _old_columns_of(self: HostHistory, rows: list[Any]) -> dict[str, list[float]]:
    """The staged samples as one float column per series (NaN: missing).

    When every staged sample lists the same GPUs (the usual case) the columns are cut by
    position with ``zip``; otherwise GPUs are matched by index.
    """
    k = len(rows)
    values: dict[str, list[float]] = {}
    procs: dict[str, list[float]] = {}
    ts_last = rows[-1].ts
    per_gpu: list[Any] = []
    if not self._mixed:
        gcols = zip(*[r.gpus for r in rows], strict=True)
        pcols = zip(*[r.procs for r in rows], strict=True)
        for idx, gcol, pcol in zip(rows[0].layout, gcols, pcols, strict=True):
            if idx >= 0:
                per_gpu.append((idx, gcol, pcol))
    else:
        by_gpu: dict[int, Any] = {}
        for i, r in enumerate(rows):
            for idx, g, p in zip(r.layout, r.gpus, r.procs, strict=True):
                if idx < 0:
                    continue
                col = by_gpu.get(idx)
                if col is None:
                    col = by_gpu[idx] = ([_NONE5] * k, [None] * k)
                col[0][i] = g
                col[1][i] = p
        per_gpu = [(i, gs, ps) for i, (gs, ps) in by_gpu.items()]
    for idx, gs, ps in per_gpu:
        keys = self._gkeys.get(idx)
        if keys is None:
            keys = self._gkeys[idx] = tuple(gpu_key(idx, f) for f in GPU_FIELDS)
        for key, vals in zip(keys, zip(*gs, strict=True), strict=True):
            values[key] = _floats(vals)
        self._gpu_procs(idx, ps, ts_last, procs)
    host = [_HOST_GET(r.host) for r in rows]
    for f, vals in zip(HOST_FIELDS[:-1], zip(*host, strict=True), strict=True):
        values[host_key(f)] = _floats(vals)
    values[host_key("gpu_count")] = self._staged_counts
    self._disk_columns(rows, values)
    values.update(procs)
    return values


def _old_extractor(self: HostHistory, key: str) -> Callable[[Any], float | None]:
    parts = key.split("/")
    scope, field = parts[0], parts[-1]
    if scope == "gpu":
        idx = int(parts[1])
        j = GPU_FIELDS.index(field) if field in GPU_FIELDS else -1

        def gpu_val(r: Any) -> float | None:
            if j < 0 or idx not in r.layout:
                return None
            return r.gpus[r.layout.index(idx)][j]
        return gpu_val
    if scope == "host":
        if field == "gpu_count":
            return attrgetter("ok_count")
        hget = attrgetter(field)

        def host_val(r: Any) -> float | None:
            v: float | None = hget(r.host)
            return v
        return host_val
    if scope == "disk":
        name = parts[1]
        j = DISK_FIELDS.index(field)

        def disk_val(r: Any) -> float | None:
            for d in r.disks:
                if d.name == name:
                    return _disk_values(d)[j]
            return None
        return disk_val
    gpu, pid = int(parts[1]), int(parts[2])

    def proc_val(r: Any) -> float | None:
        if gpu not in r.layout:
            return None
        for idx, ps in zip(r.layout, r.procs, strict=True):
            if idx == gpu:
                for p, used in ps or ():
                    if p == pid:
                        return used
        return None
    return proc_val


class OldStaging(HostHistory):
    """A history that stages as main at baf2c43 did (its staging code, above)."""

    def add(self, sample: HostSample) -> None:
        saved = history_host.stage, history_host.stage_row
        history_host.stage, history_host.stage_row = _old_stage, _old_stage_row
        try:
            super().add(sample)
        finally:
            history_host.stage, history_host.stage_row = saved

    _columns_of = _old_columns_of
    _extractor = _old_extractor

    def _staged_values(self, key: str) -> list[float | None]:
        """Each staged value through the old extractor (its rows hold no ``numbers`` to read
        by position, as ``HostHistory._staged_values`` does since session 7)."""
        get = self._extractor(key)
        return [get(r) for r in self._staged]

    def _block_columns(self, rows: Any) -> None:
        """Never cut as one block: ``_old_columns_of`` cuts everything."""


# --- comparing -----------------------------------------------------------------------------

def _digest(h: HostHistory) -> str:
    """Every query's answer, as text (NaN compares equal as text); the staging itself left
    out (its form is what changed)."""
    out: list[object] = [h.series_keys(), h.gpu_indices(), h.gpus_missing_since(), h.disks(),
                         [(g, h.processes(g)) for g in h.gpu_indices()], h.dropped,
                         len(h._staged), h._staged_counts, h._mixed, _steps_digest(h)]
    for key in h.series_keys():
        s = h.series(key)  # type: ignore[arg-type]
        if s is not None:
            out.append((key, s.points(), s.points(max_points=7), s.latest()))
    return fingerprint(out)  # equal exactly where repr is, at a fraction of its cost


@pytest.fixture(scope="module")
def samples() -> list[tuple[list[HostSample], list[HostSample]]]:
    """Per stream: the lazy v2 samples (row path) and built copies (no row)."""
    out = []
    streams = _streams()
    for hello, lines in (streams[0], streams[1], streams[2], streams[5]):
        lazy = _decode(hello, lines, eager=False)
        built = [dataclasses.replace(s) for s in _decode(hello, lines, eager=True)]
        out.append((lazy, built))
    return out


def _differences(samples: list[tuple[list[HostSample], list[HostSample]]]) -> tuple[int, int]:
    """(checks that differ, checks)."""
    differ = checks = 0
    for lazy, built in samples:
        for feed in (lazy, built):
            new, old = HostHistory(), OldStaging()
            for n, s in enumerate(feed):
                new.add(s)
                old.add(s)
                if n % 13 == 0 or n == len(feed) - 1:
                    checks += 1
                    differ += _digest(new) != _digest(old)
    return differ, checks


def test_staged_numbers_answer_as_the_staging_before(
        samples: list[tuple[list[HostSample], list[HostSample]]]) -> None:
    assert sum(s.wire_row is not None for lazy, _ in samples for s in lazy) > 300
    differ, checks = _differences(samples)
    assert checks > 90
    assert differ == 0


def test_negative_control_numbers_read_off_by_one_are_seen(
        samples: list[tuple[list[HostSample], list[HostSample]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_host, "_HOSTS", history_host._HOSTS - 1)
    differ, _ = _differences(samples[:1])
    assert differ > 0


def test_a_staged_sample_is_smaller(
        samples: list[tuple[list[HostSample], list[HostSample]]]) -> None:
    """What a staged 8-GPU sample holds of its own (not shared with the sample before it):
    one array, not tuples of float objects per GPU, per process and per disk."""
    lazy, _ = samples[0]
    new, old = HostHistory(), OldStaging()
    for s in lazy[:10]:
        new.add(s)
        old.add(s)

    def own(h: HostHistory) -> int:
        seen: set[int] = set()
        deep_size(h._staged[-2], seen)
        return deep_size(h._staged[-1], seen)

    row = new._staged[-1]
    assert len(row.layout) == 8 and len(row.numbers) > 4 + 8 * len(GPU_FIELDS)
    assert row.pids is new._staged[-2].pids  # a v2 tick's pids are its epoch's
    assert row.procs == old._staged[-1].procs and row.disks == old._staged[-1].disks
    assert own(new) * 3 < own(old), (own(new), own(old))
