"""A host's fleet row's GPU verdicts and numbers, read from the tick as the fold reads it.

The fleet screen builds a row for every on-screen host every second and for the others at
their refresh slot: about 400 rows a second at a thousand hosts.  Each built the sample's
``GpuSample`` objects (a v2 tick's are built on first read: ``HostSample.gpus``) and judged
every GPU again (``judge_gpus``).  Here the numbers come from the tick's row and its static
epoch (``tick_gpus``, as the per-tick findings read them), and each GPU's verdict is kept
while what it reads holds: the findings, hello, static epoch and limits (judged once), and
the few moving inputs (``moving_key``) compared each build; a verdict not kept yet comes
from ``judge_parts`` (issue 38).  The answers equal ``judge_gpus`` and the sample's GPUs',
value for value (``tests/analysis/test_fleet_rows_equivalent.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING

from probes.analysis.fleet_counts import count_by_severity
from probes.analysis.fleet_row import FleetRow, jobs_of
from probes.analysis.headline import worst_headline
from probes.analysis.judge import (
    NO_PEERS,
    FoundMarks,
    GpuJudgement,
    GpuVerdict,
    TempLevel,
    field_notes_of,
    findings_marks,
    finite,
    is_busy,
    judge_gpu_afresh,
    peer_link,
    temp_thresholds,
)
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.tick_gpus import MovingGpu, tick_gpus
from probes.triage import Severity
from probes.wire.compact import GPU_ROW_FIELDS
from probes.wire.samples import GpuSample, Hello, HostSample

if TYPE_CHECKING:
    from probes.analysis.findings import Finding

_INDEX = attrgetter("index")


_MEMO_MAX = 65536
"""Judgements kept by their inputs; the table is emptied when it reaches this size."""
_memo: dict[tuple[object, ...], GpuJudgement] = {}
_memo_limits: dict[int, DetectorLimits] = {}
"""The limits in the keys (by id), held so that no id is reused while its entries live."""


MovingKey = tuple[tuple[str, ...], bool, int, int, bool, bool]
"""What of a GPU's moving numbers its verdicts read: (clock reasons, busy, temperature's
level, memory temperature's level (``TempLevel.rank``), memory high, power near its
limit)."""
TempBounds = tuple[float, float, float, float]
"""(hot, warm) for the GPU and for its memory, in °C (``temp_thresholds``)."""


def temp_bounds(slowdown_c: float | None,
                limits: DetectorLimits = DEFAULT_LIMITS) -> TempBounds:
    """The temperatures at which a GPU (with this slowdown threshold) and its memory read
    hot and warm: what ``moving_key`` sorts a temperature by."""
    return temp_thresholds(slowdown_c, limits) + temp_thresholds(None, limits)


def moving_key(moving: MovingGpu, fixed: GpuSample, limits: DetectorLimits,
               bounds: TempBounds) -> MovingKey:
    """The moving half of ``judge_gpu``'s key: ``moving`` a GPU's moving numbers (a tick's
    ``GpuRow``, or the sample's GPU), ``fixed`` its static half (the same GPU, or the static
    epoch's; ``probes.analysis.tick_gpus``), ``bounds`` its ``temp_bounds``.  Temperatures
    enter as their levels (what the verdicts read of them), so a degree's move keeps it."""
    used, total = moving.mem_used_mib, fixed.mem_total_mib
    power, cap = moving.power_w, fixed.power_limit_w
    t, tm = moving.temp_c, moving.temp_mem_c
    hot, warm, mem_hot, mem_warm = bounds
    return (moving.clock_reasons, is_busy(moving.util_pct, limits),
            # temp_level's rank, inlined (None and NaN: unknown)
            0 if t is None or t != t else 3 if t >= hot else 2 if t >= warm else 1,
            0 if tm is None or tm != tm else 3 if tm >= mem_hot else 2 if tm >= mem_warm
            else 1,
            # mem_high and power_near_limit inlined: this runs for every GPU every tick
            used is not None and total is not None and total != 0
            and (pct := 100.0 * used / total) == pct
            and pct >= limits.mem_high_pct,
            power is not None and cap is not None and cap > 0
            and power >= limits.power_near_share * cap)


def judge_parts(moving: MovingGpu, fixed: GpuSample, key: MovingKey, slowdown_c: float | None,
                code_set: frozenset[str], leak: Severity | None,
                limits: DetectorLimits = DEFAULT_LIMITS,
                not_collected: tuple[tuple[str, str], ...] = (),
                peers: tuple[int | None, int | None] = NO_PEERS) -> GpuJudgement:
    """``judge_gpu`` of a GPU given as its two halves (``moving_key``; ``key`` is theirs),
    so a v2 tick's GPU is judged from its row without building its ``GpuSample`` (issue 38:
    the fleet rows built every sample's GPUs to judge them).  Kept by its inputs as
    ``judge_gpu`` keeps its answers, the temperatures by level; only a judgement not kept
    yet joins the two halves into one sample to judge."""
    if _memo_limits.get(id(limits)) is not limits:
        _memo_limits[id(limits)] = limits
    full = (id(limits), fixed.index, fixed.state, slowdown_c, code_set, leak, fixed.pcie_gen,
            fixed.pcie_width, fixed.pcie_gen_max, fixed.pcie_width_max, not_collected,
            peers if fixed.pcie_gen_max is None or fixed.pcie_width_max is None
            else NO_PEERS, key)
    judged = _memo.get(full)
    if judged is None:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
            _memo_limits.clear()
            _memo_limits[id(limits)] = limits
        gpu = fixed if moving is fixed else _joined(moving, fixed)
        judged = _memo[full] = judge_gpu_afresh(gpu, slowdown_c, code_set, leak, limits,
                                                not_collected, peers)
    return judged


_MOVING_FIELDS = tuple(f for f in GPU_ROW_FIELDS if f != "processes")


def _joined(moving: MovingGpu, fixed: GpuSample) -> GpuSample:
    """The GPU whose static half is ``fixed`` with ``moving``'s numbers (its processes the
    static ones, which no verdict reads)."""
    values = fixed.__dict__.copy()
    for name in _MOVING_FIELDS:
        values[name] = getattr(moving, name)
    gpu: GpuSample = object.__new__(GpuSample)
    object.__setattr__(gpu, "__dict__", values)
    return gpu

GpuInputs = tuple[int, GpuSample, float | None, frozenset[str], Severity | None,
                  tuple[int | None, int | None], float | None, TempBounds]
"""One sampled GPU's judged-once inputs: (position in the tick, static half, slowdown
threshold, codes of the findings about it, leak severity, the host's best link, when it went
if it is gone, its temperatures' bounds)."""


class _Fixed:
    """What a host's verdicts read that moves only with its findings, hello, static epoch,
    limits or expected count: everything but the moving numbers, worked out once."""

    __slots__ = ("expected", "extras", "fixed", "found", "gpus", "hello", "limits", "marks",
                 "notes")

    def __init__(self, fixed: Sequence[GpuSample], hello: Hello | None,
                 found: Sequence[Finding], marks: FoundMarks, limits: DetectorLimits,
                 expected: int | None) -> None:
        self.fixed, self.hello, self.found, self.marks = fixed, hello, found, marks
        self.limits, self.expected = limits, expected
        codes, leaks, gone_at = marks
        slowdown = {g.index: g.temp_slowdown_c for g in hello.facts.gpus} if hello else {}
        notes = self.notes = field_notes_of(hello)
        sampled = [(pos, g) for pos, g in enumerate(fixed) if g.index >= 0]
        peers = peer_link(g for _, g in sampled)
        self.gpus: list[GpuInputs] = [
            (pos, g, slowdown.get(g.index), frozenset(codes.get(g.index, ())),
             leaks.get(g.index), peers, finite(gone_at.get(g.index)),
             temp_bounds(slowdown.get(g.index), limits))
            for pos, g in sampled]
        seen = {g.index for _, g in sampled}
        reported = (set(slowdown) | set(gone_at)) - seen
        extras = [GpuJudgement(i, GpuVerdict.LOST, False, (), TempLevel.UNKNOWN,
                               TempLevel.UNKNOWN, None, None, since=finite(gone_at.get(i)),
                               answering=False, not_collected=notes)
                  for i in sorted(reported)]
        seen |= reported
        if expected is not None:
            free = (i for i in range(expected + len(seen)) if i not in seen)
            extras += [GpuJudgement(next(free), GpuVerdict.MISSING, False, (),
                                    TempLevel.UNKNOWN, TempLevel.UNKNOWN, None, None,
                                    answering=False, not_collected=notes)
                       for _ in range(max(0, expected - len(seen)))]
        self.extras = extras

    def holds(self, fixed: Sequence[GpuSample], hello: Hello | None,
              limits: DetectorLimits, expected: int | None) -> bool:
        """Whether these are the inputs beyond the findings it was worked out from (the same
        objects)."""
        return (fixed is self.fixed and hello is self.hello and limits is self.limits
                and expected == self.expected)


class RowJudge:
    """One host's row verdicts and numbers, kept between builds (``HostState.row_judge``).

    A memo, not state: every answer is a function of the arguments; what is kept only
    spares judging again what did not move."""

    __slots__ = ("_counted", "_hottest", "_jobs", "_judged", "_keys", "_out", "_state")

    def __init__(self) -> None:
        self._state: _Fixed | None = None
        self._keys: list[MovingKey | None] = []
        self._out: list[GpuJudgement | None] = []
        self._judged: tuple[GpuJudgement, ...] | None = None
        self._hottest = TempLevel.UNKNOWN
        self._counted: tuple[list[Finding], tuple[int, int, int], str | None] | None = None
        self._jobs: tuple[Sequence[GpuSample], tuple[str, ...]] | None = None

    def judged(self, sample: HostSample | None, hello: Hello | None,
               found: Sequence[Finding], limits: DetectorLimits,
               expected: int | None = None) -> tuple[GpuJudgement, ...]:
        """``judge_gpus(sample, hello, found, limits, expected)``, without building a v2
        tick's GPUs.  ``found`` is compared by identity: pass the host's kept merge."""
        if sample is None:
            return ()
        moving, fixed, _ = tick_gpus(sample)
        state = self._state
        if state is None or found is not state.found \
                or not state.holds(fixed, hello, limits, expected):
            marks = findings_marks(found)
            if state is not None and state.holds(fixed, hello, limits, expected) \
                    and marks == state.marks:
                state.found = found  # other findings, the same codes, leaks and onsets
            else:
                state = self._state = _Fixed(fixed, hello, found, marks, limits, expected)
                self._keys = [None] * len(state.gpus)
                self._out = [None] * len(state.gpus)
                self._judged = None
        keys, out, notes = self._keys, self._out, state.notes
        moved = self._judged is None
        for k, (pos, g, slowdown, codes, leak, peers, since, bounds) in enumerate(state.gpus):
            m = moving[pos]
            key = moving_key(m, g, limits, bounds)
            if keys[k] != key:
                keys[k] = key
                j = judge_parts(m, g, key, slowdown, codes, leak, limits, notes, peers)
                if j.gone:
                    j = replace(j, since=since)
                out[k] = j
                moved = True
        if moved:
            judged = self._judged = tuple(sorted([*out, *state.extras],  # type: ignore[list-item]
                                                 key=_INDEX))
            self._hottest = max((j.temp for j in judged), key=lambda t: t.rank,
                                default=TempLevel.UNKNOWN)
        return self._judged  # type: ignore[return-value]

    def counted(self, found: list[Finding]) -> tuple[tuple[int, int, int], str | None]:
        """``count_by_severity(found)`` and ``worst_headline(found)``, kept while the same
        list comes back (``found`` compared by identity: pass the host's kept merge)."""
        kept = self._counted
        if kept is None or kept[0] is not found:
            kept = self._counted = (found, count_by_severity(found), worst_headline(found))
        return kept[1], kept[2]

    @property
    def hottest(self) -> TempLevel:
        """The hottest of the last ``judged`` GPUs' levels (the row's ``temp_level``)."""
        return self._hottest

    def jobs(self, sample: HostSample | None) -> tuple[str, ...]:
        """``jobs_of(sample)``: a v2 tick's from its static epoch's processes (their jobs
        are static facts), worked out once per epoch."""
        if sample is None:
            return ()
        _, fixed, rows = tick_gpus(sample)
        if rows is None:
            return jobs_of(sample)
        kept = self._jobs
        if kept is None or kept[0] is not fixed:
            found = {p.slurm_job for g in fixed for p in g.processes or () if p.slurm_job}
            kept = self._jobs = (fixed, tuple(sorted(found, key=lambda j: (len(j), j))))
        return kept[1]


def row_numbers(sample: HostSample | None
                ) -> tuple[float | None, float, float, float | None, float | None]:
    """(hottest GPU °C, memory used MiB, of a total MiB, mean utilisation %, power W) of a
    sample's GPUs, each over the GPUs that report it, read from the tick's row where it has
    one (the sums taken in the same order as over its GPUs)."""
    if sample is None:
        return None, 0.0, 0.0, None, None
    moving: Sequence[MovingGpu]
    moving, fixed, _ = tick_gpus(sample)
    temps: list[float] = []
    used: list[float] = []
    total: list[float] = []
    utils: list[float] = []
    powers: list[float] = []
    for m, g in zip(moving, fixed, strict=True):  # one pass; each sum over its own list
        if (t := m.temp_c) is not None:
            temps.append(t)
        mib = m.mem_used_mib
        used.append(mib or 0.0)
        if mib is not None:
            total.append(g.mem_total_mib or 0.0)
        if (u := m.util_pct) is not None:
            utils.append(u)
        if (p := m.power_w) is not None:
            powers.append(p)
    return (max(temps) if temps else None, sum(used), sum(total),
            sum(utils) / len(utils) if utils else None, sum(powers) if powers else None)


def renumbered(row: FleetRow, sample: HostSample | None) -> FleetRow:
    """``row`` with the four numbers an order sorts by (hottest °C, memory %, mean
    utilisation %, power W) read afresh from ``sample``, its verdicts as they were.

    For an off-screen row under a numeric order (issue 38): its verdicts (status, findings,
    counts, GPUs answering) are kept while the host moved only numbers, and a full build at
    each refresh slot, ~0.2 of the fleet a second, was most of the redraw.  The numbers are
    those ``HostState.row`` computes from the same sample (``row_numbers``); ``row`` itself
    when none moved, else a copy of its fields (as ``fleet_rows._retimed``)."""
    max_temp, used, total, util, power = row_numbers(sample)
    mem = 100.0 * used / total if total else None
    if (max_temp == row.max_temp_c and mem == row.mem_used_pct
            and util == row.mean_util_pct and power == row.power_w):
        return row
    values = row.__dict__.copy()
    values["max_temp_c"] = max_temp
    values["mem_used_pct"] = mem
    values["mean_util_pct"] = util
    values["power_w"] = power
    out: FleetRow = object.__new__(FleetRow)
    object.__setattr__(out, "__dict__", values)
    return out
