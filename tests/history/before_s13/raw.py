"""The raw tier held as matrices: one array a codec, a sample a row, a series a slot (issue 38).

A host's flush wrote ~62 series to the raw tier one by one: a dict entry, an encoded
``array`` and a slice assignment each (``Ring._write``), then the tier-1 cut read them back
one by one (``bucket_stats``: a slice each, joined).  Here each codec's series share one
``array`` whose rows are samples and whose columns (slots) are series, so a flush's block,
encoded as one matrix a codec (``Block.encoded``), is written with one numpy assignment a
codec, and the tier-1 cut reads a codec's rows as one matrix.  A series' values are a
strided slice of its codec's array (``RawCols``: ``cols[key][p0:p1]`` is an ``array`` of
the same type and bits as the per-series column held before), so the readers that slice a
column (``Ring.rows_many``, ``HistoryQueries._latest``, ``TierSet.build``) read as before.

A new series widens its codec's array by a slot, a series dropped (a process forgotten) is
cut out of it: rare (GPUs, processes or disks appearing, processes gone for minutes), and
the tier then holds what one column a series held, less each column's object header.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tests.history.before_s13.storage import Codec, Columns, Ring, size

DTYPES = {"H": np.uint16, "f": np.float32}
FLOATS: dict[str, Any] = {"e": np.float16, "f": np.float32}
BATCH_MIN = 4
"""Series of one codec read together from this many (``RawRing.rows_many``): fewer are read
one by one, as numpy's fixed cost is more than it saves (measured: 2 series of 120 rows,
4 of 30 or fewer)."""
"""The numpy type of a raw codec's values, by its typecode (``RawRing.rows_many``)."""
"""The numpy type of each raw codec's stored values (half precision is stored as its bits)."""


def widen(codec: Codec, stored: array[Any], w: int, idx: list[int]
          ) -> tuple[list[list[float]], list[bool]]:
    """The slots ``idx`` of rows of a float codec's matrix (``w`` slots a row) as lists of
    Python floats, a series each, and whether each holds a NaN (``RawRing.rows_many``)."""
    vals = np.frombuffer(stored, dtype=FLOATS[codec.typecode]).reshape(-1, w)[:, idx].T
    return vals.astype(np.float64).tolist(), np.isnan(vals).any(axis=1).tolist()


class RawCol:
    """One series of a ``RawRing`` as a column: ``col[p0:p1]`` is its values in physical rows
    ``[p0, p1)``, an ``array`` of its codec's store type (a strided slice, in C)."""

    __slots__ = ("_mat", "_slot", "_w")

    def __init__(self, mat: array[Any], slot: int, w: int) -> None:
        self._mat, self._slot, self._w = mat, slot, w

    def __getitem__(self, sl: slice) -> array[Any]:
        w = self._w
        start, stop, _ = sl.indices(len(self._mat) // w)
        if stop <= start:
            return self._mat[0:0]
        return self._mat[start * w + self._slot:stop * w:w]

    def __len__(self) -> int:
        return len(self._mat) // self._w

    @property
    def typecode(self) -> str:
        return self._mat.typecode

    def tobytes(self) -> bytes:
        """The whole column's stored bytes (as the per-series ``array`` held them)."""
        return self[:].tobytes()


class RawCols:
    """``Ring.cols`` of a ``RawRing``: each series' ``RawCol``, in the order the series were
    added; empty while the ring holds no row (as a ``Ring`` makes its columns lazily)."""

    __slots__ = ("_r",)

    def __init__(self, ring: RawRing) -> None:
        self._r = ring

    def get(self, key: str, default: RawCol | None = None) -> RawCol | None:
        r = self._r
        if not r.cap:
            return default
        codec = r.codecs.get(key)
        if codec is None:
            return default
        return RawCol(r.mats[codec], r.slots[key], r.widths[codec])

    def __getitem__(self, key: str) -> RawCol:
        got = self.get(key)
        if got is None:
            raise KeyError(key)
        return got

    def __contains__(self, key: object) -> bool:
        return bool(self._r.cap) and key in self._r.codecs

    def __iter__(self) -> Iterator[str]:
        return iter(self._r.codecs if self._r.cap else ())

    def __len__(self) -> int:
        return len(self._r.codecs) if self._r.cap else 0

    def __bool__(self) -> bool:
        return bool(len(self))

    def keys(self) -> list[str]:
        return list(self)

    def items(self) -> list[tuple[str, RawCol]]:
        r = self._r
        if not r.cap:
            return []
        mats, widths, slots = r.mats, r.widths, r.slots
        return [(key, RawCol(mats[c], slots[key], widths[c])) for key, c in r.codecs.items()]

    def values(self) -> list[RawCol]:
        return [c for _, c in self.items()]


Encoded = tuple[Codec, Sequence[str], "np.ndarray[Any, Any]"]
"""A block's series of one codec: the codec, their keys and their values encoded, a sample a
row and a series a column, in the codec's store type (``Block.encoded``)."""


class RawRing(Ring):
    """The raw tier's ring (``width`` 1, no counts) with a matrix a codec (module doc)."""

    def __init__(self, span_s: float) -> None:
        super().__init__(span_s, 1, False)
        self.cols = RawCols(self)  # type: ignore[assignment]
        self.mats: dict[Codec, array[Any]] = {}
        """Each codec's values: ``cap`` rows of ``widths[codec]`` slots."""
        self.widths: dict[Codec, int] = {}
        self.slots: dict[str, int] = {}
        """Each series' slot in its codec's array."""
        self.gen = 0
        """Bumped whenever a slot is taken or freed (a cached slot map is then stale)."""
        self._slot_maps: dict[int, tuple[int, Sequence[str], np.ndarray[Any, Any] | None]] = {}
        """A block's slots by its keys' tuple (``_slot_map``)."""

    def add_series(self, key: str, codec: Codec) -> None:
        """Hold series ``key``, all missing so far: a new last slot of its codec's array."""
        self.gen += 1
        w = self.widths.get(codec, 0)
        self.widths[codec] = w + 1
        if not self.cap:
            self.mats.setdefault(codec, array(codec.store))
        elif not w:
            self.mats[codec] = codec.fill * self.cap
        else:
            dt = DTYPES[codec.store]
            new = np.empty((self.cap, w + 1), dtype=dt)
            new[:, :w] = np.frombuffer(self.mats[codec], dtype=dt).reshape(self.cap, w)
            new[:, w] = np.frombuffer(codec.fill, dtype=dt)[0]
            self.mats[codec] = array(codec.store, new.tobytes())
        self.slots[key] = w
        self.codecs[key] = codec

    def add_many(self, keys: Sequence[str], codecs: Sequence[Codec]) -> None:
        """``add_series`` of each of ``keys`` (none held yet), in order: each codec's array
        widened once by all its new slots (a host's first flush adds ~62 series; a GPU
        appearing 12 or more), not once a series."""
        self.gen += 1
        by_codec: dict[Codec, list[str]] = {}
        for key, codec in zip(keys, codecs, strict=True):
            by_codec.setdefault(codec, []).append(key)
        cap = self.cap
        for codec, new in by_codec.items():
            w = self.widths.get(codec, 0)
            n = len(new)
            self.widths[codec] = w + n
            self.slots.update(zip(new, range(w, w + n), strict=True))
            if not cap:
                self.mats.setdefault(codec, array(codec.store))
            elif not w:
                self.mats[codec] = codec.fill * (cap * n)
            else:
                dt = DTYPES[codec.store]
                wide = np.empty((cap, w + n), dtype=dt)
                wide[:, :w] = np.frombuffer(self.mats[codec], dtype=dt).reshape(cap, w)
                wide[:, w:] = np.frombuffer(codec.fill, dtype=dt)[0]
                self.mats[codec] = array(codec.store, wide.tobytes())
        self.codecs.update(zip(keys, codecs, strict=True))

    def drop_series(self, key: str) -> None:
        """Forget ``key``: its slot is cut out of its codec's array (a process forgotten,
        rare), so the tier holds what a column a series held, less the columns' headers."""
        codec = self.codecs.pop(key, None)
        self.partial.pop(key, None)
        if codec is None:
            return
        self.gen += 1
        slot = self.slots.pop(key)
        w = self.widths[codec] - 1
        if not w:
            del self.widths[codec], self.mats[codec]
            return
        self.widths[codec] = w
        if self.cap:
            dt = DTYPES[codec.store]
            view = np.frombuffer(self.mats[codec], dtype=dt).reshape(self.cap, w + 1)
            kept = np.delete(view, slot, axis=1).tobytes()
            del view
            self.mats[codec] = array(codec.store, kept)
        codecs = self.codecs
        for k, s in self.slots.items():
            if s > slot and codecs[k] is codec:
                self.slots[k] = s - 1

    def _linearize(self) -> None:
        s = self.start
        if s == 0:
            return
        self.times[:] = self.times[s:] + self.times[:s]
        for codec, m in self.mats.items():
            w = s * self.widths[codec]
            m[:] = m[w:] + m[:w]
        self.start = 0

    def append(self, ts: Sequence[float], data: dict[str, array[Any]],
               counts: Sequence[int] = (), keep_from: float = math.inf,
               block: Sequence[Encoded] = ()) -> None:
        """``Ring.append``; ``block``: series written as matrices (``Encoded``), beside the
        series ``data`` holds one by one."""
        k = len(ts)
        cap = self.cap
        grow = self._evict_for(k, ts[-1], keep_from)
        if grow:
            # Concatenation allocates exactly; ``extend`` would leave ~6% slack.
            self.times = self.times + array("d", bytes(8 * grow))
            for codec, m in self.mats.items():
                self.mats[codec] = m + codec.fill * (grow * self.widths[codec])
            cap = self.cap
        pos = (self.start + self.n) % cap
        first = min(k, cap - pos)
        self._write_raw(pos, 0, first, ts, data, block)
        if first < k:
            self._write_raw(0, first, k, ts, data, block)
        self.n += k

    def _slot_map(self, codec: Codec, keys: Sequence[str]) -> np.ndarray[Any, Any] | None:
        """The slots of ``keys`` (None: slots ``0..len(keys)-1`` in order, all there are),
        kept while the ring's slots do not change (``keys``: a tuple a flush plan keeps)."""
        got = self._slot_maps.get(id(keys))
        if got is not None and got[0] == self.gen and got[1] is keys:
            return got[2]
        slots = self.slots
        idx = [slots[key] for key in keys]
        out: np.ndarray[Any, Any] | None = np.array(idx, dtype=np.intp)
        if len(idx) == self.widths[codec] and idx == list(range(len(idx))):
            out = None
        if isinstance(keys, tuple):
            maps = self._slot_maps
            if len(maps) >= 8 or any(g != self.gen for g, _, _ in maps.values()):
                maps.clear()  # only this generation's maps are of use (a host's plan or two)
            self._slot_maps[id(keys)] = (self.gen, keys, out)  # held: its id stays its
        return out

    def _write_raw(self, pos: int, a: int, b: int, ts: Sequence[float],
                   data: dict[str, array[Any]], block: Sequence[Encoded]) -> None:
        m = b - a
        whole = a == 0 and b == len(ts)
        self.times[pos:pos + m] = array("d", ts) if whole else array("d", ts[a:b])
        cap = self.cap
        done: dict[Codec, int] = {}
        for codec, keys, enc in block:
            w = self.widths[codec]
            view = np.frombuffer(self.mats[codec], dtype=DTYPES[codec.store]).reshape(cap, w)
            idx = self._slot_map(codec, keys)
            if idx is None:
                view[pos:pos + m] = enc[a:b]
            else:
                if len(keys) < w:
                    view[pos:pos + m] = np.frombuffer(codec.fill, dtype=view.dtype)[0]
                view[pos:pos + m, idx] = enc[a:b]
            done[codec] = len(keys)
            del view
        slots = self.slots
        for key, got in data.items():
            codec = self.codecs[key]
            w = self.widths[codec]
            self.mats[codec][pos * w + slots[key]:(pos + m) * w:w] = \
                got if whole else got[a:b]
        # Series written by neither: missing values (a block's codec filled its rows whole).
        if len(data) + sum(done.values()) < len(self.codecs):
            for key, codec in self.codecs.items():
                if key not in data and codec not in done:
                    w = self.widths[codec]
                    self.mats[codec][pos * w + slots[key]:(pos + m) * w:w] = codec.fill * m

    def rows_many(self, keys: Sequence[str], since: float, until: float,
                  outs: list[Columns]) -> None:
        """``Ring.rows_many`` read a codec at a time: a segment's rows of the codec's matrix
        copied once, the keys' slots taken together, widened to float64 and listed in one
        numpy call (issue 38, session 11: a detector reads one field of every GPU; a
        series a ``struct.unpack``, a NaN scan and five extends was half its windows'
        cost).  Half and single precision widen to float64 exactly, as ``struct`` and
        ``array`` give them; a series with a missing value (NaN) in the segment drops
        those points as before."""
        if len(keys) < BATCH_MIN:
            super().rows_many(keys, since, until, outs)
            return
        if not self.n:
            return
        segs = self.segments(self.bisect(since), self.bisect(until))
        if not segs:
            return
        times = [self.times[p0:p1] for p0, p1 in segs]
        codecs, slots = self.codecs, self.slots
        groups: dict[Codec, tuple[list[int], list[Columns], list[str]]] = {}
        for key, out in zip(keys, outs, strict=True):
            codec = codecs.get(key)
            if codec is None:
                continue
            g = groups.get(codec)
            if g is None:
                g = groups[codec] = ([], [], [])
            g[0].append(slots[key])
            g[1].append(out)
            g[2].append(key)
        for codec, (idx, gouts, gkeys) in [*groups.items()]:
            if len(idx) < BATCH_MIN or codec.typecode not in FLOATS:
                del groups[codec]  # numpy's fixed cost would be more than it saves
                for key, out in zip(gkeys, gouts, strict=True):
                    self._rows_of(key, self.cols[key], segs, times, out)
        for (p0, p1), t in zip(segs, times, strict=True):
            for codec, (idx, gouts, _) in groups.items():
                w = self.widths[codec]
                got, bad = widen(codec, self.mats[codec][p0 * w:p1 * w], w, idx)
                for v, nan, out in zip(got, bad, gouts, strict=True):
                    out.extend_raw(t, v, nan)

    def matrix(self, codec: Codec, segs: Sequence[tuple[int, int]]
               ) -> tuple[list[str], np.ndarray[Any, Any]]:
        """Every series of ``codec`` over the physical rows ``segs``: their keys and their
        stored values, a series a row (``bucket_cut.bucket_stats``)."""
        keys = [key for key, c in self.codecs.items() if c is codec]
        w = self.widths[codec]
        view = np.frombuffer(self.mats[codec], dtype=DTYPES[codec.store]).reshape(self.cap, w)
        rows = view[segs[0][0]:segs[0][1]] if len(segs) == 1 else np.concatenate(
            [view[p0:p1] for p0, p1 in segs])
        slots = self.slots
        return keys, rows[:, [slots[key] for key in keys]].T

    def nbytes(self) -> int:
        if not self.cap:
            return size(self.times)
        return size(self.times) + sum(size(m) for m in self.mats.values())
