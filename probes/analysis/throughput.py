"""Training throughput per job log, live, and ``throughput-drop``: a sustained fall against
the run's own median, tied to what changed on the same host at the same time.

The agent streams job-log lines; :class:`ThroughputTracker` reads each with the trainers'
progress-line rules (``probes.rules.throughput``) and keeps one series per log, in the first
unit the log gave (tokens/s before samples/s before it/s within a line).  The drop is judged
against the median of the readings *before* it began, so a long drop does not become its own
baseline, and only when every reading since has stayed under it for ``throughput_drop_s``.

Why a drop matters is what happened beside it: a GPU that throttled, fell off the bus or
vanished, a disk at 100 %, a host swapping, NCCL trouble.  The finding is placed under the
triage step of the likely cause (so it sits with the throttling it came from), and under the
model code step when nothing else changed — then the program itself slowed down.
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory, gpu_key
from probes.rules.logrules.lines import peel
from probes.rules.throughput import Reading, read_line
from probes.triage import Code, Severity, Step

MAX_POINTS = 4000
"""Readings kept per log: past this the older half is thinned to every other reading."""
MIN_BASELINE = 5
"""Readings before a drop needed to call the run's median known."""
MIN_DROP = 3
"""Readings in a drop needed to call it one (one slow step is no trend)."""

CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    ((Code.GPU_LOST, Code.GPU_FALLEN_OFF_BUS, Code.GPU_DROPOUT, Code.GPU_UNRESPONSIVE,
      Code.XID), "a GPU was lost"),
    ((Code.THROTTLED_WHILE_BUSY, Code.CLOCKS_THROTTLED, Code.POWER_PINNED,
      Code.TEMP_NEAR_SLOWDOWN), "a GPU throttled"),
    ((Code.DATA_STARVATION, Code.DISK_SATURATED), "the input pipeline starved"),
    ((Code.OOM_KILLER, Code.HOST_SWAPPING, Code.SWAP_ACTIVITY), "the host ran short of memory"),
    ((Code.RANK_FAILED, Code.NCCL_TIMEOUT, Code.NCCL_NET_ERROR, Code.NCCL_ERROR,
      Code.NVLINK_DOWN, Code.PCIE_LINK_DOWNGRADED, Code.LINK_DOWNGRADE_APPEARED),
     "communication slowed"),
)
"""What can slow a run, most decisive kind first; the first kind found beside the drop is
named.  Within a kind, at one severity, the codes go from what slows the run to what warns
of it (clocks held down before a temperature near its limit), so the finding named does not
hang on which of the two a window's edge dated first."""
ACTIONS = {
    "a GPU was lost": "The job runs without (or waits for) a GPU: drain the host, read the Xid "
                      "and restart the job on healthy GPUs",
    "a GPU throttled": "Synchronous training runs at the slowest GPU's pace: fix the cooling "
                       "or power of the throttling GPU (fans, inlet air, power cap)",
    "the input pipeline starved": "The GPUs wait for data: check the dataset disk and the "
                                  "loader workers (iostat, CPU), stage data to local NVMe",
    "the host ran short of memory": "Free host memory (loader workers, pinned buffers) so the "
                                    "host stops swapping",
    "communication slowed": "Check the links (nvidia-smi nvlink -s, ibstat, PCIe width) and "
                            "rerun nccl-tests between the hosts",
}
STARVED = "the GPUs waited for work"
"""No finding beside the drop, but the GPUs' utilisation fell with it: they sat idle between
steps (an input pipeline or a peer that cannot keep up), not slower at the same work."""
UTIL_FALL_PCT = 15.0
"""Mean utilisation this many points lower during a drop than before it reads as waiting."""
ACTIONS[STARVED] = ("The GPUs idle between steps: check the data loader (workers, CPU, "
                    "dataset disk iostat) and, for a multi-host job, the slowest rank")
ACTION_MODEL = ("Nothing else on the host changed: look at the program (a new data shard, "
                "logging, checkpointing, evaluation, a slow rank on another host)")


@dataclass
class _Series:
    unit: str
    ts: deque[float] = field(default_factory=deque)
    values: deque[float] = field(default_factory=deque)
    version: int = 0
    line: str = ""
    """The newest progress line as the log printed it: the finding's evidence."""


def _value(r: Reading) -> tuple[str, float] | None:
    for unit, v in (("tokens/s", r.tokens_s), ("samples/s", r.samples_s), ("it/s", r.iters_s)):
        if v is not None:
            return unit, v
    return None


@dataclass(frozen=True)
class Drop:
    """A sustained fall: since ``onset``, every reading under the run's earlier median."""

    source: str
    unit: str
    onset: float
    baseline: float
    now: float
    readings: int
    newest: float
    line: str = ""


@dataclass(frozen=True)
class JobSpeed:
    """One job log's training speed now, beside the run's median, for the host screen."""

    source: str
    unit: str
    now: float
    median: float
    """The run's median; during a drop, the median before it (the drop's baseline)."""
    dropped: bool
    """``throughput-drop`` holds for this log (the core's verdict; screens only show it)."""

    @property
    def share(self) -> float:
        """``now`` as a share of the run's median."""
        return self.now / self.median if self.median > 0 else 1.0


def reading(text: str) -> tuple[str, float] | None:
    """A progress line's (unit, value), from its peeled text; None for any other line."""
    r = read_line(text)
    if r is None or not r.rate or r.summary:
        return None
    return _value(r)


class ThroughputTracker:
    """One throughput series per job log of one host, fed line by line."""

    def __init__(self) -> None:
        self._series: dict[str, _Series] = {}
        self._judged: dict[str, tuple[int, DetectorLimits, Drop | None]] = {}

    def add(self, source: str, line: str, ts: float) -> None:
        """Read one job-log line; a progress line adds a point to its log's series."""
        got = reading(peel(line)[0])
        if got is not None:
            self.add_reading(source, ts, got, line)

    def add_reading(self, source: str, ts: float, got: tuple[str, float], line: str) -> None:
        """Add one progress line's (unit, value), read already (by the log worker)."""
        unit, v = got
        s = self._series.get(source)
        if s is None:
            s = self._series[source] = _Series(unit)
        if unit != s.unit:
            return
        s.ts.append(ts)
        s.values.append(v)
        s.version += 1
        s.line = line
        if len(s.values) > MAX_POINTS:
            _thin(s)

    def sources(self) -> tuple[str, ...]:
        return tuple(self._series)

    def series(self, source: str) -> tuple[str, list[tuple[float, float]]]:
        """A log's unit and its (ts, value) points, oldest first."""
        s = self._series[source]
        return s.unit, list(zip(s.ts, s.values, strict=True))

    def newest(self, source: str) -> float | None:
        s = self._series.get(source)
        return s.values[-1] if s is not None and s.values else None

    def speeds(self, limits: DetectorLimits = DEFAULT_LIMITS) -> tuple[JobSpeed, ...]:
        """Each log's newest reading beside its run's median, and whether it dropped."""
        drops = {d.source: d for d in self.drops(limits)}
        return tuple(JobSpeed(name, s.unit, s.values[-1],
                              drops[name].baseline if name in drops
                              else statistics.median(s.values), name in drops)
                     for name, s in self._series.items() if s.values)

    def drops(self, limits: DetectorLimits = DEFAULT_LIMITS) -> list[Drop]:
        """Every log's current drop (recomputed only when the log gained readings)."""
        out = []
        for name, s in self._series.items():
            cached = self._judged.get(name)
            if cached is None or cached[0] != s.version or cached[1] != limits:
                drop = find_drop(name, s.unit, list(s.ts), list(s.values), limits)
                cached = (s.version, limits,
                          None if drop is None else dataclasses.replace(drop, line=s.line))
                self._judged[name] = cached
            if cached[2] is not None:
                out.append(cached[2])
        return out


def _thin(s: _Series) -> None:
    half = len(s.values) // 2
    ts, values = list(s.ts), list(s.values)
    s.ts = deque(ts[:half:2] + ts[half:])
    s.values = deque(values[:half:2] + values[half:])


def _prefix_medians(values: Sequence[float]) -> list[float | None]:
    """``out[i]`` is the median of ``values[:i]`` (None for i = 0), in O(n log n)."""
    low: list[float] = []  # max-heap (negated)
    high: list[float] = []
    out: list[float | None] = [None]
    for v in values:
        if not low or v <= -low[0]:
            heapq.heappush(low, -v)
        else:
            heapq.heappush(high, v)
        if len(low) > len(high) + 1:
            heapq.heappush(high, -heapq.heappop(low))
        elif len(high) > len(low):
            heapq.heappush(low, -heapq.heappop(high))
        out.append(-low[0] if len(low) > len(high) else (-low[0] + high[0]) / 2.0)
    return out


def find_drop(source: str, unit: str, ts: Sequence[float], values: Sequence[float],
              limits: DetectorLimits = DEFAULT_LIMITS) -> Drop | None:
    """The drop at the end of a series, or None.

    The drop's start is the earliest reading such that it and every later one lie under
    ``1 - throughput_drop_share`` of the median of all the readings before it (so however
    long the drop lasts, its baseline is the run before it); it counts once it has lasted
    ``throughput_drop_s`` and holds :data:`MIN_DROP` readings.
    """
    n = len(values)
    if n < MIN_BASELINE + MIN_DROP:
        return None
    keep = 1.0 - limits.throughput_drop_share
    medians = _prefix_medians(values)
    tops = list(values)
    for i in range(n - 2, -1, -1):
        tops[i] = max(tops[i], tops[i + 1])
    onset = next((i for i in range(MIN_BASELINE, n - MIN_DROP + 1)
                  if (m := medians[i]) is not None and m > 0 and tops[i] < keep * m), None)
    if onset is None or ts[-1] - ts[onset] < limits.throughput_drop_s:
        return None
    base = medians[onset] or 0.0
    return Drop(source, unit, ts[onset], base, statistics.median(values[onset:]), n - onset,
                ts[-1])


def _cause(drop: Drop, others: Sequence[Finding],
           limits: DetectorLimits) -> tuple[str, Finding] | None:
    near = [f for f in others if f.code != Code.THROUGHPUT_DROP
            and (f.ts is None or f.ts >= drop.onset - limits.throughput_cause_s)
            and (f.ts is None or f.ts <= drop.newest)]
    for codes, why in CAUSES:
        hits = sorted((f for f in near if f.code in codes),
                      key=lambda f: (-f.severity.rank, codes.index(f.code), f.ts or 0.0))
        if hits:
            return why, hits[0]
    return None


def util_fall(history: HostHistory, drop: Drop, limits: DetectorLimits) -> float | None:
    """How many points the GPUs' mean utilisation fell from before the drop to during it
    (None when the history does not cover both stretches)."""
    before: list[float] = []
    during: list[float] = []
    for idx in history.gpu_indices():
        series = history.series(gpu_key(idx, "util_pct"))
        if series is None:
            continue
        for p in series.points(drop.onset - limits.throughput_cause_s, drop.newest):
            (before if p.t < drop.onset else during).append(p.mean)
    if not before or not during:
        return None
    return statistics.fmean(before) - statistics.fmean(during)


def throughput_findings(host: str, tracker: ThroughputTracker, others: Sequence[Finding],
                        limits: DetectorLimits = DEFAULT_LIMITS,
                        history: HostHistory | None = None) -> list[Finding]:
    """``throughput-drop`` for each of the host's job logs whose throughput fell and stayed
    down, under the step of what changed beside it (``others``: the host's other findings;
    ``history``: its samples, read when no finding names a cause, for idle GPUs)."""
    out = []
    for drop in tracker.drops(limits):
        pct = 100.0 * (1.0 - drop.now / drop.baseline)
        cause = _cause(drop, others, limits)
        fell = util_fall(history, drop, limits) if cause is None and history else None
        if cause is None and fell is not None and fell >= UTIL_FALL_PCT:
            out.append(Finding(
                Step.GPU, Code.THROUGHPUT_DROP, Severity.WARNING,
                f"training throughput {pct:.0f}% below the run's median "
                f"({_fmt(drop.baseline)} → {_fmt(drop.now)} {drop.unit}); at the same time "
                f"{STARVED}: GPU utilisation {fell:.0f} points lower", host, ts=drop.onset,
                action=ACTIONS[STARVED], source=drop.source, evidence=drop.line or None,
                extra={"baseline": round(drop.baseline, 3), "now": round(drop.now, 3),
                       "unit": drop.unit, "drop_pct": round(pct, 1), "readings": drop.readings,
                       "cause": "gpu-idle", "util_fall_pct": round(fell, 1)}))
            continue
        what = (f"training throughput {pct:.0f}% below the run's median "
                f"({_fmt(drop.baseline)} → {_fmt(drop.now)} {drop.unit}) for "
                f"{(drop.newest - drop.onset) / 60.0:.0f} min")
        extra: dict[str, object] = {"baseline": round(drop.baseline, 3),
                                    "now": round(drop.now, 3), "unit": drop.unit,
                                    "drop_pct": round(pct, 1), "readings": drop.readings}
        if cause is None:
            out.append(Finding(Step.MODEL, Code.THROUGHPUT_DROP, Severity.WARNING,
                               what + "; nothing else on the host changed", host,
                               ts=drop.onset, action=ACTION_MODEL, source=drop.source,
                               evidence=drop.line or None, extra=extra))
            continue
        why, f = cause
        where = f"GPU{f.gpu} " if f.gpu is not None else ""
        extra.update(cause=str(f.code), cause_gpu=f.gpu)
        out.append(Finding(f.step, Code.THROUGHPUT_DROP, Severity.WARNING,
                           f"{what}; at the same time {why}: {where}{f.code} ({f.summary})",
                           host, gpu=f.gpu, ts=drop.onset, action=ACTIONS[why],
                           source=drop.source, evidence=drop.line or None, extra=extra))
    return out


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
