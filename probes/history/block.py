"""Staged samples that are alike, cut into the raw tier's columns as one block (issue 38).

A host's staged samples usually list the same GPUs, the same processes (a wire v2 tick's pids
are its static epoch's own tuple) and the same disks.  Their numbers (``Staged.numbers``) are
then one matrix, a sample a row, and every series, host, GPU, process or disk, is a strided
slice of it, taken in C and handed to the raw tier's codecs as it is (no float list): no
pair, no disk tuple and no value is handled in Python.  Cutting 16 samples of 8 GPUs cost
~250 µs (the processes' and disks' tuples rebuilt, a float list per series); as a block
~30 µs.  The block is then encoded for the raw tier at once (``Block.encoded``: one numpy
cast per codec over the matrix's columns, where a ``struct.pack`` or an ``array('f')`` a
series cost ~1 µs each; session 7), its series cut from one array a codec (a slice each,
in C, where an ``array`` was built a series from its bytes: −35 % of ``encoded``, session
8).  (One ``struct.pack`` for every half-precision series was measured dearer than a pack
per series: the zeroed copy and the float32 pass over columns not needed cost more than the
calls saved.)

Session 9: the block is written to the raw tier as it is encoded, a matrix a codec
(``encode``; ``raw.RawRing``: one numpy assignment a codec, no array a series), the disks'
awaits (``awaits``) and the GPUs' count computed as columns of it, and what a block's
columns are (keys, places, codecs: ``Plan``) is kept while the samples stay alike and no
process or disk starts or stops being tracked, so a flush pays no per-series Python.

``HostHistory._columns_of`` still cuts samples that differ (GPUs or processes come or go,
a pid or a disk listed twice); both cut the same columns, keys and tracking (processes
admitted in the order listed, disks in the order named, up to the maxima):
``tests/history/test_block_columns.py``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from probes.history.keys import GPU_FIELDS, codec_for, disk_key, gpu_key, host_key
from probes.history.raw import Encoded
from probes.history.staged import GPU_NUMBERS, HOST_NUMBERS, Staged
from probes.history.storage import F32, HALF, HALF_MAX, Codec

_HOSTS = len(HOST_NUMBERS)
_RAW_F32: dict[str, bool] = {}
"""Whether a series' raw codec is float32 (else half precision), by key."""


def _raw_f32(key: str) -> bool:
    got = _RAW_F32.get(key)
    if got is None:
        codec = codec_for(key, 0)
        assert codec is F32 or codec is HALF
        got = _RAW_F32[key] = codec is F32
    return got


class Block(NamedTuple):
    """Staged samples as one matrix and where each series sits in it (the cut's result
    spelled out series by series: ``Plan`` is what the flush keeps)."""

    flat: array[float]
    """The samples' numbers, one after the other (NaN: missing)."""
    width: int
    """Numbers a sample."""
    cols: dict[str, int | list[float]]
    """Each series: its column in ``flat``, or its values where they are computed (a disk's
    await, the GPUs answering); in the order the series are first written."""

    def columns(self) -> dict[str, Sequence[float]]:
        """Each series' values: a strided slice of ``flat``, or the values computed."""
        flat, width = self.flat, self.width
        return {key: c if isinstance(c, list) else flat[c::width]
                for key, c in self.cols.items()}

    def encoded(self) -> list[Encoded]:
        """The block as the raw tier's codecs encode it, a matrix a codec (``encode``)."""
        extra: list[list[float]] = []
        at: dict[str, int] = {}
        for key, c in self.cols.items():
            if isinstance(c, list):
                at[key] = self.width + len(extra)
                extra.append(c)
            else:
                at[key] = c
        mat = _matrix(self.flat, self.width)
        if extra:
            mat = np.concatenate([mat, np.array(extra, dtype=np.float64).T], axis=1)
        return encode(mat, _by_codec(at))


def _matrix(flat: array[float], width: int) -> np.ndarray[Any, Any]:
    return np.frombuffer(flat, dtype=np.float64).reshape(-1, width)


def _by_codec(at: dict[str, int]) -> tuple[tuple[Codec, tuple[str, ...], np.ndarray[Any, Any]],
                                           ...]:
    """Each raw codec's series (in order) and their columns in a block's matrix."""
    half: list[str] = []
    single: list[str] = []
    for key in at:
        (single if _raw_f32(key) else half).append(key)
    return tuple((codec, tuple(keys), np.array([at[k] for k in keys], dtype=np.intp))
                 for codec, keys in ((HALF, half), (F32, single)) if keys)


def encode(mat: np.ndarray[Any, Any],
           codecs: Sequence[tuple[Codec, tuple[str, ...], np.ndarray[Any, Any]]]
           ) -> list[Encoded]:
    """Each codec's columns of ``mat`` (a sample a row) as the raw codec stores them.

    One cast a codec for the whole block (half precision, float32) instead of a
    ``struct.pack`` or an ``array('f')`` a series; the same bits: numpy rounds a double to
    half precision as ``struct`` does (to nearest, ties to even, subnormals too), and a
    column with a finite value that does not fit (``struct`` refuses it; an infinity it
    packs) is clamped to ±``HALF_MAX`` first, as ``Codec.encode`` then does.
    """
    out: list[Encoded] = []
    with np.errstate(over="ignore"):  # once a block, not a codec (~1 µs each: session 13)
        for codec, keys, at in codecs:
            sub = mat[:, at]
            if codec is HALF:
                h = sub.astype(np.float16)
                inf = np.isinf(h)
                if inf.any():
                    over = (inf & np.isfinite(sub)).any(axis=0)  # struct packs inf
                    if over.any():
                        cols = np.flatnonzero(over)
                        h[:, cols] = np.clip(sub[:, cols], -HALF_MAX,
                                             HALF_MAX).astype(np.float16)
                out.append((codec, keys, h.view(np.uint16)))
            else:
                out.append((codec, keys, sub.astype(np.float32)))
    return out


def awaits(ra: np.ndarray[Any, Any], wa: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A disk's await a sample: the worse of r_await and w_await, or the one known (NaN:
    unknown), as ``max(r, w)`` picks (the first unless the second is greater: ±0 kept)."""
    got = np.where(wa > ra, wa, ra)  # right wherever r_await is known (wa NaN: ra)
    top = float(ra.max())  # NaN where any r_await is (max propagates it; no warning)
    if top == top:  # no r_await unknown: the usual case, 3 numpy calls, not 6
        return got
    return np.where(wa != wa, ra, np.where(ra != ra, wa, got))


class Plan(NamedTuple):
    """How a host's alike staged samples are cut and encoded, kept while they stay alike
    (the same GPUs, pids and disks, and the same processes and disks tracked)."""

    sig: tuple[object, ...]
    order: tuple[str, ...]
    """Every series, in the order first written (new ones are added to the tiers so)."""
    codecs: tuple[tuple[Codec, tuple[str, ...], np.ndarray[Any, Any]], ...]
    """Each raw codec's series and their columns in the block's extended matrix: the
    samples' numbers, then the GPUs answering, then each disk's await (``awaits``)."""
    awaits: np.ndarray[Any, Any] | None
    """Each disk's r_await column (w_await beside it) whose await is computed (None: no
    disk)."""
    procs: tuple[str, ...]
    """The processes' series: each seen at the flush."""
    await_pairs: np.ndarray[Any, Any] | None = None
    """``awaits``' columns, then each one's w_await column (``awaits + 1``): taken at once."""

    def matrix(self, mat: np.ndarray[Any, Any], counts: Sequence[float]) -> np.ndarray[Any, Any]:
        """The block's extended matrix (``codecs``) of its samples' numbers ``mat``."""
        width = mat.shape[1]
        aw = self.awaits
        ext = np.empty((mat.shape[0], width + 1 + (0 if aw is None else len(aw))))
        ext[:, :width] = mat
        ext[:, width] = counts
        if aw is not None:  # every disk's at once: r_awaits then w_awaits, one take
            both = mat[:, self.await_pairs]
            d = len(aw)
            ext[:, width + 1:] = awaits(both[:, :d], both[:, d:])
        return ext


class BlockCut:
    """``HostHistory``'s block cut (its state is the history's)."""

    _gkeys: dict[int, tuple[str, ...]]
    _disks: set[str]
    max_disks: int
    _staged_counts: list[float]
    _proc_seen: dict[str, float]
    _proc_gen: int
    _plan: Plan | None

    def _track_proc(self, gpu: int, pid: int, ts: float) -> str | None:
        raise NotImplementedError

    def _block_columns(self, rows: list[Staged]) -> tuple[np.ndarray[Any, Any], Plan] | None:
        """The block of ``rows`` (their numbers, a sample a row, and its plan), or None
        where they are not alike (or list a pid or a disk twice).

        The plan is kept while the samples stay alike and no process or disk starts or
        stops being tracked (``sig``): a flush then pays no per-series Python, only the
        processes' times seen (issue 38, session 9)."""
        r0 = rows[0]
        layout, pids, names = r0.layout, r0.pids, r0.disk_names
        for r in rows:
            if (r.layout != layout or (r.pids is not pids and r.pids != pids)
                    or r.disk_names != names):
                return None
        width = len(r0.numbers)
        ts_last = rows[-1].ts
        plan = self._plan
        if plan is not None and plan.sig == (layout, pids, names, width, self._proc_gen,
                                             len(self._disks)):
            self._proc_seen.update(dict.fromkeys(plan.procs, ts_last))
        else:
            if len(set(names)) < len(names):
                return None
            for ps in pids:
                if ps is not None and len(set(ps)) < len(ps):
                    return None
            plan = self._plan = self._make_plan(layout, pids, names, width, ts_last)
        mat = np.frombuffer(b"".join([r.numbers for r in rows]), dtype=np.float64)
        return mat.reshape(len(rows), width), plan

    def _make_plan(self, layout: tuple[int, ...], pids: tuple[tuple[int | None, ...] | None, ...],
                   names: tuple[str, ...], width: int, ts_last: float) -> Plan:
        """The plan of a block (``_block_columns``); the processes and disks it lists are
        tracked now, as a cut series by series tracks them."""
        cols: dict[str, int] = {}
        procs: dict[str, int] = {}
        at = _HOSTS + GPU_NUMBERS * len(layout)
        for pos, (idx, ps) in enumerate(zip(layout, pids, strict=True)):
            if idx >= 0:
                keys = self._gkeys.get(idx)
                if keys is None:
                    keys = self._gkeys[idx] = tuple(gpu_key(idx, f) for f in GPU_FIELDS)
                g = _HOSTS + pos * GPU_NUMBERS
                for j, key in enumerate(keys):
                    cols[key] = g + j
                for i, pid in enumerate(ps or ()):
                    if pid is not None:
                        pkey = self._track_proc(idx, pid, ts_last)
                        if pkey is not None:
                            procs[pkey] = at + i
            if ps is not None:
                at += len(ps)
        for j, f in enumerate(HOST_NUMBERS):
            cols[host_key(f)] = j
        cols[host_key("gpu_count")] = width
        disk_at: list[int] = []
        if names:
            self._block_disks(width, names, cols, disk_at)
        cols.update(procs)
        sig = (layout, pids, names, width, self._proc_gen, len(self._disks))
        aw = np.array(disk_at, dtype=np.intp) if disk_at else None
        return Plan(sig, tuple(cols), _by_codec(cols), aw, tuple(procs),
                    None if aw is None else np.concatenate([aw, aw + 1]))

    def _block_disks(self, width: int, names: tuple[str, ...], cols: dict[str, int],
                     disk_at: list[int]) -> None:
        """The disks' series of a block, as ``HostHistory._disk_columns`` orders them; each
        await a computed column (``Plan.awaits``)."""
        every = len(self._disks | set(names)) <= self.max_disks
        at = width - 4 * len(names)
        for i, name in enumerate(names):
            if name not in self._disks:
                if len(self._disks) >= self.max_disks:
                    continue
                self._disks.add(name)
            d = at + 4 * i
            aw = width + 1 + len(disk_at)
            disk_at.append(d + 1)
            cols[disk_key(name, "util")] = d
            if every:
                cols[disk_key(name, "aqu_sz")] = d + 3
                cols[disk_key(name, "await")] = aw
            else:
                cols[disk_key(name, "await")] = aw
                cols[disk_key(name, "aqu_sz")] = d + 3
