"""Per-host time series kept in tiers, so a soak run of any length stays in bounded memory.

The finest tier holds every sample as it came (1 Hz, 10 s, whatever the agent sends) for its
span; each coarser tier holds buckets of ``resolution_s`` with min, max, mean and count, so a
spike survives downsampling.  Values live in ``array`` columns (one per series per tier,
aligned with one time column per tier) with ring indexing and narrow encodings: a GPU's
utilisation is one byte a point, not a Python float.

Adding a sample only stages it; every ``STAGE_MAX`` samples (or ``STAGE_MAX_S`` seconds)
the staged samples are cut into columns in one pass, and every ``BUCKET_BATCH`` tier-1
buckets those are read back from the raw tier into buckets (``tiers.py``).  Per-series costs
are thus paid once per batch, not per sample.  Queries stitch the raw tier and the staged
samples onto the coarse tiers, so nothing a caller sees lags (``query.py``).

Counters and settings that rarely change (ECC counts, link width, clock-event reasons) are
kept as step series: one entry per change, not per sample (``steps.py``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter

from probes.wire.compact import StaticEpoch
from probes.wire.samples import DiskStats, HostSample
from tests.history.before_s13.block import BlockCut, Plan, encode
from tests.history.before_s13.keys import (
    DISK_FIELDS,
    GPU_FIELDS,
    HOST_FIELDS,
    SeriesKey,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
)
from tests.history.before_s13.query import HistoryQueries
from tests.history.before_s13.staged import (
    GPU_NUMBERS,
    HOST_NUMBERS,
    ROW_HOLDS_FIELDS,
    ProcPair,
    Staged,
    StagedDisk,
    disk_numbers,
    proc_mib,
    stage,
    stage_row,
)
from tests.history.before_s13.steps import ROW_STEPS_FIT, GpuSteps
from tests.history.before_s13.storage import NAN, Columns, Point, StepSeries, Tier
from tests.history.before_s13.tiers import DEFAULT_TIERS, TierSet

STAGE_MAX = 16
"""Samples staged before they are written to the raw tier.  A decoded 8-GPU sample is ~20 KB,
so this bounds what staging holds per host (~0.3 MB); below it, per-series costs grow."""
STAGE_MAX_S = 3600.0
"""…or once the staged samples span this long, or the room the raw tier leaves (slow
sources).  Each write pays every series' fixed cost once: a source read every 15 s
(Prometheus) writes every 16 samples, as a 1 Hz agent does, and its start-up history
(points 300 s apart at 10,000 hosts) every 11 or so, not every second one (240 s made the
history's fold half tier building)."""
STAGE_MIN_S = 60.0
"""The shortest staging span a tier layout must leave room for."""


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

    def unmerged(self, since: float | None = None, max_points: int | None = None) -> Columns:
        """The points ``columns(since, None, max_points)`` merges into its bins, not merged
        (``merge`` them when more than ``max_points``: exactly ``columns``' answer).  A
        detector can rule a window out from its points before paying for the merge."""
        return self._h._query(self.key, since, None, max_points, merged=False)

    def latest(self) -> Point | None:
        """The newest raw value."""
        return self._h._latest(self.key)


_HOSTS = len(HOST_NUMBERS)
"""A staged row's host numbers come first; its GPUs' from here."""
_HOST_AT: dict[str, int] = {f: j for j, f in enumerate(HOST_NUMBERS)}
_DISK_GET = attrgetter("util", "r_await", "w_await", "aqu_sz")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_ROW_PATH = ROW_HOLDS_FIELDS and ROW_STEPS_FIT
"""A wire v2 sample kept as its row is folded from the row (``HostHistory.add``)."""


def _disk_values(d: DiskStats | StagedDisk) -> tuple[float | None, float | None, float | None]:
    aw = d.r_await if d.w_await is None else (
        d.w_await if d.r_await is None else max(d.r_await, d.w_await))
    return d.util, aw, d.aqu_sz


def _floats(vals: Sequence[float | None]) -> list[float]:
    if None in vals:
        return [NAN if v is None else v for v in vals]
    return list(vals)  # type: ignore[arg-type]


class HostHistory(BlockCut, HistoryQueries):
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
        self.store = TierSet(tiers)
        """The rings of every tier (``tiers.py``)."""
        self.tiers = self.store.tiers
        self.stage_max_s = STAGE_MAX_S
        """Staging's longest span here: ``STAGE_MAX_S``, less where the raw tier is short."""
        if len(tiers) > 1:
            room = tiers[0].span_s - self.store.batch_s - tiers[1].resolution_s
            if room < STAGE_MIN_S:
                raise ValueError("the raw tier must span at least a bucket batch plus the "
                                 "staging")
            self.stage_max_s = min(STAGE_MAX_S, room)
        self.max_processes_per_gpu = max_processes_per_gpu
        self.process_forget_s = process_forget_s
        self.max_disks = max_disks
        self._gpu_steps = GpuSteps(max_step_changes)
        self._staged: list[Staged] = []
        """Samples not yet cut into columns, slimmed to what is kept (``staged.py``)."""
        self._staged_counts: list[float] = []
        """GPUs answering in each staged sample (``host/gpu_count``)."""
        self._mixed = False
        """Staged samples differ in which GPUs they list."""
        self._proc_seen: dict[str, float] = {}
        self._pkeys: dict[tuple[int, int], str] = {}
        self._gkeys: dict[int, tuple[str, ...]] = {}
        self._procs_per_gpu: dict[int, int] = {}
        self._disks: set[str] = set()
        self._proc_gen = 0
        """Bumped whenever a process starts or stops being tracked (a kept ``Plan`` is then
        stale)."""
        self._plan: Plan | None = None
        """The last block's plan (``BlockCut._block_columns``)."""
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.last_sample: HostSample | None = None
        self._pids_epoch: StaticEpoch | None = None
        self._pids: tuple[tuple[int | None, ...], ...] = ()
        """Each GPU position's processes' pids in ``_pids_epoch`` (``stage_row``)."""
        self._pid_lens: tuple[int, ...] = ()
        self.dropped = 0
        """Samples ignored because their time did not move forward."""

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
        counts = self._staged_counts
        steps = self._gpu_steps
        # Steps are folded now, from the full sample, so that only its numbers are staged.
        # A wire v2 sample kept as its row is read from the row and its static epoch, its
        # GPUs not built (issue 38); the two paths stage and fold the same values.
        row = sample.wire_row
        epoch = sample.static_epoch
        if row is not None and _ROW_PATH and isinstance(epoch, StaticEpoch):
            if steps.fold_row(ts, row, epoch, not staged, counts):  # type: ignore[arg-type]
                self._mixed = True
            if epoch is not self._pids_epoch:
                self._pids_epoch = epoch
                self._pids = tuple(tuple(p.pid for p in g.processes or ()) if g else ()
                                   for g in epoch.gpus)
                self._pid_lens = tuple(map(len, self._pids))
            staged.append(stage_row(sample, row, self._pids,  # type: ignore[arg-type]
                                    steps.layout, counts[-1], self._pid_lens))
        else:
            if steps.fold([sample], sample if not staged else None, counts):
                self._mixed = True
            staged.append(stage(sample, steps.layout, counts[-1]))
        if len(staged) >= STAGE_MAX or ts - staged[0].ts >= self.stage_max_s:
            self._flush()

    def flush(self) -> None:
        """Write staged samples out now (queries never need this; for measuring memory)."""
        if self._staged:
            self._flush()

    def _columns_of(self, rows: list[Staged]) -> dict[str, list[float]]:
        """The staged samples as one float column per series (NaN: missing), where they
        are not alike enough to be cut as one block (``block.py``).

        When every staged sample lists the same GPUs (the usual case) the columns are cut by
        position with ``zip``; otherwise GPUs are matched by index.
        """
        k = len(rows)
        values: dict[str, list[float]] = {}
        procs: dict[str, list[float]] = {}
        ts_last = rows[-1].ts
        per_gpu: list[tuple[int, list[list[float]], Sequence[Sequence[ProcPair] | None]]] = []
        gpus = len(rows[0].layout)
        width = gpus * GPU_NUMBERS
        if not self._mixed and all(len(r.layout) == gpus for r in rows):
            # One matrix of the GPUs' numbers, a sample a row: each series is a strided
            # slice of it, in C.
            flat = array("d")
            for r in rows:
                flat += r.numbers[_HOSTS:_HOSTS + width]
            pcols = zip(*[r.procs for r in rows], strict=True)
            for pos, (idx, pcol) in enumerate(zip(rows[0].layout, pcols, strict=True)):
                if idx >= 0:
                    at = pos * GPU_NUMBERS
                    per_gpu.append((idx, [flat[at + j::width].tolist()
                                          for j in range(GPU_NUMBERS)], pcol))
        else:
            by_gpu: dict[int, tuple[list[list[float]], list[Sequence[ProcPair] | None]]] = {}
            for i, r in enumerate(rows):
                nums = r.numbers
                for pos, (idx, p) in enumerate(zip(r.layout, r.procs, strict=True)):
                    if idx < 0:
                        continue
                    col = by_gpu.get(idx)
                    if col is None:
                        col = by_gpu[idx] = ([[NAN] * k for _ in range(GPU_NUMBERS)], [None] * k)
                    at = _HOSTS + pos * GPU_NUMBERS
                    for j, series in enumerate(col[0]):
                        series[i] = nums[at + j]
                    col[1][i] = p
            per_gpu = [(i, gs, ps) for i, (gs, ps) in by_gpu.items()]
        for idx, gs, ps in per_gpu:
            keys = self._gkeys.get(idx)
            if keys is None:
                keys = self._gkeys[idx] = tuple(gpu_key(idx, f) for f in GPU_FIELDS)
            for key, vals in zip(keys, gs, strict=True):
                values[key] = vals
            self._gpu_procs(idx, ps, ts_last, procs)
        for j, f in enumerate(HOST_NUMBERS):
            values[host_key(f)] = [r.numbers[j] for r in rows]
        values[host_key("gpu_count")] = self._staged_counts
        self._disk_columns(rows, values)
        values.update(procs)
        return values

    def _disk_columns(self, rows: list[Staged], values: dict[str, list[float]]) -> None:
        """Disk columns; samples listing the same disks in the same order are cut by zip."""
        names = rows[0].disk_names
        if names and all(r.disk_names == names for r in rows) \
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
        disks: dict[str, list[StagedDisk | None]] = {}
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

    def _gpu_procs(self, idx: int, plist: Sequence[Sequence[ProcPair] | None], ts: float,
                   procs: dict[str, list[float]]) -> None:
        """Process memory columns of one GPU; one steady process is the fast case."""
        p0 = plist[0]
        if p0 is not None and len(p0) == 1 and p0[0][0] is not None and None not in plist:
            lens = set(map(len, plist))  # type: ignore[arg-type]
            if lens == {1}:
                firsts = list(map(_FIRST, plist))  # type: ignore[arg-type]
                pids = list(map(_FIRST, firsts))
                pid = p0[0][0]
                if pids.count(pid) == len(pids):
                    key = self._track_proc(idx, pid, ts)
                    if key is not None:
                        procs[key] = _floats(list(map(_SECOND, firsts)))
                    return
        k = len(plist)
        for i, ps in enumerate(plist):
            for p_pid, used in ps or ():
                if p_pid is None:
                    continue
                key = self._track_proc(idx, p_pid, ts)
                if key is None:
                    continue
                col = procs.get(key)
                if col is None:
                    col = procs[key] = [NAN] * k
                if used is not None:
                    col[i] = used

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
            self._proc_gen += 1
        self._proc_seen[key] = ts
        return key

    def _flush(self) -> None:
        """Write the staged samples to the raw tier, then any coarse buckets now complete."""
        rows = self._staged
        ts = [r.ts for r in rows]
        block = None if self._mixed else self._block_columns(rows)
        if block is None:
            self.store.append_raw(ts, self._columns_of(rows))
        else:
            mat, plan = block
            self.store.append_block(ts, plan.order, encode(
                plan.matrix(mat, self._staged_counts), plan.codecs))
        self._staged = []
        self._staged_counts = []
        self._mixed = False
        self._forget_procs(ts[-1])
        if len(self.tiers) > 1:
            self.store.build(ts[-1])

    def _forget_procs(self, now: float) -> None:
        """Drop the series of processes not seen for ``process_forget_s``."""
        gone = [k for k, seen in self._proc_seen.items() if now - seen > self.process_forget_s]
        if gone:
            self._proc_gen += 1
        for key in gone:
            del self._proc_seen[key]
            parts = key.split("/")
            gpu = int(parts[1])
            self._pkeys.pop((gpu, int(parts[2])), None)
            self._procs_per_gpu[gpu] -= 1
            self.store.drop_series(key)

    # -- reading

    def series_keys(self) -> list[str]:
        """Keys of the dense series (for ``series``) and the step series (for ``steps``)."""
        return sorted(set(self.store.keys) | self._staged_keys()) + sorted(self._gpu_steps.steps)

    def _staged_keys(self) -> set[str]:
        """Dense keys the staged samples will create when written."""
        out: set[str] = set()
        for r in self._staged:
            out.update(host_key(f) for f in HOST_FIELDS)
            for idx in r.layout:
                if idx >= 0:
                    out.update(gpu_key(idx, f) for f in GPU_FIELDS)
            for name in r.disk_names:
                if name in self._disks or len(self._disks) < self.max_disks:
                    out.update(disk_key(name, f) for f in DISK_FIELDS)
        return out

    def series(self, key: SeriesKey) -> Series | None:
        """The dense series ``key`` (see ``gpu_key`` and friends), or None if never seen."""
        if key not in self.store.keys and self._latest_staged(key) is None:
            return None
        return Series(self, key)

    def steps(self, key: SeriesKey) -> StepSeries | None:
        """A step series (``GPU_STEP_FIELDS``), or None if never seen."""
        return self._gpu_steps.steps.get(key)

    def gpu_count_series(self) -> Series | None:
        """How many GPUs answered, per sample: a drop-out shows as a step down."""
        return self.series(host_key("gpu_count"))

    def gpu_indices(self) -> list[int]:
        """Every GPU index seen this run."""
        return sorted(self._gpu_steps.seen)

    def gpus_missing_since(self) -> dict[int, float]:
        """GPUs seen earlier but absent from the newest sample, with the first sample that
        lacked them."""
        return dict(self._gpu_steps.missing_since)

    def processes(self, gpu: int) -> list[int]:
        """Pids tracked on ``gpu`` (including ones only in samples not yet written)."""
        out = {pid for g, pid in self._pkeys if g == gpu}
        room = self.max_processes_per_gpu - len(out)
        seen: tuple[object, object] = (None, None)
        for r in self._staged:
            if r.layout is seen[0] and r.pids is seen[1]:
                continue  # the same pids as the row before (an epoch's): nothing new
            seen = (r.layout, r.pids)
            for idx, ps in zip(r.layout, r.pids, strict=True):
                if idx == gpu:
                    for pid in ps or ():
                        if pid is not None and pid not in out and room > 0:
                            out.add(pid)
                            room -= 1
        return sorted(out)

    def disks(self) -> list[str]:
        """Disk names tracked (including ones only in samples not yet written)."""
        out = set(self._disks)
        for r in self._staged:
            for name in r.disk_names:
                if name not in out and len(out) < self.max_disks:
                    out.add(name)
        return sorted(out)

    def nbytes(self) -> int:
        """Approximate bytes held by the columns (what grows with the run)."""
        return self.store.nbytes() + self._gpu_steps.nbytes()

    def _extractor(self, key: str) -> Callable[[Staged], float | None]:
        parts = key.split("/")
        scope, field = parts[0], parts[-1]
        if scope == "gpu":
            idx = int(parts[1])
            j = GPU_FIELDS.index(field) if field in GPU_FIELDS else -1

            def gpu_val(r: Staged) -> float | None:
                if j < 0 or idx not in r.layout:
                    return None
                return r.numbers[_HOSTS + r.layout.index(idx) * GPU_NUMBERS + j]
            return gpu_val
        if scope == "host":
            if field == "gpu_count":
                return attrgetter("ok_count")
            at = _HOST_AT.get(field)

            def host_val(r: Staged) -> float | None:
                if at is None:  # as the named tuple the host was staged as did
                    raise AttributeError(field)
                return r.numbers[at]
            return host_val
        if scope == "disk":
            name = parts[1]
            j = DISK_FIELDS.index(field)

            def disk_val(r: Staged) -> float | None:
                nums = disk_numbers(r, name)
                if nums is None:
                    return None
                if j == 0:
                    return nums[0]
                if j == 2:
                    return nums[3]
                ra, wa = nums[1], nums[2]
                return ra if wa is None else (wa if ra is None else max(ra, wa))
            return disk_val
        gpu, pid = int(parts[1]), int(parts[2])

        def proc_val(r: Staged) -> float | None:
            return proc_mib(r, gpu, pid)
        return proc_val

    def _staged_values(self, key: str) -> list[float | None]:
        """Series ``key``'s value in each staged sample (None: not there), as ``_extractor``
        reads them one by one; a GPU's or the host's read by position, a GPU's place looked
        up once per layout (the host's samples share one), not per sample (issue 38)."""
        staged = self._staged
        parts = key.split("/")
        scope, field = parts[0], parts[-1]
        if scope == "gpu" and len(parts) == 3 and field in GPU_FIELDS:
            idx = int(parts[1])
            j = _HOSTS + GPU_FIELDS.index(field)
            out: list[float | None] = []
            layout: tuple[int, ...] | None = None
            at = -1
            for r in staged:
                if r.layout is not layout:
                    layout = r.layout
                    at = j + layout.index(idx) * GPU_NUMBERS if idx in layout else -1
                out.append(r.numbers[at] if at >= 0 else None)
            return out
        if scope == "host":
            at_host = _HOST_AT.get(field)
            if at_host is not None:
                return [r.numbers[at_host] for r in staged]
        get = self._extractor(key)
        return [get(r) for r in staged]

    def _latest_staged(self, key: str) -> Point | None:
        if not self._staged:
            return None
        vals = self._staged_values(key)
        for i in range(len(vals) - 1, -1, -1):
            v = vals[i]
            if v is not None and v == v:
                fv = float(v)
                return Point(self._staged[i].ts, fv, fv, fv, 1)
        return None
