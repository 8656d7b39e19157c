"""Domain-free storage for the history: codecs, ring-indexed columns and step series.

Nothing here knows what a GPU is: a series is a key, a codec and a column per tier.  Which
field is kept how (``keys.py``) and when buckets are cut (``tiers.py``) live beside it.
"""

from __future__ import annotations

import itertools
import math
import struct
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress
from typing import Any, NamedTuple

import numpy as np

NAN = math.nan


class Tier(NamedTuple):
    """One level of the history: buckets of ``resolution_s`` kept for ``span_s``.

    The first tier's resolution is nominal: it keeps raw samples at whatever interval they come.
    """

    resolution_s: float
    span_s: float


class Point(NamedTuple):
    """One point of a series: a raw value (lo == hi == mean, n == 1) or a bucket."""

    t: float
    """Sample time, or the bucket's start."""
    lo: float
    hi: float
    mean: float
    n: int


class Columns(NamedTuple):
    """A query's points as parallel lists, for detectors that avoid a tuple per point."""

    t: list[float]
    lo: list[float]
    hi: list[float]
    mean: list[float]
    n: list[int]

    def points(self) -> tuple[Point, ...]:
        """The same data as ``Point`` tuples."""
        return tuple(map(Point, self.t, self.lo, self.hi, self.mean, self.n))

    def extend_raw(self, t: Sequence[float], v: Sequence[float], nan: bool) -> None:
        """Raw samples at times ``t`` as points (one sample each: low, high and mean its
        value); where ``nan`` says some are NaN (a value the sample did not have), those
        points are left out, as every raw read leaves them."""
        if nan:
            keep = [x == x for x in v]
            t = array("d", compress(t, keep))
            v = list(compress(v, keep))
        self.t.extend(t)
        self.lo.extend(v)
        self.hi.extend(v)
        self.mean.extend(v)
        self.n.extend(itertools.repeat(1, len(t)))


class Codec:
    """How a series is stored in one tier.

    ``f``: float32.  ``e``: IEEE half precision (3 significant digits, up to 65504; packed
    by ``struct`` in C, so the raw tier's writes cost no Python per value).  ``B``/``H``:
    scaled unsigned integers for the coarse tiers, whose largest value means "missing" and
    which saturate just below it.
    """

    __slots__ = ("fill", "scale", "sentinel", "store", "top", "typecode")

    def __init__(self, typecode: str, scale: float = 0.0) -> None:
        self.typecode = typecode
        self.scale = scale
        self.store = "H" if typecode == "e" else typecode
        """The ``array`` typecode holding the values."""
        self.sentinel: float = {"B": 255, "H": 65535, "f": NAN, "e": 0x7E00}[typecode]
        self.top = self.sentinel - 1
        self.fill: array[Any] = array(self.store, [self.sentinel])
        """One missing value, to multiply into a run of them."""

    def encode(self, vals: Sequence[float]) -> array[Any]:
        """Encode floats (NaN: missing)."""
        tc = self.typecode
        if tc == "f":
            return array("f", vals)
        if tc == "e":
            out = array("H")
            try:
                out.frombytes(struct.pack(f"{len(vals)}e", *vals))
            except OverflowError:
                out.frombytes(struct.pack(f"{len(vals)}e", *[
                    v if v != v else min(HALF_MAX, max(-HALF_MAX, v)) for v in vals]))
            return out
        sc = self.scale
        if vals:
            s = sum(vals)
            if s == s and min(vals) >= 0.0 and max(vals) * sc + 0.5 < self.top:
                return array(tc, [int(v * sc + 0.5) for v in vals])
        top = self.top
        sent = int(self.sentinel)
        return array(tc, [
            sent if v != v else int(min(top, max(0.0, v * sc + 0.5))) for v in vals])

    def decode(self, vals: array[Any]) -> Sequence[float]:
        tc = self.typecode
        if tc == "f":
            return vals
        if tc == "e":
            return struct.unpack(f"{len(vals)}e", vals.tobytes())
        sc = self.scale
        sent = self.sentinel
        if sent in vals:
            return [NAN if v == sent else v / sc for v in vals]
        return [v / sc for v in vals]


_INT_DTYPES: dict[str, Any] = {"B": np.uint8, "H": np.uint16}
"""The numpy type of an integer codec's stored values (``Ring._rows_batched``)."""

def decode_group(codec: Codec, stored: list[array[Any]]
                 ) -> tuple[list[bool], list[list[float]], list[list[float]], list[list[float]]]:
    """Bucket rows (lo, hi, mean interleaved) of several series of one integer codec, the
    same number of rows each: for each series whether it holds a missing value (its rows
    are then to be read by ``Codec.decode``), and its lows, highs and means decoded."""
    mat = np.frombuffer(b"".join(stored), dtype=_INT_DTYPES[codec.typecode]
                        ).reshape(len(stored), -1, 3)
    bad = (mat == codec.sentinel).any(axis=(1, 2)).tolist()
    lo, hi, mean = (mat / codec.scale).transpose(2, 0, 1).tolist()
    return bad, lo, hi, mean


HALF_MAX = 65504.0
"""The largest finite half-precision value; larger raw values saturate to it."""
F32 = Codec("f")
HALF = Codec("e")
PCT = Codec("B", 2.0)
"""0–127 in half steps: utilisation, temperature, %util."""


class Ring:
    """One tier's columns: a time column and per-series value columns, all ring-indexed alike.

    Grows by appending until the oldest row is older than the span, then overwrites the oldest.
    A series stores ``width`` values a row, interleaved in one column (1 raw; lo, hi, mean for
    buckets), so a write is one slice assignment per series.
    """

    def __init__(self, span_s: float, width: int, counted: bool) -> None:
        self.span = span_s
        self.width = width
        self.times = array("d")
        self.counts: array[Any] | None = array("H") if counted else None
        self.cols: dict[str, array[Any]] = {}
        self.codecs: dict[str, Codec] = {}
        self.partial: dict[str, dict[float, int]] = {}
        """Per series, buckets where it had fewer values than the bucket had samples."""
        self.start = 0
        self.n = 0

    @property
    def cap(self) -> int:
        return len(self.times)

    def add_series(self, key: str, codec: Codec) -> None:
        """Hold series ``key``; its column is made when the ring has rows to give it (a
        coarse tier stays empty for minutes, and an empty column per series costs a host
        ~12 KB across its tiers: issue 38)."""
        if self.cap:
            self.cols[key] = codec.fill * (self.cap * self.width)
        self.codecs[key] = codec

    def add_many(self, keys: Sequence[str], codecs: Sequence[Codec]) -> None:
        """``add_series`` of each of ``keys`` (none held yet), in order."""
        if self.cap:
            n = self.cap * self.width
            self.cols.update((key, codec.fill * n) for key, codec in zip(keys, codecs,
                                                                         strict=True))
        self.codecs.update(zip(keys, codecs, strict=True))

    def drop_series(self, key: str) -> None:
        self.cols.pop(key, None)
        self.codecs.pop(key, None)
        self.partial.pop(key, None)

    def _linearize(self) -> None:
        s = self.start
        if s == 0:
            return
        self.times[:] = self.times[s:] + self.times[:s]
        if self.counts is not None:
            self.counts[:] = self.counts[s:] + self.counts[:s]
        w = s * self.width
        for c in self.cols.values():
            c[:] = c[w:] + c[:w]
        self.start = 0

    def _evict_for(self, k: int, newest: float, keep_from: float) -> int:
        """Make room for ``k`` rows ending at ``newest``: drop the oldest rows that are past
        the span (and before ``keep_from``) while the ring is full; returns how many slots
        it must still grow by (the ring linearized first when it must)."""
        cap = self.cap
        times = self.times
        oldest_ok = min(newest - self.span, keep_from)
        while self.n and times[self.start] < oldest_ok and self.n + k > cap:
            self.start = (self.start + 1) % cap
            self.n -= 1
        if self.n + k <= cap:
            return 0
        self._linearize()
        return self.n + k - cap

    def append(self, ts: Sequence[float], data: dict[str, array[Any]],
               counts: Sequence[int] = (), keep_from: float = math.inf) -> None:
        """Append rows (times ascending, after the newest); ``data`` holds ``width`` values
        a row per series; series absent from it get missing values.

        Rows at or after ``keep_from`` are never overwritten, however old: the raw tier
        keeps what coarse buckets have not yet been built from (sparse samples, minutes
        apart, would otherwise age out of a short raw span before they are read).
        """
        k = len(ts)
        cap = self.cap
        grow = self._evict_for(k, ts[-1], keep_from)
        if grow:
            # Concatenation allocates exactly; ``extend`` would leave ~6% slack in every column.
            self.times = self.times + array("d", bytes(8 * grow))
            if self.counts is not None:
                self.counts = self.counts + array("H", bytes(2 * grow))
            if self.n:
                for key, c in self.cols.items():
                    self.cols[key] = c + self.codecs[key].fill * (grow * self.width)
            else:  # the columns are made now, as long as the rows they hold: the rows
                # written (start 0, every row: ``_evict_for`` linearized), each series'
                # encoded values taken as its column, not a column of missing values
                # written over (a host's first bucket in each tier: session 12)
                self.cols = self._first_cols(k, data)
                self._write(0, 0, k, ts, {}, counts, cols=False)
                self.n += k
                return
            cap = self.cap
        pos = (self.start + self.n) % cap
        first = min(k, cap - pos)
        self._write(pos, 0, first, ts, data, counts)
        if first < k:
            self._write(0, first, k, ts, data, counts)
        self.n += k

    def _first_cols(self, k: int, data: dict[str, array[Any]]) -> dict[str, array[Any]]:
        """Every series' column of an empty ring taking ``k`` rows: its values in ``data``
        (the caller's fresh array, taken as it is: as long as ``k`` rows, of the column's
        type), else missing values; in the order of ``codecs``, as the columns made
        missing and then written were."""
        n = k * self.width
        out: dict[str, array[Any]] = {}
        for key, codec in self.codecs.items():
            got = data.get(key)
            if got is None:
                out[key] = codec.fill * n
            elif len(got) == n and got.typecode == codec.store:
                out[key] = got
            else:  # not the column's length or type: written as ``_write`` writes
                col = out[key] = codec.fill * n
                col[0:n] = got
        return out

    def _write(self, pos: int, a: int, b: int, ts: Sequence[float],
               data: dict[str, array[Any]], counts: Sequence[int], cols: bool = True) -> None:
        m = b - a
        w = self.width
        whole = a == 0 and b == len(ts)
        self.times[pos:pos + m] = array("d", ts) if whole else array("d", ts[a:b])
        if self.counts is not None:
            self.counts[pos:pos + m] = array("H", [min(c, 65535) for c in counts[a:b]])
        if not cols:
            return
        p0, p1 = pos * w, (pos + m) * w
        for key, c in self.cols.items():
            got = data.get(key)
            if got is None:
                c[p0:p1] = self.codecs[key].fill * (m * w)
            else:
                c[p0:p1] = got if whole else got[a * w:b * w]

    # -- reading

    def oldest(self) -> float | None:
        return self.times[self.start] if self.n else None

    def newest(self) -> float | None:
        return self.times[(self.start + self.n - 1) % self.cap] if self.n else None

    def segments(self, i0: int, i1: int) -> list[tuple[int, int]]:
        """Logical rows [i0, i1) as physical slices."""
        if i1 <= i0:
            return []
        cap = self.cap
        p0 = (self.start + i0) % cap
        p1 = p0 + (i1 - i0)
        if p1 <= cap:
            return [(p0, p1)]
        return [(p0, cap), (0, p1 - cap)]

    def bisect(self, t: float) -> int:
        """Logical index of the first row with time >= t."""
        s, n, cap = self.start, self.n, self.cap
        if s + n <= cap:
            return bisect_left(self.times, t, s, s + n) - s
        if self.times[cap - 1] >= t:
            return bisect_left(self.times, t, s, cap) - s
        return cap - s + bisect_left(self.times, t, 0, s + n - cap)

    def rows(self, key: str, since: float, until: float, out: Columns) -> None:
        """Append the series' rows with since <= t < until (``until`` exclusive) to ``out``."""
        self.rows_many((key,), since, until, [out])

    def rows_many(self, keys: Sequence[str], since: float, until: float,
                  outs: list[Columns]) -> None:
        """``rows`` of each key into its ``outs``: the rows in range found once."""
        if not self.n:
            return
        segs = self.segments(self.bisect(since), self.bisect(until))
        if not segs:
            return
        times = [self.times[p0:p1] for p0, p1 in segs]
        if self.width == 3 and len(keys) > 1:
            self._rows_batched(keys, segs, times, outs)
            return
        for key, out in zip(keys, outs, strict=True):
            c = self.cols.get(key)
            if c is not None:
                self._rows_of(key, c, segs, times, out)

    def _rows_batched(self, keys: Sequence[str], segs: list[tuple[int, int]],
                      times: list[array[float]], outs: list[Columns]) -> None:
        """``_rows_of`` of each key, the integer codecs' keys decoded together: a segment's
        stored values of one codec's keys joined into one matrix, divided by the scale and
        listed in one numpy call each (issue 38, session 11: a detector reads one field of
        every GPU, and decoding ~40 buckets × 3 a series one by one in Python was most of
        its windows' cost).  ``v / scale`` of a ``uint8``/``uint16`` in float64 is Python's
        ``int / float``, bit for bit.  A key with a missing value (the sentinel) in the
        segment, or partial counts, or a float codec, is read as before (``_rows_of``)."""
        cols, codecs, partial = self.cols, self.codecs, self.partial
        groups: dict[Codec, list[tuple[str, array[Any], Columns]]] = {}
        for key, out in zip(keys, outs, strict=True):
            c = cols.get(key)
            if c is None:
                continue
            codec = codecs[key]
            if codec.typecode in _INT_DTYPES and not partial.get(key):
                groups.setdefault(codec, []).append((key, c, out))
            else:
                self._rows_of(key, c, segs, times, out)
        for codec, group in [*groups.items()]:
            if len(group) < 2:  # one series: numpy's fixed cost is more than it saves
                del groups[codec]
                for key, c, out in group:
                    self._rows_of(key, c, segs, times, out)
        if not groups:
            return
        assert self.counts is not None
        for (p0, p1), t in zip(segs, times, strict=True):
            counts = self.counts[p0:p1]
            a, b = 3 * p0, 3 * p1
            for codec, group in groups.items():
                bad, lo, hi, mean = decode_group(codec, [c[a:b] for _, c, _ in group])
                for i, (key, c, out) in enumerate(group):
                    if bad[i]:
                        self._rows_of(key, c, [(p0, p1)], [t], out)
                        continue
                    out.t.extend(t)
                    out.lo.extend(lo[i])
                    out.hi.extend(hi[i])
                    out.mean.extend(mean[i])
                    out.n.extend(counts)

    def _rows_of(self, key: str, c: array[Any], segs: list[tuple[int, int]],
                 times: list[array[float]], out: Columns) -> None:
        codec = self.codecs[key]
        partial = self.partial.get(key)
        for (p0, p1), t in zip(segs, times, strict=True):
            if self.width == 1:
                v = codec.decode(c[p0:p1])
                out.extend_raw(t, v, any(map(math.isnan, v)))
                continue
            assert self.counts is not None
            vals = codec.decode(c[3 * p0:3 * p1])
            lo, hi, mean = vals[0::3], vals[1::3], vals[2::3]
            counts: Sequence[int] = self.counts[p0:p1]
            if partial:
                counts = [partial.get(ti, ci) for ti, ci in zip(t, counts, strict=True)]
            if any(map(math.isnan, mean)):
                keep = [m == m for m in mean]
                t, lo, hi, mean, counts = (list(compress(col, keep))  # type: ignore[assignment]
                                           for col in (t, lo, hi, mean, counts))
            out.t.extend(t)
            out.lo.extend(lo)
            out.hi.extend(hi)
            out.mean.extend(mean)
            out.n.extend(counts)

    def prune_partial(self) -> None:
        old = self.oldest()
        if old is None:
            return
        for key, d in self.partial.items():
            if len(d) > 64:
                self.partial[key] = {t: n for t, n in d.items() if t >= old}

    def nbytes(self) -> int:
        total = size(self.times) + (size(self.counts) if self.counts is not None else 0)
        return total + sum(size(c) for c in self.cols.values())


def size(a: array[Any]) -> int:
    """Bytes an array holds, with its object header."""
    return a.buffer_info()[1] * a.itemsize + 64


class StepSeries:
    """A value that changes rarely, kept as (time, value) at each change.

    Bounded: after ``max_changes`` changes the oldest are dropped; the first value seen, the
    peak and the total increase (for counters) are kept regardless.  A host has ~90 of them,
    most never changing after their first value, so each is small (issue 38): slotted, one
    array of interleaved time and value (allocated at its first change, exactly), and the
    first value and the peak read from it until changes are dropped (``_dropped`` then keeps
    what the dropped ones held).  Two arrays, a ``first`` tuple and a peak object cost ~420
    bytes a series, ~37 KB a host.
    """

    __slots__ = ("_dropped", "_max", "_tv", "first_increase_ts", "increase_total")

    _NONE: array[float] = array("d")
    """Shared by series with no change yet; never written (``record`` replaces it)."""

    def __init__(self, max_changes: int = 512) -> None:
        self._tv = self._NONE
        """Times and values of the kept changes, interleaved: t0, v0, t1, v1, ..."""
        self._max = max_changes
        self._dropped: tuple[float, float, float] | None = None
        """Once changes were dropped: the first (time, value) seen and the peak among
        the dropped values."""
        self.increase_total = 0.0
        """Sum of the rises between consecutive values (a counter's growth, resets ignored)."""
        self.first_increase_ts: float | None = None

    @property
    def first(self) -> tuple[float, float] | None:
        """The first (time, value) seen this run."""
        if self._dropped is not None:
            return self._dropped[0], self._dropped[1]
        tv = self._tv
        return (tv[0], tv[1]) if tv else None

    @property
    def peak(self) -> float | None:
        """The largest value seen (as ``max`` folds them: a leading NaN stays)."""
        vals = self._tv[1::2]
        if self._dropped is not None:
            return max(self._dropped[2], *vals) if vals else self._dropped[2]
        return max(vals) if vals else None

    def record(self, t: float, v: float) -> None:
        """Note the value at sample time ``t``; stored only if it changed."""
        tv = self._tv
        if not tv:
            self._tv = array("d", (t, v))
            return
        last = tv[-1]
        if last == v:
            return
        if v > last:
            self.increase_total += v - last
            if self.first_increase_ts is None:
                self.first_increase_ts = t
        if len(tv) >= 2 * self._max:
            drop = max(1, self._max // 8)
            gone = tv[1:2 * drop:2]
            kept = self._dropped
            if kept is None:
                self._dropped = (tv[0], tv[1], max(gone))
            else:
                self._dropped = (kept[0], kept[1], max(kept[2], *gone))
            del tv[:2 * drop]
        tv.append(t)
        tv.append(v)

    def _bisect(self, t: float, right: bool) -> int:
        """Index (in changes) of the first change after ``t`` (``right``) or at or after it."""
        tv = self._tv
        lo, hi = 0, len(tv) // 2
        while lo < hi:  # ``bisect_right`` / ``bisect_left``'s own comparisons
            mid = (lo + hi) // 2
            if (not t < tv[2 * mid]) if right else tv[2 * mid] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def latest(self) -> Point | None:
        """The current value, at the time it took that value."""
        tv = self._tv
        if not tv:
            return None
        v = tv[-1]
        return Point(tv[-2], v, v, v, 1)

    def value_at(self, t: float) -> float | None:
        """The value in force at ``t`` (None before the first kept change)."""
        i = self._bisect(t, True)
        return self._tv[2 * i - 1] if i else None

    def changes(self, since: float | None = None) -> list[tuple[float, float]]:
        """(time, new value) of the kept changes at or after ``since``."""
        i = 0 if since is None else 2 * self._bisect(since, False)
        tv = self._tv
        return list(zip(tv[i::2], tv[i + 1::2], strict=True))

    def segments(self, since: float, until: float) -> list[tuple[float, float, float]]:
        """(start, end, value) pieces covering [since, until] where a value is known."""
        out: list[tuple[float, float, float]] = []
        tv = self._tv
        n = len(tv) // 2
        i = self._bisect(since, True)
        cur = tv[2 * i - 1] if i else None
        t0 = since
        while i < n and tv[2 * i] < until:
            if cur is not None and tv[2 * i] > t0:
                out.append((t0, tv[2 * i], cur))
            t0, cur = tv[2 * i], tv[2 * i + 1]
            i += 1
        if cur is not None and until > t0:
            out.append((t0, until, cur))
        return out

    def points(self, since: float | None = None, until: float | None = None,
               max_points: int | None = None) -> tuple[Point, ...]:
        """The changes in range, led by the value held at ``since``; ``max_points`` keeps the
        newest."""
        lo = -math.inf if since is None else since
        hi = math.inf if until is None else until
        out = [Point(t, v, v, v, 1) for t, v in self.changes(since) if t <= hi]
        held = self.value_at(lo) if since is not None else None
        if held is not None and (not out or out[0].t > lo):
            out.insert(0, Point(lo, held, held, held, 1))
        if max_points is not None and len(out) > max_points:
            out = out[-max_points:]
        return tuple(out)

    def nbytes(self) -> int:
        return size(self._tv) + 80
