"""A job log's readings gathered into one throughput series, in one unit.

A log can say its speed in several ways at once (Megatron prints the iteration time and the
TFLOP/s per GPU; a Trainer log has the bar's it/s and a closing samples/s): the series is in
the most telling unit the log gives at least :data:`MIN_POINTS` times — tokens/s, then
samples/s, then iterations/s — and the other figures go to the summary.  A log with a
training bar and an evaluation bar keeps the bar with the most readings.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from probes.rules.logrules.lines import LogLine
from probes.rules.throughput.readings import Reading, read_line

MIN_POINTS = 2
"""A unit seen fewer times than this is not the series' unit (a one-off summary line)."""
SERIES_KEEP = 500
"""Points kept in ``explain``'s summary (the newest); the count says how many there were."""
UNITS = ("tokens/s", "samples/s", "it/s")


@dataclass(frozen=True)
class Point:
    """One reading of the series: its line, the line's own time stamp (if any) and step."""

    line: int
    time: str | None
    step: int | None
    value: float


@dataclass(frozen=True)
class ThroughputSeries:
    """A log's throughput: the points in one unit and what else the log said about speed."""

    trainer: str
    unit: str
    per_gpu: bool
    points: tuple[Point, ...]
    tflops_gpu: float | None
    mfu_pct: float | None
    peak_mem_gib: float | None
    world_size: int | None
    run_average: float | None
    """The trainer's own whole-run figure in ``unit`` (the Trainer's closing dict)."""

    @property
    def median(self) -> float | None:
        return statistics.median(p.value for p in self.points) if self.points else None

    def to_parsed(self) -> dict[str, object]:
        """``explain``'s ``throughput`` summary of a log."""
        values = [p.value for p in self.points]
        return {
            "trainer": self.trainer, "unit": self.unit, "per_gpu": self.per_gpu,
            "points": len(values), "median": _r(self.median),
            "first": _r(values[0]) if values else None,
            "last": _r(values[-1]) if values else None,
            "min": _r(min(values)) if values else None,
            "max": _r(max(values)) if values else None,
            "run_average": _r(self.run_average), "tflops_per_gpu": _r(self.tflops_gpu),
            "mfu_pct": _r(self.mfu_pct), "peak_mem_gib": _r(self.peak_mem_gib),
            "world_size": self.world_size,
            "series": [[p.line, p.step, _r(p.value)] for p in self.points[-SERIES_KEEP:]]}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def _value(r: Reading, unit: str) -> float | None:
    return {"tokens/s": r.tokens_s, "samples/s": r.samples_s, "it/s": r.iters_s}[unit]


@dataclass(frozen=True)
class Seen:
    """A line that told something about speed: its number, its time stamp, the reading."""

    number: int
    time: str | None
    reading: Reading


MAX_SEEN = 100_000
"""Readings a huge log keeps: past this every other rate reading goes (the series thins,
its shape stays), so memory is bounded however many tqdm updates a log holds."""


def collect(lines: Sequence[LogLine], into: list[Seen] | None = None) -> list[Seen]:
    """Add the readings of ``lines`` to ``into`` (a new list when None), thinned past
    :data:`MAX_SEEN`."""
    out = [] if into is None else into
    for line in lines:
        r = read_line(line.text)
        if r is not None:
            out.append(Seen(line.number, line.time, r))
    if len(out) > MAX_SEEN:
        rates = [s for s in out if s.reading.rate and not s.reading.summary]
        drop = {id(s) for s in rates[::2]}
        out[:] = [s for s in out if id(s) not in drop]
    return out


def series_of(lines: Sequence[LogLine]) -> ThroughputSeries | None:
    """The throughput series of a log, or None when no line tells a speed."""
    return assemble(collect(lines))


def assemble(seen: Sequence[Seen]) -> ThroughputSeries | None:
    """The series from what :func:`collect` gathered, or None when nothing tells a speed."""
    found = [(_Where(s.number, s.time), s.reading) for s in seen]
    rates = [(line, r) for line, r in found if r.rate and not r.summary]
    summaries = [r for _, r in found if r.summary]
    if not rates and not summaries:
        return None
    bars = Counter(r.bar_total for _, r in rates if r.bar_total is not None)
    if bars:
        keep = bars.most_common(1)[0][0]
        rates = [(line, r) for line, r in rates if r.bar_total in (None, keep)]
    seq = next((r.seq_len for _, r in found if r.seq_len), None)
    if seq is not None:  # Megatron prints samples; with its seq_length that is tokens
        rates = [(line, _with_tokens(r, seq)) for line, r in rates]
    unit = next((u for u in UNITS
                 if sum(_value(r, u) is not None for _, r in rates) >= MIN_POINTS), None)
    if unit is None:
        unit = next((u for u in UNITS if any(_value(r, u) is not None for r in summaries)),
                    "it/s")
    points = tuple(Point(line.number, line.time, r.step, v) for line, r in rates
                   if (v := _value(r, unit)) is not None)
    used = [r for _, r in rates if _value(r, unit) is not None] or [r for _, r in found]
    trainer = Counter(r.trainer for r in used if r.trainer != "setup").most_common(1)
    avg = next((v for r in summaries if (v := _value(r, unit)) is not None), None)
    tflops = [r.tflops_gpu for _, r in found if r.tflops_gpu is not None]
    mfu = [r.mfu_pct for _, r in found if r.mfu_pct is not None]
    mem = [r.peak_mem_gib for _, r in found if r.peak_mem_gib is not None]
    world = next((r.world_size for _, r in found if r.world_size), None)
    name = trainer[0][0] if trainer else "log"
    if name == "tqdm" and any(r.trainer == "hf-trainer" for r in summaries):
        name = "hf-trainer"  # the Trainer's bar is plain tqdm; its closing dict says whose
    return ThroughputSeries(
        name, unit,
        any(r.per_gpu for r in used) and unit == "tokens/s", points,
        statistics.median(tflops) if tflops else None, statistics.median(mfu) if mfu else None,
        max(mem) if mem else None, world, avg)


@dataclass(frozen=True)
class _Where:
    number: int
    time: str | None


def _with_tokens(r: Reading, seq: int) -> Reading:
    if r.tokens_s is not None or r.samples_s is None or r.trainer != "megatron":
        return r
    return Reading(r.trainer, r.step, tokens_s=r.samples_s * seq, samples_s=r.samples_s,
                   iters_s=r.iters_s, tflops_gpu=r.tflops_gpu, mfu_pct=r.mfu_pct,
                   peak_mem_gib=r.peak_mem_gib, per_gpu=r.per_gpu, bar_total=r.bar_total,
                   global_batch=r.global_batch)
