"""Per-host time series kept in tiers, so a soak run of any length stays in bounded memory.

The finest tier holds every sample as it came (1 Hz, 10 s, whatever the agent sends) for its
span; each coarser tier holds buckets of ``resolution_s`` with min, max, mean and count, so a
spike survives downsampling.  Values live in ``array`` columns (one per series per tier,
aligned with one time column per tier) with ring indexing and narrow encodings: a GPU's
utilisation is one byte a point, not a Python float.

Adding a sample only stages it; every ``STAGE_MAX`` samples (or ``STAGE_MAX_S`` seconds)
the staged samples are cut into columns in one pass, and every ``BUCKET_BATCH`` tier-1
buckets those are read back from the raw tier into buckets.  Per-series costs are thus paid
once per batch, not per sample.  Queries stitch the raw tier and the staged samples onto the
coarse tiers, so nothing a caller sees lags.

Counters and settings that rarely change (ECC counts, link width, clock-event reasons) are
kept as step series: one entry per change, not per sample.
"""

from __future__ import annotations

import itertools
import math
import operator
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, compress
from operator import attrgetter
from typing import Any, NamedTuple

from probes.wire.samples import DiskStats, GpuSample, GpuState, HostSample

NAN = math.nan
STAGE_MAX = 16
"""Samples staged before they are written to the raw tier.  A decoded 8-GPU sample is ~20 KB,
so this bounds what staging holds per host (~0.3 MB); below it, per-series costs grow."""
STAGE_MAX_S = 60.0
"""…or once the staged samples span this long (slow agents)."""
BUCKET_BATCH = 10
"""Tier-1 buckets written at a time (at most; a divisor of a tier-2 bucket)."""


class Tier(NamedTuple):
    """One level of the history: buckets of ``resolution_s`` kept for ``span_s``.

    The first tier's resolution is nominal: it keeps raw samples at whatever interval they come.
    """

    resolution_s: float
    span_s: float


DEFAULT_TIERS: tuple[Tier, ...] = (Tier(1.0, 2 * 3600.0), Tier(15.0, 12 * 3600.0),
                                   Tier(300.0, 30 * 86400.0))
"""Raw for 2 h, 15 s buckets for 12 h, 5 min buckets for 30 days.

Each tier is as long as a chart needs it: the 6 h window on a 160-column terminal draws a
point per 67 s, which needs the 15 s buckets, while the 24 h window draws one per 270 s,
which the 5 min buckets match.  The 15 s tier is most of a soak's memory (about 1.3 MB an
8-GPU host for 12 h, ``bench_memory_soak.py``); at two days, as first built, a 64-host
console still grew by 7 MB an hour at 24 h, on its way to about 550 MB."""


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


# ------------------------------------------------------------------------------- keys

GPU_FIELDS = ("mem_used_mib", "util_pct", "temp_c", "power_w", "sm_clock_mhz")
"""Dense per-GPU series (a value every sample)."""
GPU_STEP_FIELDS = ("state", "clock_reasons", "ecc_corrected_volatile",
                   "ecc_uncorrected_volatile", "remap_correctable", "remap_uncorrectable",
                   "pcie_width", "pcie_gen", "power_limit_w", "sm_clock_max_mhz",
                   "mem_total_mib")
"""Per-GPU step series: recorded on change only.  ``clock_reasons`` is a ``REASON_BITS``
mask, ``state`` a ``STATE_CODES`` code."""
HOST_FIELDS = ("cpu_pct", "mem_used_bytes", "swap_in_pages_s", "swap_out_pages_s", "gpu_count")
"""``gpu_count`` counts the GPUs that answered (state ok) in a sample."""
DISK_FIELDS = ("util", "await", "aqu_sz")
"""``await`` is the worse of ``r_await`` and ``w_await`` (ms)."""

REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4,
               "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal_slowdown": 0x20,
               "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
               "display_clock_setting": 0x100}
"""NVML's clock-event bits by the names the agent sends; unknown names map to ``0x8000``."""
REASON_OTHER = 0x8000
STATE_CODES = {GpuState.OK: 0, GpuState.UNKNOWN: 1, GpuState.UNRESPONSIVE: 2, GpuState.LOST: 3}


def gpu_key(index: int, field: str) -> str:
    """The key of a per-GPU series (``GPU_FIELDS`` or ``GPU_STEP_FIELDS``)."""
    return f"gpu/{index}/{field}"


def host_key(field: str) -> str:
    """The key of a host series (``HOST_FIELDS``)."""
    return f"host/{field}"


def disk_key(name: str, field: str) -> str:
    """The key of a disk series (``DISK_FIELDS``)."""
    return f"disk/{name}/{field}"


def proc_key(gpu: int, pid: int) -> str:
    """The key of a process's GPU memory (MiB) on one GPU."""
    return f"proc/{gpu}/{pid}/used_mib"


def reason_mask(reasons: Iterable[str]) -> int:
    """Clock-event reason names as a ``REASON_BITS`` mask."""
    mask = 0
    for r in reasons:
        mask |= REASON_BITS.get(r, REASON_OTHER)
    return mask


# ------------------------------------------------------------------------------- codecs

class _Codec:
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


HALF_MAX = 65504.0
_F32 = _Codec("f")
_HALF = _Codec("e")
_PCT = _Codec("B", 2.0)
"""0–127 in half steps: utilisation, temperature, %util."""
_COARSE = {"mem_used_mib": _F32, "util_pct": _PCT, "temp_c": _PCT, "power_w": _Codec("H", 10.0),
           "sm_clock_mhz": _Codec("H", 1.0), "cpu_pct": _PCT, "mem_used_bytes": _F32,
           "swap_in_pages_s": _HALF, "swap_out_pages_s": _HALF, "gpu_count": _Codec("B", 1.0),
           "util": _PCT, "await": _HALF, "aqu_sz": _HALF, "used_mib": _F32}
_RAW_F32 = frozenset({"mem_used_mib", "mem_used_bytes", "used_mib"})
"""Raw series that need float32's range; the others are half precision."""


def _codec(key: str, tier: int) -> _Codec:
    field = key.rsplit("/", 1)[1]
    if tier == 0:
        return _F32 if field in _RAW_F32 else _HALF
    return _COARSE[field]


# ------------------------------------------------------------------------------- rings

class _Ring:
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
        self.codecs: dict[str, _Codec] = {}
        self.partial: dict[str, dict[float, int]] = {}
        """Per series, buckets where it had fewer values than the bucket had samples."""
        self.start = 0
        self.n = 0

    @property
    def cap(self) -> int:
        return len(self.times)

    def add_series(self, key: str, codec: _Codec) -> None:
        self.cols[key] = codec.fill * (self.cap * self.width)
        self.codecs[key] = codec

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

    def append(self, ts: Sequence[float], data: dict[str, array[Any]],
               counts: Sequence[int] = ()) -> None:
        """Append rows (times ascending, after the newest); ``data`` holds ``width`` values
        a row per series; series absent from it get missing values."""
        k = len(ts)
        newest = ts[-1]
        cap = self.cap
        times = self.times
        while self.n and times[self.start] < newest - self.span and self.n + k > cap:
            self.start = (self.start + 1) % cap
            self.n -= 1
        if self.n + k > cap:
            self._linearize()
            grow = self.n + k - cap
            # Concatenation allocates exactly; ``extend`` would leave ~6% slack in every column.
            self.times = self.times + array("d", bytes(8 * grow))
            if self.counts is not None:
                self.counts = self.counts + array("H", bytes(2 * grow))
            for key, c in self.cols.items():
                self.cols[key] = c + self.codecs[key].fill * (grow * self.width)
            cap = self.cap
        pos = (self.start + self.n) % cap
        first = min(k, cap - pos)
        self._write(pos, 0, first, ts, data, counts)
        if first < k:
            self._write(0, first, k, ts, data, counts)
        self.n += k

    def _write(self, pos: int, a: int, b: int, ts: Sequence[float],
               data: dict[str, array[Any]], counts: Sequence[int]) -> None:
        m = b - a
        w = self.width
        whole = a == 0 and b == len(ts)
        self.times[pos:pos + m] = array("d", ts) if whole else array("d", ts[a:b])
        if self.counts is not None:
            self.counts[pos:pos + m] = array("H", [min(c, 65535) for c in counts[a:b]])
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

    def _segments(self, i0: int, i1: int) -> list[tuple[int, int]]:
        """Logical rows [i0, i1) as physical slices."""
        if i1 <= i0:
            return []
        cap = self.cap
        p0 = (self.start + i0) % cap
        p1 = p0 + (i1 - i0)
        if p1 <= cap:
            return [(p0, p1)]
        return [(p0, cap), (0, p1 - cap)]

    def _bisect(self, t: float) -> int:
        """Logical index of the first row with time >= t."""
        s, n, cap = self.start, self.n, self.cap
        if s + n <= cap:
            return bisect_left(self.times, t, s, s + n) - s
        if self.times[cap - 1] >= t:
            return bisect_left(self.times, t, s, cap) - s
        return cap - s + bisect_left(self.times, t, 0, s + n - cap)

    def rows(self, key: str, since: float, until: float, out: Columns) -> None:
        """Append the series' rows with since <= t < until (``until`` exclusive) to ``out``."""
        c = self.cols.get(key)
        if c is None or not self.n:
            return
        codec = self.codecs[key]
        i0 = self._bisect(since)
        i1 = self._bisect(until)
        partial = self.partial.get(key)
        for p0, p1 in self._segments(i0, i1):
            t = self.times[p0:p1]
            if self.width == 1:
                v = codec.decode(c[p0:p1])
                if any(map(math.isnan, v)):
                    keep = [x == x for x in v]
                    t = array("d", compress(t, keep))
                    v = list(compress(v, keep))
                out.t.extend(t)
                out.lo.extend(v)
                out.hi.extend(v)
                out.mean.extend(v)
                out.n.extend(itertools.repeat(1, len(t)))
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
        total = _size(self.times) + (_size(self.counts) if self.counts is not None else 0)
        return total + sum(_size(c) for c in self.cols.values())


def _size(a: array[Any]) -> int:
    return a.buffer_info()[1] * a.itemsize + 64


# ------------------------------------------------------------------------------- steps

class StepSeries:
    """A value that changes rarely, kept as (time, value) at each change.

    Bounded: after ``max_changes`` changes the oldest are dropped; the first value seen and
    the total increase (for counters) are kept regardless.
    """

    def __init__(self, max_changes: int = 512) -> None:
        self._t = array("d")
        self._v = array("d")
        self._max = max_changes
        self.first: tuple[float, float] | None = None
        """The first (time, value) seen this run."""
        self.increase_total = 0.0
        """Sum of the rises between consecutive values (a counter's growth, resets ignored)."""
        self.first_increase_ts: float | None = None
        self.peak: float | None = None

    def record(self, t: float, v: float) -> None:
        """Note the value at sample time ``t``; stored only if it changed."""
        if self._v and self._v[-1] == v:
            return
        if self.first is None:
            self.first = (t, v)
        elif self._v and v > self._v[-1]:
            self.increase_total += v - self._v[-1]
            if self.first_increase_ts is None:
                self.first_increase_ts = t
        if self.peak is None or v > self.peak:
            self.peak = v
        if len(self._t) >= self._max:
            drop = max(1, self._max // 8)
            del self._t[:drop]
            del self._v[:drop]
        self._t.append(t)
        self._v.append(v)

    def latest(self) -> Point | None:
        """The current value, at the time it took that value."""
        if not self._t:
            return None
        v = self._v[-1]
        return Point(self._t[-1], v, v, v, 1)

    def value_at(self, t: float) -> float | None:
        """The value in force at ``t`` (None before the first kept change)."""
        i = bisect_right(self._t, t)
        return self._v[i - 1] if i else None

    def changes(self, since: float | None = None) -> list[tuple[float, float]]:
        """(time, new value) of the kept changes at or after ``since``."""
        i = 0 if since is None else bisect_left(self._t, since)
        return list(zip(self._t[i:], self._v[i:], strict=True))

    def segments(self, since: float, until: float) -> list[tuple[float, float, float]]:
        """(start, end, value) pieces covering [since, until] where a value is known."""
        out: list[tuple[float, float, float]] = []
        i = bisect_right(self._t, since)
        cur = self._v[i - 1] if i else None
        t0 = since
        while i < len(self._t) and self._t[i] < until:
            if cur is not None and self._t[i] > t0:
                out.append((t0, self._t[i], cur))
            t0, cur = self._t[i], self._v[i]
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
        return _size(self._t) + _size(self._v) + 200


# ------------------------------------------------------------------------------- series

class Series:
    """A read-only view of one dense series across the tiers (and the staged samples)."""

    def __init__(self, history: HostHistory, key: str) -> None:
        self._h = history
        self.key = key

    def columns(self, since: float | None = None, until: float | None = None,
                max_points: int | None = None) -> Columns:
        """Points in [since, until] as parallel lists (see ``points``)."""
        return self._h._query(self.key, since, until, max_points)

    def points(self, since: float | None = None, until: float | None = None,
               max_points: int | None = None) -> tuple[Point, ...]:
        """Points from ``since`` to ``until`` (inclusive; None: all there is).

        Read from the finest tier that still covers ``since``; where that is a coarse tier,
        the part finer tiers still hold comes from them.  With ``max_points`` the coarsest
        tier that is still finer than the requested spacing is used, and the result is
        merged into at most ``max_points`` time bins (min of mins, max of maxes, weighted mean).
        """
        return self.columns(since, until, max_points).points()

    def latest(self) -> Point | None:
        """The newest raw value."""
        return self._h._latest(self.key)


_GPU_GET = attrgetter(*GPU_FIELDS)
_HOST_GET = attrgetter(*HOST_FIELDS[:-1])
_NONE5 = (None,) * len(GPU_FIELDS)
_SIG_GET = attrgetter(*GPU_STEP_FIELDS)
_INDEX_GET = attrgetter("index")
_FAST_GET = attrgetter("state", "clock_reasons")
_PROCS_GET = attrgetter("processes")
_GPUS_GET = attrgetter("gpus")
_NAME_GET = attrgetter("name")
_DISK_GET = attrgetter("util", "r_await", "w_await", "aqu_sz")
_PID_GET = attrgetter("pid")
_USED_GET = attrgetter("used_mib")


def _disk_values(d: DiskStats) -> tuple[float | None, float | None, float | None]:
    aw = d.r_await if d.w_await is None else (
        d.w_await if d.r_await is None else max(d.r_await, d.w_await))
    return d.util, aw, d.aqu_sz


_Stat = tuple[float, float, float, int]
"""lo, hi, sum, count of a bucket's values."""


def _floats(vals: Sequence[float | None]) -> list[float]:
    if None in vals:
        return [NAN if v is None else v for v in vals]
    return list(vals)  # type: ignore[arg-type]


def _stat(vals: list[float]) -> _Stat | None:
    s = sum(vals)
    if s == s:
        return (min(vals), max(vals), s, len(vals))
    good = [v for v in vals if v == v]
    if not good:
        return None
    return (min(good), max(good), sum(good), len(good))


class HostHistory:
    """All series of one host.

    Args:
        tiers: finest first; each resolution a multiple of the previous one (the first is
            nominal: raw samples).
        max_processes_per_gpu: processes tracked per GPU; later ones are ignored until one
            is forgotten.
        process_forget_s: a process absent this long is dropped with its series.
        max_disks: disks tracked; others are ignored.
        max_step_changes: changes kept per step series.
    """

    def __init__(self, tiers: Sequence[Tier] = DEFAULT_TIERS, *, max_processes_per_gpu: int = 8,
                 process_forget_s: float = 600.0, max_disks: int = 16,
                 max_step_changes: int = 512) -> None:
        if not tiers:
            raise ValueError("at least one tier")
        for a, b in itertools.pairwise(tiers[1:]):
            ratio = b.resolution_s / a.resolution_s
            if abs(ratio - round(ratio)) > 1e-9 or ratio < 1:
                raise ValueError("each tier's resolution must be a multiple of the previous one")
        self.tiers = tuple(tiers)
        self.max_processes_per_gpu = max_processes_per_gpu
        self.process_forget_s = process_forget_s
        self.max_disks = max_disks
        self._max_changes = max_step_changes
        self._rings = [_Ring(t.span_s, 1 if i == 0 else 3, i > 0) for i, t in enumerate(tiers)]
        self._open: list[float | None] = [None] * len(tiers)
        """Start of the bucket being filled, per tier from 2 on."""
        self._built_to: float | None = None
        """Coarse buckets are written up to here (a tier-1 bucket start)."""
        self._staged_counts: list[float] = []
        self._open2: dict[str, _Stat] = {}
        """The tier-2 bucket being filled from tier-1 batches: stats per series."""
        self._open2_t: float | None = None
        self._open2_rows = 0
        self._batch_s = self._batch_seconds()
        if len(tiers) > 1 and tiers[0].span_s < self._batch_s + STAGE_MAX_S + tiers[1].resolution_s:
            raise ValueError("the raw tier must span at least a bucket batch plus the staging")
        self._staged: list[HostSample] = []
        self._steps_done = 0
        self._keys: dict[str, _Codec] = {}
        self._steps: dict[str, StepSeries] = {}
        self._last_sig: dict[int, tuple[object, ...]] = {}
        self._proc_seen: dict[str, float] = {}
        self._pkeys: dict[tuple[int, int], str] = {}
        self._gkeys: dict[int, tuple[str, ...]] = {}
        self._mixed = False
        """Staged samples differ in which GPUs they list."""
        self._procs_per_gpu: dict[int, int] = {}
        self._disks: set[str] = set()
        self._gpu_seen: set[int] = set()
        self._row_sigs: tuple[object, ...] = ()
        self._row_fast: tuple[object, ...] = ()
        self._count_for: tuple[object, ...] | None = None
        self._ok_count = 0.0
        self._gpu_missing_since: dict[int, float] = {}
        self._present: tuple[int, ...] = ()
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.last_sample: HostSample | None = None
        self.dropped = 0
        """Samples ignored because their time did not move forward."""

    def _batch_seconds(self) -> float:
        if len(self.tiers) < 2:
            return 0.0
        res1 = self.tiers[1].resolution_s
        if len(self.tiers) < 3:
            return res1 * BUCKET_BATCH
        per = round(self.tiers[2].resolution_s / res1)
        k = max(d for d in range(1, BUCKET_BATCH + 1) if per % d == 0)
        return res1 * k

    # -- writing

    def add(self, sample: HostSample) -> None:
        """Take one sample (times must increase; an older or repeated time is dropped)."""
        ts = sample.ts
        last = self.last_ts
        if last is not None and ts <= last:
            self.dropped += 1
            return
        if last is None:
            self.first_ts = ts
        self.last_ts = ts
        self.last_sample = sample
        staged = self._staged
        staged.append(sample)
        if len(staged) >= STAGE_MAX or ts - staged[0].ts >= STAGE_MAX_S:
            self._flush()

    def flush(self) -> None:
        """Write staged samples out now (queries never need this; for measuring memory)."""
        if self._staged:
            self._flush()

    def _new_series(self, key: str) -> None:
        self._keys[key] = _codec(key, 1)
        for i, ring in enumerate(self._rings):
            ring.add_series(key, _codec(key, i))

    def _drop_series(self, key: str) -> None:
        self._keys.pop(key, None)
        for ring in self._rings:
            ring.drop_series(key)

    def _columns_of(self, rows: list[HostSample]) -> dict[str, list[float]]:
        """The staged samples as one float column per series (NaN: missing).

        When every staged sample lists the same GPUs (the usual case) the columns are cut by
        position with ``zip``; otherwise GPUs are matched by index.
        """
        k = len(rows)
        values: dict[str, list[float]] = {}
        procs: dict[str, list[float]] = {}
        ts_last = rows[-1].ts
        per_gpu: list[tuple[int, Sequence[GpuSample | None]]] = []
        if not self._mixed:
            layout = tuple(map(_INDEX_GET, rows[0].gpus))
            for idx, gcol in zip(layout, zip(*[r.gpus for r in rows], strict=True), strict=True):
                if idx >= 0:
                    per_gpu.append((idx, gcol))
        else:
            by_gpu: dict[int, list[GpuSample | None]] = {}
            for i, r in enumerate(rows):
                for g in r.gpus:
                    if g.index < 0:
                        continue
                    col = by_gpu.get(g.index)
                    if col is None:
                        col = by_gpu[g.index] = [None] * k
                    col[i] = g
            per_gpu = [(i, gs) for i, gs in by_gpu.items()]
        for idx, gs in per_gpu:
            keys = self._gkeys.get(idx)
            if keys is None:
                keys = self._gkeys[idx] = tuple(gpu_key(idx, f) for f in GPU_FIELDS)
            if self._mixed:
                tups = [_GPU_GET(g) if g is not None else _NONE5 for g in gs]
            else:
                tups = list(map(_GPU_GET, gs))
            for key, vals in zip(keys, zip(*tups, strict=True), strict=True):
                values[key] = _floats(vals)
            self._gpu_procs(idx, gs, ts_last, procs)
        host = [_HOST_GET(r.host) for r in rows]
        for f, vals in zip(HOST_FIELDS[:-1], zip(*host, strict=True), strict=True):
            values[host_key(f)] = _floats(vals)
        values[host_key("gpu_count")] = self._staged_counts
        self._disk_columns(rows, values)
        values.update(procs)
        return values

    def _disk_columns(self, rows: list[HostSample], values: dict[str, list[float]]) -> None:
        """Disk columns; samples listing the same disks in the same order are cut by zip."""
        names = tuple(map(_NAME_GET, rows[0].disks))
        if names and all(tuple(map(_NAME_GET, r.disks)) == names for r in rows) \
                and len(self._disks | set(names)) <= self.max_disks:
            self._disks.update(names)
            for name, ds in zip(names, zip(*[r.disks for r in rows], strict=True),
                                strict=True):
                util, ra, wa, q = zip(*map(_DISK_GET, ds), strict=True)
                values[disk_key(name, "util")] = _floats(util)
                values[disk_key(name, "aqu_sz")] = _floats(q)
                if None in ra or None in wa:
                    aw = _floats([_disk_values(d)[1] for d in ds])
                else:
                    aw = list(map(max, ra, wa))
                values[disk_key(name, "await")] = aw
            return
        k = len(rows)
        disks: dict[str, list[DiskStats | None]] = {}
        for i, r in enumerate(rows):
            for d in r.disks:
                dc = disks.get(d.name)
                if dc is None:
                    if d.name not in self._disks:
                        if len(self._disks) >= self.max_disks:
                            continue
                        self._disks.add(d.name)
                    dc = disks[d.name] = [None] * k
                dc[i] = d
        for name, col in disks.items():
            trip = [_disk_values(d) if d is not None else (None, None, None) for d in col]
            for f, vals in zip(DISK_FIELDS, zip(*trip, strict=True), strict=True):
                values[disk_key(name, f)] = _floats(vals)

    def _gpu_procs(self, idx: int, gs: Sequence[GpuSample | None], ts: float,
                   procs: dict[str, list[float]]) -> None:
        """Process memory columns of one GPU; one steady process is the fast case."""
        plist = ([g.processes if g is not None else None for g in gs] if self._mixed
                 else list(map(_PROCS_GET, gs)))
        p0 = plist[0]
        if p0 is not None and len(p0) == 1 and p0[0].pid is not None and None not in plist:
            lens = set(map(len, plist))  # type: ignore[arg-type]
            if lens == {1}:
                firsts = [p[0] for p in plist]  # type: ignore[index]
                pids = list(map(_PID_GET, firsts))
                pid = p0[0].pid
                if pids.count(pid) == len(pids):
                    key = self._track_proc(idx, pid, ts)
                    if key is not None:
                        procs[key] = _floats(list(map(_USED_GET, firsts)))
                    return
        k = len(plist)
        for i, ps in enumerate(plist):
            for p in ps or ():
                if p.pid is None:
                    continue
                key = self._track_proc(idx, p.pid, ts)
                if key is None:
                    continue
                col = procs.get(key)
                if col is None:
                    col = procs[key] = [NAN] * k
                if p.used_mib is not None:
                    col[i] = p.used_mib

    def _track_proc(self, gpu: int, pid: int, ts: float) -> str | None:
        """The series key of a process, or None when its GPU already tracks the maximum."""
        pk = (gpu, pid)
        key = self._pkeys.get(pk)
        if key is None:
            n = self._procs_per_gpu.get(gpu, 0)
            if n >= self.max_processes_per_gpu:
                return None
            self._procs_per_gpu[gpu] = n + 1
            key = self._pkeys[pk] = proc_key(gpu, pid)
        self._proc_seen[key] = ts
        return key

    def _flush(self) -> None:
        """Write the staged samples to the raw tier, then any coarse buckets now complete."""
        rows = self._staged
        self._sync_steps()
        values = self._columns_of(rows)
        ts = [r.ts for r in rows]
        data: dict[str, array[Any]] = {}
        raw = self._rings[0]
        for key, vals in values.items():
            if key not in self._keys:
                self._new_series(key)
            data[key] = raw.codecs[key].encode(vals)
        raw.append(ts, data)
        self._staged = []
        self._staged_counts = []
        self._steps_done = 0
        self._mixed = False
        self._forget_procs(ts[-1])
        if len(self.tiers) > 1:
            self._build(ts[-1])

    def _build(self, newest: float) -> None:
        """Write the tier-1 buckets that are complete, read back from the raw tier, and fold
        them into the open tier-2 bucket.

        Batched (``BUCKET_BATCH`` tier-1 buckets, a divisor of a tier-2 bucket): each series
        pays its fixed costs once per batch, not once per bucket, while tier 1 lags the raw
        tier by at most a batch.
        """
        res1 = self.tiers[1].resolution_s
        done = self._built_to
        if done is None:
            first = self._rings[0].oldest()
            assert first is not None
            done = self._built_to = first - first % res1
        step = self._batch_s
        upto = newest - newest % step
        if upto <= done:
            return
        self._built_to = upto
        raw = self._rings[0]
        segs = raw._segments(raw._bisect(done), raw._bisect(upto))
        if not segs:
            return
        ts: list[float] = []
        for p0, p1 in segs:
            ts.extend(raw.times[p0:p1])
        groups: list[tuple[int, int]] = []
        starts: list[float] = []
        g0 = 0
        b0 = ts[0] - ts[0] % res1
        for i, t in enumerate(ts):
            bt = t - t % res1
            if bt != b0:
                groups.append((g0, i))
                starts.append(b0)
                g0, b0 = i, bt
        groups.append((g0, len(ts)))
        starts.append(b0)
        rows = [b - a for a, b in groups]
        ring1 = self._rings[1]
        coarse = len(self.tiers) > 2
        data1: dict[str, array[Any]] = {}
        batch: dict[str, tuple[list[float], list[float], list[float], list[int]]] = {}
        for key, col in raw.cols.items():
            codec = raw.codecs[key]
            vals: list[float] = []
            for p0, p1 in segs:
                vals.extend(codec.decode(col[p0:p1]))
            slices = [vals[a:b] for a, b in groups]
            sums: list[float] = list(map(sum, slices))
            total = sum(sums)
            if total == total:
                los = list(map(min, slices))
                his = list(map(max, slices))
                ns: list[int] = rows
            else:
                stats = [_stat(sl) for sl in slices]
                los = [NAN if st is None else st[0] for st in stats]
                his = [NAN if st is None else st[1] for st in stats]
                sums = [NAN if st is None else float(st[2]) for st in stats]
                ns = [0 if st is None else st[3] for st in stats]
                part = ring1.partial.setdefault(key, {})
                for j, n in enumerate(ns):
                    if n < rows[j]:
                        part[starts[j]] = n
            means = [s / n if n else NAN for s, n in zip(sums, ns, strict=True)]
            flat = [x for tri in zip(los, his, means, strict=True) for x in tri]
            data1[key] = ring1.codecs[key].encode(flat)
            if coarse:
                batch[key] = (los, his, sums, ns)
        ring1.append(starts, data1, rows)
        ring1.prune_partial()
        if coarse:
            self._fold_tier2(starts, rows, batch, upto)

    def _fold_tier2(self, starts: list[float], rows: list[int],
                    batch: dict[str, tuple[list[float], list[float], list[float], list[int]]],
                    upto: float) -> None:
        """Add new tier-1 buckets to the open tier-2 bucket; write tier-2 buckets that end."""
        res2 = self.tiers[2].resolution_s
        closed_t: list[float] = []
        closed_rows: list[int] = []
        closed: dict[str, list[float]] = {}
        j = 0
        while j < len(starts):
            t2 = starts[j] - starts[j] % res2
            k = j
            while k < len(starts) and starts[k] - starts[k] % res2 == t2:
                k += 1
            if self._open2_t is not None and self._open2_t != t2:
                self._close_tier2(closed_t, closed_rows, closed)
            self._open2_t = t2
            self._open2_rows += sum(rows[j:k])
            for key, (los, his, sums, ns) in batch.items():
                n = sum(ns[j:k])
                if not n:
                    continue
                if 0 in ns[j:k]:
                    good = [i for i in range(j, k) if ns[i]]
                    st = (min(los[i] for i in good), max(his[i] for i in good),
                          sum(sums[i] for i in good), n)
                else:
                    st = (min(los[j:k]), max(his[j:k]), sum(sums[j:k]), n)
                acc = self._open2.get(key)
                self._open2[key] = st if acc is None else (
                    min(acc[0], st[0]), max(acc[1], st[1]), acc[2] + st[2], acc[3] + st[3])
            j = k
        if self._open2_t is not None and upto >= self._open2_t + res2:
            self._close_tier2(closed_t, closed_rows, closed)
        if closed_t:
            ring2 = self._rings[2]
            data = {key: ring2.codecs[key].encode(flat) for key, flat in closed.items()
                    if key in ring2.codecs}
            ring2.append(closed_t, data, closed_rows)
            ring2.prune_partial()
            for t in closed_t:
                self._cascade(2, t)

    def _close_tier2(self, closed_t: list[float], closed_rows: list[int],
                     closed: dict[str, list[float]]) -> None:
        t2 = self._open2_t
        assert t2 is not None
        m = len(closed_t)
        rows = self._open2_rows
        partial = self._rings[2].partial
        for key in self._keys:
            flat = closed.setdefault(key, [NAN] * (3 * m))
            if len(flat) < 3 * m:
                flat += [NAN] * (3 * m - len(flat))
            st = self._open2.get(key)
            if st is None:
                flat += (NAN, NAN, NAN)
                partial.setdefault(key, {})[t2] = 0
                continue
            flat += (st[0], st[1], st[2] / st[3])
            if st[3] < rows:
                partial.setdefault(key, {})[t2] = st[3]
        closed_t.append(t2)
        closed_rows.append(rows)
        self._open2 = {}
        self._open2_rows = 0
        self._open2_t = None

    def _forget_procs(self, now: float) -> None:
        gone = [k for k, seen in self._proc_seen.items() if now - seen > self.process_forget_s]
        for key in gone:
            del self._proc_seen[key]
            parts = key.split("/")
            gpu = int(parts[1])
            self._pkeys.pop((gpu, int(parts[2])), None)
            self._procs_per_gpu[gpu] -= 1
            self._drop_series(key)

    def _cascade(self, tier: int, t0: float) -> None:
        """A bucket starting at ``t0`` was written to ``tier``: close coarser buckets it ends."""
        if tier + 1 >= len(self.tiers):
            return
        res = self.tiers[tier + 1].resolution_s
        b = t0 - t0 % res
        open_b = self._open[tier + 1]
        if open_b is None:
            self._open[tier + 1] = b
            return
        if b == open_b:
            return
        rows, stats = self._combine(tier, open_b, open_b + res)
        self._open[tier + 1] = b
        if not rows:
            return
        ring = self._rings[tier + 1]
        data: dict[str, array[Any]] = {}
        for key, (lo, hi, mean, n) in stats.items():
            codec = ring.codecs.get(key)
            if codec is None:
                continue
            data[key] = codec.encode([lo, hi, mean])
            if n < rows:
                ring.partial.setdefault(key, {})[open_b] = n
        ring.append([open_b], data, [rows])
        ring.prune_partial()
        self._cascade(tier + 1, open_b)

    def _combine(self, tier: int, t0: float, t1: float
                 ) -> tuple[int, dict[str, tuple[float, float, float, int]]]:
        ring = self._rings[tier]
        i0, i1 = ring._bisect(t0), ring._bisect(t1)
        segs = ring._segments(i0, i1)
        assert ring.counts is not None
        rows = sum(sum(ring.counts[a:b]) for a, b in segs)
        stats: dict[str, tuple[float, float, float, int]] = {}
        for key in ring.cols:
            out = Columns([], [], [], [], [])
            ring.rows(key, t0, t1, out)
            if out.t:
                n = sum(out.n)
                stats[key] = (min(out.lo), max(out.hi),
                              sum(m * c for m, c in zip(out.mean, out.n, strict=True)) / n, n)
        return rows, stats

    def _sync_steps(self) -> None:
        """Fold staged samples not yet seen into step series, GPU presence and GPU count.

        Per sample only state and clock-event reasons are compared (they flap); the slower
        fields are compared on the newest sample, and only when that differs are the samples
        walked one by one.
        """
        rows = self._staged
        todo = rows[self._steps_done:]
        if not todo:
            return
        full = tuple(map(_SIG_GET, todo[-1].gpus))
        if full != self._row_sigs:
            for r in todo:
                self._step_changes(r)
                self._row_fast = tuple(map(_FAST_GET, r.gpus))
                self._count_and_presence(r)
            self._row_sigs = full
        elif self._same_as_before(todo):
            self._staged_counts.extend([self._ok_count] * len(todo))
        else:
            for r in todo:
                fast = tuple(map(_FAST_GET, r.gpus))
                if fast != self._row_fast:
                    self._row_fast = fast
                    self._step_changes(r)
                self._count_and_presence(r)
        self._steps_done = len(rows)

    def _same_as_before(self, todo: list[HostSample]) -> bool:
        """Every sample lists the same GPUs in the same state and clock reasons as the last
        one seen (checked in C over the whole batch)."""
        if self._count_for is None or self._count_for is not self._row_fast:
            return False
        gs = list(chain.from_iterable(map(_GPUS_GET, todo)))
        k = len(todo)
        return (list(map(_FAST_GET, gs)) == list(self._row_fast) * k
                and list(map(_INDEX_GET, gs)) == list(self._present) * k)

    def _count_and_presence(self, r: HostSample) -> None:
        pt = tuple(map(_INDEX_GET, r.gpus))
        if pt != self._present:
            if r is not self._staged[0]:
                self._mixed = True
            self._presence(r.ts, pt)
            self._count_for = None
        if self._row_fast is not self._count_for:
            self._count_for = self._row_fast
            self._ok_count = float(sum(1 for g in r.gpus if g.state is GpuState.OK))
        self._staged_counts.append(self._ok_count)

    def _step_changes(self, r: HostSample) -> None:
        ts = r.ts
        for g in r.gpus:
            idx = g.index
            if idx < 0:
                continue
            sig = _SIG_GET(g)
            old = self._last_sig.get(idx)
            if sig == old:
                continue
            self._last_sig[idx] = sig
            for j, (f, v) in enumerate(zip(GPU_STEP_FIELDS, sig, strict=True)):
                if old is not None and old[j] == v:
                    continue
                if f == "state":
                    v = STATE_CODES.get(g.state, 1)
                elif f == "clock_reasons":
                    v = reason_mask(g.clock_reasons)
                if v is None:
                    continue
                key = gpu_key(idx, f)
                st = self._steps.get(key)
                if st is None:
                    st = self._steps[key] = StepSeries(self._max_changes)
                st.record(ts, float(v))

    def _presence(self, ts: float, pt: tuple[int, ...]) -> None:
        self._present = pt
        here = {i for i in pt if i >= 0}
        for idx in list(self._gpu_missing_since):
            if idx in here:
                del self._gpu_missing_since[idx]
        for idx in self._gpu_seen - here:
            self._gpu_missing_since.setdefault(idx, ts)
        self._gpu_seen |= here

    # -- reading

    def series_keys(self) -> list[str]:
        """Keys of the dense series (for ``series``) and the step series (for ``steps``)."""
        self._sync_steps()
        return sorted(set(self._keys) | self._staged_keys()) + sorted(self._steps)

    def _staged_keys(self) -> set[str]:
        """Dense keys the staged samples will create when written."""
        out: set[str] = set()
        for r in self._staged:
            out.update(host_key(f) for f in HOST_FIELDS)
            for g in r.gpus:
                if g.index >= 0:
                    out.update(gpu_key(g.index, f) for f in GPU_FIELDS)
            for d in r.disks:
                if d.name in self._disks or len(self._disks) < self.max_disks:
                    out.update(disk_key(d.name, f) for f in DISK_FIELDS)
        return out

    def series(self, key: str) -> Series | None:
        """The dense series ``key`` (see ``gpu_key`` and friends), or None if never seen."""
        if key not in self._keys and self._latest_staged(key) is None:
            return None
        return Series(self, key)

    def steps(self, key: str) -> StepSeries | None:
        """A step series (``GPU_STEP_FIELDS``), or None if never seen."""
        self._sync_steps()
        return self._steps.get(key)

    def gpu_count_series(self) -> Series | None:
        """How many GPUs answered, per sample: a drop-out shows as a step down."""
        return self.series(host_key("gpu_count"))

    def gpu_indices(self) -> list[int]:
        """Every GPU index seen this run."""
        self._sync_steps()
        return sorted(self._gpu_seen)

    def gpus_missing_since(self) -> dict[int, float]:
        """GPUs seen earlier but absent from the newest sample, with the first sample that
        lacked them."""
        self._sync_steps()
        return dict(self._gpu_missing_since)

    def processes(self, gpu: int) -> list[int]:
        """Pids tracked on ``gpu`` (including ones only in samples not yet written)."""
        out = {pid for g, pid in self._pkeys if g == gpu}
        room = self.max_processes_per_gpu - len(out)
        for r in self._staged:
            for g in r.gpus:
                if g.index == gpu:
                    for p in g.processes or ():
                        if p.pid is not None and p.pid not in out and room > 0:
                            out.add(p.pid)
                            room -= 1
        return sorted(out)

    def disks(self) -> list[str]:
        """Disk names tracked (including ones only in samples not yet written)."""
        out = set(self._disks)
        for r in self._staged:
            for d in r.disks:
                if d.name not in out and len(out) < self.max_disks:
                    out.add(d.name)
        return sorted(out)

    def nbytes(self) -> int:
        """Approximate bytes held by the columns (what grows with the run)."""
        total = sum(r.nbytes() for r in self._rings)
        total += sum(s.nbytes() for s in self._steps.values())
        return total

    def _extractor(self, key: str) -> Callable[[HostSample], float | None]:
        parts = key.split("/")
        scope, field = parts[0], parts[-1]
        if scope == "gpu":
            idx = int(parts[1])
            get = attrgetter(field)

            def gpu_val(r: HostSample) -> float | None:
                for g in r.gpus:
                    if g.index == idx:
                        v: float | None = get(g)
                        return v
                return None
            return gpu_val
        if scope == "host":
            if field == "gpu_count":
                return lambda r: float(sum(1 for g in r.gpus if g.state is GpuState.OK))
            hget = attrgetter(field)

            def host_val(r: HostSample) -> float | None:
                v: float | None = hget(r.host)
                return v
            return host_val
        if scope == "disk":
            name = parts[1]
            j = DISK_FIELDS.index(field)

            def disk_val(r: HostSample) -> float | None:
                for d in r.disks:
                    if d.name == name:
                        return _disk_values(d)[j]
                return None
            return disk_val
        gpu, pid = int(parts[1]), int(parts[2])

        def proc_val(r: HostSample) -> float | None:
            for g in r.gpus:
                if g.index == gpu:
                    for p in g.processes or ():
                        if p.pid == pid:
                            return p.used_mib
            return None
        return proc_val

    def _latest_staged(self, key: str) -> Point | None:
        if not self._staged:
            return None
        get = self._extractor(key)
        for r in reversed(self._staged):
            v = get(r)
            if v is not None and v == v:
                return Point(r.ts, float(v), float(v), float(v), 1)
        return None

    def _latest(self, key: str) -> Point | None:
        p = self._latest_staged(key)
        if p is not None:
            return p
        ring = self._rings[0]
        col = ring.cols.get(key)
        if col is None:
            return None
        codec = ring.codecs[key]
        for i in range(ring.n - 1, max(-1, ring.n - 64), -1):
            pos = (ring.start + i) % ring.cap
            v = codec.decode(col[pos:pos + 1])[0]
            if v == v:
                return Point(ring.times[pos], v, v, v, 1)
        return None

    def _query(self, key: str, since: float | None, until: float | None,
               max_points: int | None) -> Columns:
        out = Columns([], [], [], [], [])
        newest = self.last_ts
        if newest is None:
            return out
        lo = -math.inf if since is None else since
        hi = newest if until is None else min(until, newest)
        have: list[tuple[int, float]] = []
        for i, r in enumerate(self._rings):
            o = r.oldest()
            if o is not None:
                have.append((i, o))
        if self._staged and not have:
            have = [(0, self._staged[0].ts)]
        if not have:
            return out
        first = self.first_ts if self.first_ts is not None else lo
        covering = [i for i, o in have if o <= max(lo, first)]
        tier = covering[0] if covering else min(have, key=lambda x: (x[1], -x[0]))[0]
        coarse_first = max_points is not None and max_points > 0
        if coarse_first:
            first_t = max(lo, min(o for _, o in have))
            width = (hi - first_t) / max_points if max_points else 0.0
            old = dict(have)
            while (tier + 1 < len(self.tiers) and self.tiers[tier + 1].resolution_s <= width
                   and tier + 1 in old and old[tier + 1] <= max(lo, old[tier])):
                tier += 1
        start = lo
        for k in range(tier, -1, -1):
            if start > hi:
                break
            ring = self._rings[k]
            if k == 0:
                ring.rows(key, start, math.nextafter(hi, math.inf), out)
                self._staged_rows(key, start, hi, out)
                break
            res = self.tiers[k].resolution_s
            finer_old = self._rings[k - 1].oldest()
            if finer_old is None and k - 1 == 0 and self._staged:
                finer_old = self._staged[0].ts
            if coarse_first or finer_old is None:
                newest_k = ring.newest()
                cut = start if newest_k is None else max(start, newest_k + res)
            else:
                cut = max(start, math.ceil(finer_old / res) * res)
            ring.rows(key, start, min(cut, math.nextafter(hi, math.inf)), out)
            start = cut
        if max_points is not None and len(out.t) > max_points > 0:
            return _merge(out, max_points)
        return out

    def _staged_rows(self, key: str, since: float, until: float, out: Columns) -> None:
        if not self._staged:
            return
        get = self._extractor(key)
        for r in self._staged:
            if since <= r.ts <= until:
                v = get(r)
                if v is not None and v == v:
                    fv = float(v)
                    out.t.append(r.ts)
                    out.lo.append(fv)
                    out.hi.append(fv)
                    out.mean.append(fv)
                    out.n.append(1)


def _merge(c: Columns, bins: int) -> Columns:
    """Merge points into ``bins`` equal time bins: min of mins, max of maxes, weighted mean.

    A point at ``t`` falls in bin ``min(bins - 1, int((t - t0) / width))``.  Times are
    sorted, so each bin's first point is found by bisection (then nudged to agree with that
    formula exactly) and the bin's values are reduced by C builtins over slices: a detector
    asks for thousands of points in tens of bins.  With only a few points a bin, one pass
    over the points costs less than that per-bin set-up.
    """
    t = c.t
    t0, t1 = t[0], t[-1]
    width = (t1 - t0) / bins or 1.0
    n = len(t)
    if n < _BISECT_FROM * bins:
        return _merge_points(c, bins, t0, width)

    def bin_of(i: int) -> int:
        return min(bins - 1, int((t[i] - t0) / width))

    starts = [0]
    for b in range(1, bins):
        i = max(starts[-1], bisect_left(t, t0 + b * width, starts[-1]))
        while i > starts[-1] and bin_of(i - 1) >= b:
            i -= 1
        while i < n and bin_of(i) < b:
            i += 1
        if i >= n:
            break
        if i > starts[-1]:
            starts.append(i)
    starts.append(n)
    out = Columns([], [], [], [], [])
    for i, j in itertools.pairwise(starts):
        weight = sum(c.n[i:j])
        out.t.append(t[i])
        out.lo.append(min(c.lo[i:j]))
        out.hi.append(max(c.hi[i:j]))
        out.n.append(weight)
        out.mean.append(sum(map(operator.mul, c.mean[i:j], c.n[i:j])) / weight)
    return out


_BISECT_FROM = 6
"""Points per bin from which ``_merge`` bisects (measured: the two cost the same at about 6)."""


def _merge_points(c: Columns, bins: int, t0: float, width: float) -> Columns:
    out = Columns([], [], [], [], [])
    cur = -1
    s = 0.0
    for t, lo, hi, mean, n in zip(c.t, c.lo, c.hi, c.mean, c.n, strict=True):
        b = min(bins - 1, int((t - t0) / width))
        if b != cur:
            if cur >= 0:
                out.mean.append(s / out.n[-1])
            cur = b
            out.t.append(t)
            out.lo.append(lo)
            out.hi.append(hi)
            out.n.append(n)
            s = mean * n
            continue
        if lo < out.lo[-1]:
            out.lo[-1] = lo
        if hi > out.hi[-1]:
            out.hi[-1] = hi
        out.n[-1] += n
        s += mean * n
    if cur >= 0:
        out.mean.append(s / out.n[-1])
    return out
