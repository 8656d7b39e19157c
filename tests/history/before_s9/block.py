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

from tests.history.before_s9.keys import GPU_FIELDS, codec_for, disk_key, gpu_key, host_key
from tests.history.before_s9.staged import GPU_NUMBERS, HOST_NUMBERS, Staged
from tests.history.before_s9.storage import F32, HALF, HALF_MAX

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
    """Staged samples as one matrix and where each series sits in it."""

    flat: array[float]
    """The samples' numbers, one after the other (NaN: missing)."""
    width: int
    """Numbers a sample."""
    cols: dict[str, int | list[float]]
    """Each series: its column in ``flat``, or its values where they are computed (a disk's
    await, the GPUs answering); in the order the series are first written."""

    def columns(self) -> dict[str, Sequence[float]]:
        """Each series' values: a strided slice of ``flat`` (an ``array('d')``, which the
        raw tier's codecs encode as they encode a list: ``struct.pack`` and ``array('f')``
        take it as it is), or the values computed."""
        flat, width = self.flat, self.width
        return {key: c if isinstance(c, list) else flat[c::width]
                for key, c in self.cols.items()}

    def encoded(self) -> tuple[dict[str, Sequence[float]], dict[str, array[Any]]]:
        """The block as the raw tier's codecs encode it, the matrix's columns encoded at
        once: ``(values, encoded)``, ``values`` every series in order (the computed ones'
        values; ``()`` for those in ``encoded``), ``encoded`` each matrix series' column as
        its raw codec writes it (``TierSet.append_raw``).

        One cast a codec for the whole block (half precision, float32) instead of a
        ``struct.pack`` or an ``array('f')`` a series; the same bits: numpy rounds a double
        to half precision as ``struct`` does (to nearest, ties to even, subnormals too), and
        a column with a finite value that does not fit (``struct`` refuses it; an infinity
        it packs) is clamped to ±``HALF_MAX`` first, as ``Codec.encode`` then does.
        """
        flat, width = self.flat, self.width
        values: dict[str, Sequence[float]] = {}
        half: list[str] = []
        half_at: list[int] = []
        single: list[str] = []
        single_at: list[int] = []
        f32 = _RAW_F32
        for key, c in self.cols.items():
            if isinstance(c, list):
                values[key] = c
                continue
            values[key] = ()
            is32 = f32.get(key)
            if is32 is None:
                is32 = _raw_f32(key)
            if is32:
                single.append(key)
                single_at.append(c)
            else:
                half.append(key)
                half_at.append(c)
        mat = np.frombuffer(flat, dtype=np.float64).reshape(-1, width)
        rows = mat.shape[0]
        encoded: dict[str, array[Any]] = {}
        if half:
            sub = mat[:, half_at]
            with np.errstate(over="ignore"):
                h = sub.astype(np.float16)
            over = (np.isinf(h) & np.isfinite(sub)).any(axis=0)  # struct packs inf
            if over.any():
                cols = np.flatnonzero(over)
                h[:, cols] = np.clip(sub[:, cols], -HALF_MAX, HALF_MAX).astype(np.float16)
            # One array for every series, cut a series at a time (a slice copies in C).
            halves = array("H", np.ascontiguousarray(h.T).tobytes())
            for i, key in enumerate(half):
                encoded[key] = halves[i * rows:(i + 1) * rows]
        if single:
            with np.errstate(over="ignore"):
                singles = array("f", np.ascontiguousarray(
                    mat[:, single_at].astype(np.float32).T).tobytes())
            for i, key in enumerate(single):
                encoded[key] = singles[i * rows:(i + 1) * rows]
        return values, encoded


class BlockCut:
    """``HostHistory``'s block cut (its state is the history's)."""

    _gkeys: dict[int, tuple[str, ...]]
    _disks: set[str]
    max_disks: int
    _staged_counts: list[float]

    def _track_proc(self, gpu: int, pid: int, ts: float) -> str | None:
        raise NotImplementedError

    def _block_columns(self, rows: list[Staged]) -> Block | None:
        """The block of ``rows``, or None where they are not alike (or list a pid or a disk
        twice)."""
        r0 = rows[0]
        layout, pids, names = r0.layout, r0.pids, r0.disk_names
        for r in rows:
            if (r.layout != layout or (r.pids is not pids and r.pids != pids)
                    or r.disk_names != names):
                return None
        if len(set(names)) < len(names):
            return None
        for ps in pids:
            if ps is not None and len(set(ps)) < len(ps):
                return None
        width = len(r0.numbers)
        flat = array("d")
        flat.frombytes(b"".join(r.numbers for r in rows))
        cols: dict[str, int | list[float]] = {}
        procs: dict[str, int | list[float]] = {}
        ts_last = rows[-1].ts
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
        cols[host_key("gpu_count")] = self._staged_counts
        if names:
            self._block_disks(flat, width, names, cols)
        cols.update(procs)
        return Block(flat, width, cols)

    def _block_disks(self, flat: array[float], width: int, names: tuple[str, ...],
                     cols: dict[str, int | list[float]]) -> None:
        """The disks' series of a block, as ``HostHistory._disk_columns`` orders them."""
        every = len(self._disks | set(names)) <= self.max_disks
        at = width - 4 * len(names)
        for i, name in enumerate(names):
            if name not in self._disks:
                if len(self._disks) >= self.max_disks:
                    continue
                self._disks.add(name)
            d = at + 4 * i
            ra, wa = flat[d + 1::width].tolist(), flat[d + 2::width].tolist()
            s = sum(ra) + sum(wa)
            if s == s:  # no NaN (None)
                aw = list(map(max, ra, wa))
            else:  # the worse of the two, or the one known
                aw = [r if w != w else (w if r != r else max(r, w))
                      for r, w in zip(ra, wa, strict=True)]
            cols[disk_key(name, "util")] = d
            if every:
                cols[disk_key(name, "aqu_sz")] = d + 3
                cols[disk_key(name, "await")] = aw
            else:
                cols[disk_key(name, "await")] = aw
                cols[disk_key(name, "aqu_sz")] = d + 3
