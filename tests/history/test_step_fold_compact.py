"""A host's step series held small answer every question as before (issue 38, memory).

``GpuSteps`` kept a ``StepSeries`` per key (~88 a host, nearly all changing once) in a
dict, a copy of a ``GpuSample`` per row GPU whose clock-event reasons moved, and each GPU's
last signature twice.  Now keys whose one change is the same (time, value) share one series
until one of them changes again (copied out first), the series sit in a list by slot
(``StepTable``), a moved row GPU is a slotted view, and the newest sample's signatures are
held once.  Held to the code before (``OldGpuSteps``: main's
``probes/history/steps.py`` at 5b279c4, kept below):

* the agent simulator's streams and ``test_row_fold``'s mutated ones (static facts re-sent
  and changed, GPUs dropped and re-indexed, states and counters moving, reasons flapping,
  ``None`` fields), through the row path and the built path, in a ``HostHistory`` each;
* random built streams fed to the fold directly, in batches: GPUs appearing and vanishing
  (indices past ``SLOT_GPUS`` too), GPUs known by bus id only, states and reasons
  changing, ``None``, ``0.0`` and ``-0.0``, few kept changes (so changes are dropped);

answer every query the same (keys, each series' first, peak, increase, latest, changes,
values at times, segments, points, nbytes; GPUs seen, missing, layout, counts, the fold's
"mixed" answer).  Negative controls: a shared series recorded into without being copied out,
and first changes of 0.0 and -0.0 shared, are caught.  And the series, views and signatures
hold under 40 % of what they held.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple, Protocol

import pytest

from probes.history import HostHistory
from probes.history import steps as steps_module
from probes.history.keys import GPU_STEP_FIELDS, STATE_CODES, gpu_key, reason_mask
from probes.history.steps import GpuSteps
from probes.history.storage import StepSeries
from probes.wire.compact import GPU_ROW_FIELDS, SampleRow, StaticEpoch
from probes.wire.samples import GpuSample, GpuState, HostSample
from tests.bench.bench_fleet_memory import deep_size
from tests.history.test_row_fold import _REASONS, _decode, _streams
from tests.support.builders import gpu, sample

# --- the step fold before (main at 5b279c4) -------------------------------------------------

_SIG_GET = attrgetter(*GPU_STEP_FIELDS)
_INDEX_GET = attrgetter("index")
_FAST_GET = attrgetter("state", "clock_reasons")
_GPUS_GET = attrgetter("gpus")
_REASONS_GET = attrgetter("clock_reasons")
ROW_STEPS_FIT = [f for f in GPU_STEP_FIELDS if f in GPU_ROW_FIELDS] == ["clock_reasons"]
"""The clock-event reasons are the only step field a tick's row holds (``fold_row``'s
premise; else the history folds every sample's built GPUs)."""
_new = object.__new__
_set = object.__setattr__


class _Folded(Protocol):
    """What the fold reads of a sample: a ``HostSample``, or a row's ``_StepRow``."""

    @property
    def ts(self) -> float: ...
    @property
    def gpus(self) -> tuple[GpuSample, ...]: ...


class _OldStepRow(NamedTuple):
    """A row sample as the fold reads it: each GPU its epoch's static half with the tick's
    clock-event reasons (``GpuSteps._views``)."""

    ts: float
    gpus: tuple[GpuSample, ...]


class OldGpuSteps:
    """Step series per GPU (``GPU_STEP_FIELDS``), GPU presence and the count of GPUs answering.

    Args:
        max_changes: changes kept per step series.
    """

    def __init__(self, max_changes: int) -> None:
        self._max_changes = max_changes
        self.steps: dict[str, StepSeries] = {}
        """Step series by key (``gpu_key``)."""
        self.seen: set[int] = set()
        """Every GPU index seen this run."""
        self.missing_since: dict[int, float] = {}
        """GPUs seen earlier but absent from the newest sample, with the first sample that
        lacked them."""
        self._last_sig: dict[int, tuple[object, ...]] = {}
        self._row_sigs: tuple[object, ...] = ()
        self._row_fast: tuple[object, ...] = ()
        self._count_for: tuple[object, ...] | None = None
        self._ok_count = 0.0
        self._present: tuple[int, ...] = ()
        self._row_epoch: StaticEpoch | None = None
        """The static epoch of the last sample folded, when it was folded by ``fold_row``."""
        self._row_reasons: tuple[tuple[str, ...], ...] = ()
        self._view_epoch: StaticEpoch | None = None
        self._view_gpus: list[GpuSample] = []

    def fold(self, todo: Sequence[_Folded], first: _Folded | None, counts: list[float]) -> bool:
        """Fold samples not yet seen; append each one's count of GPUs answering to ``counts``.

        Returns:
            True when a sample after ``first`` (the first staged; None when none of ``todo``
            is) lists other GPUs than the one before it, so the staged samples cannot be cut
            into columns by position.
        """
        self._row_epoch = None
        return self._fold(todo, first, counts)

    def fold_row(self, ts: float, row: SampleRow, epoch: StaticEpoch, first: bool,
                 counts: list[float]) -> bool:
        """``fold([sample], sample if first else None, counts)`` of a sample kept as its row
        (``HostSample.wire_row``, ``static_epoch``), with the same effect, without building
        its GPUs.  After a row sample of the same epoch whose GPUs had the same reasons
        nothing can have changed (``fold`` would find the same signatures, states and
        indices, and only count); otherwise the fold runs over views of the GPUs holding
        what it reads: the epoch's static halves with this tick's reasons."""
        reasons = tuple(map(_REASONS_GET, row.gpus))
        if epoch is self._row_epoch and reasons == self._row_reasons:
            counts.append(self._ok_count)
            return False
        view = _OldStepRow(ts, self._views(epoch, reasons))
        mixed = self._fold([view], view if first else None, counts)
        self._row_epoch, self._row_reasons = epoch, reasons
        return mixed

    def _views(self, epoch: StaticEpoch, reasons: tuple[tuple[str, ...], ...]
               ) -> tuple[GpuSample, ...]:
        """Each GPU's static half with its reasons (one copy per GPU whose reasons moved)."""
        if epoch is not self._view_epoch:
            self._view_epoch = epoch
            self._view_gpus = [g for g in epoch.gpus if g is not None]  # all: a whole epoch
        views = self._view_gpus
        for i, rs in enumerate(reasons):
            g = views[i]
            if g.clock_reasons != rs:
                values = g.__dict__.copy()
                values["clock_reasons"] = rs
                g = views[i] = _new(GpuSample)
                _set(g, "__dict__", values)
        return tuple(views)

    def _fold(self, todo: Sequence[_Folded], first: _Folded | None, counts: list[float]) -> bool:
        mixed = False
        full = tuple(map(_SIG_GET, todo[-1].gpus))
        if full != self._row_sigs:
            for r in todo:
                self._step_changes(r)
                self._row_fast = tuple(map(_FAST_GET, r.gpus))
                mixed |= self._count_and_presence(r, first, counts)
            self._row_sigs = full
        elif self._same_as_before(todo):
            counts.extend([self._ok_count] * len(todo))
        else:
            for r in todo:
                fast = tuple(map(_FAST_GET, r.gpus))
                if fast != self._row_fast:
                    self._row_fast = fast
                    self._step_changes(r)
                mixed |= self._count_and_presence(r, first, counts)
        return mixed

    def _same_as_before(self, todo: Sequence[_Folded]) -> bool:
        """Every sample lists the same GPUs in the same state and clock reasons as the last
        one seen (checked in C over the whole batch)."""
        if self._count_for is None or self._count_for is not self._row_fast:
            return False
        gs = list(chain.from_iterable(map(_GPUS_GET, todo)))
        k = len(todo)
        return (list(map(_FAST_GET, gs)) == list(self._row_fast) * k
                and list(map(_INDEX_GET, gs)) == list(self._present) * k)

    def _count_and_presence(self, r: _Folded, first: _Folded | None,
                            counts: list[float]) -> bool:
        mixed = False
        pt = tuple(map(_INDEX_GET, r.gpus))
        if pt != self._present:
            mixed = r is not first
            self._presence(r.ts, pt)
            self._count_for = None
        if self._row_fast is not self._count_for:
            self._count_for = self._row_fast
            self._ok_count = float(sum(1 for g in r.gpus if g.state is GpuState.OK))
        counts.append(self._ok_count)
        return mixed

    def _step_changes(self, r: _Folded) -> None:
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
                st = self.steps.get(key)
                if st is None:
                    st = self.steps[key] = StepSeries(self._max_changes)
                st.record(ts, float(v))

    def _presence(self, ts: float, pt: tuple[int, ...]) -> None:
        self._present = pt
        here = {i for i in pt if i >= 0}
        for idx in list(self.missing_since):
            if idx in here:
                del self.missing_since[idx]
        for idx in self.seen - here:
            self.missing_since.setdefault(idx, ts)
        self.seen |= here

    @property
    def layout(self) -> tuple[int, ...]:
        """The GPU indices of the newest sample folded, in its order."""
        return self._present

    def nbytes(self) -> int:
        """Approximate bytes held by the step series."""
        return sum(s.nbytes() for s in self.steps.values())


# --- comparing -----------------------------------------------------------------------------

AnySteps = "GpuSteps | OldGpuSteps"


def _series(st: StepSeries, times: Sequence[float]) -> object:
    lo, hi = times[0], times[-1]
    mid = (lo + hi) / 2
    return (st.first, st.peak, st.increase_total, st.first_increase_ts, st.latest(),
            st.changes(), st.changes(mid), [st.value_at(t) for t in times],
            st.segments(lo, hi), st.segments(mid, hi + 5), st.points(), st.points(mid),
            st.points(lo, mid, max_points=3), st.nbytes())


def _steps_digest(gs: Any, times: Sequence[float]) -> str:
    """Every answer of a ``GpuSteps``, as text (``-0.0`` and NaN spelled out)."""
    out: list[object] = [gs.layout, sorted(gs.seen), dict(gs.missing_since), gs.nbytes(),
                         sorted(gs.steps)]
    out += [(key, _series(gs.steps[key], times)) for key in sorted(gs.steps)]
    return repr(out)


def _history_digest(h: HostHistory, times: Sequence[float]) -> str:
    counts = h.series("host/gpu_count")  # type: ignore[arg-type]
    return repr([h.series_keys(), h.gpu_indices(), h.gpus_missing_since(), h._mixed,
                 h._staged_counts, h.nbytes(), counts.points() if counts else None,
                 _steps_digest(h._gpu_steps, times)])


def _old_history() -> HostHistory:
    h = HostHistory(max_step_changes=6)
    h._gpu_steps = OldGpuSteps(6)  # type: ignore[assignment]
    return h


@pytest.fixture(scope="module")
def decoded() -> list[tuple[list[HostSample], list[HostSample]]]:
    """Per stream: the lazy v2 samples (row path) and built copies (no row)."""
    streams = _streams()
    out = []
    for hello, lines in (streams[0], streams[1], streams[2], streams[4], streams[8]):
        lazy = _decode(hello, lines, eager=False)
        built = [dataclasses.replace(s) for s in _decode(hello, lines, eager=True)]
        out.append((lazy, built))
    return out


def _stream_differences(decoded: list[tuple[list[HostSample], list[HostSample]]]
                        ) -> tuple[int, int, int]:
    """(checks that differ, checks, step changes recorded after the first)."""
    differ = checks = later = 0
    for lazy, built in decoded:
        for feed in (lazy, built):
            new, old = HostHistory(max_step_changes=6), _old_history()
            for n, s in enumerate(feed):
                new.add(s)
                old.add(s)
                if n % 7 == 0 or n == len(feed) - 1:
                    times = [feed[0].ts - 1, *(x.ts for x in feed[: n + 1: 5]), s.ts + 1]
                    checks += 1
                    differ += _history_digest(new, times) != _history_digest(old, times)
            later += sum(len(st.changes()) > 1 for st in new._gpu_steps.steps.values())
    return differ, checks, later


def test_streams_answer_as_the_fold_before(
        decoded: list[tuple[list[HostSample], list[HostSample]]]) -> None:
    assert sum(s.wire_row is not None for lazy, _ in decoded for s in lazy) > 300
    differ, checks, later = _stream_differences(decoded)
    assert checks > 200
    assert later > 20  # series that changed again after their shared first change
    assert differ == 0


# --- random built streams --------------------------------------------------------------------

_STATES = (GpuState.OK, GpuState.OK, GpuState.OK, GpuState.LOST, GpuState.UNKNOWN,
           GpuState.UNRESPONSIVE)


def _random_gpu(rng: random.Random, i: int, base: dict[str, Any]) -> GpuSample:
    kw = dict(base)
    if rng.random() < 0.15:
        f = rng.choice(("ecc_corrected_volatile", "ecc_uncorrected_volatile",
                        "remap_correctable", "remap_uncorrectable", "pcie_width", "pcie_gen",
                        "power_limit_w", "sm_clock_max_mhz", "mem_total_mib"))
        kw[f] = rng.choice((None, 0, 0.0, -0.0, 1, 3, 16, 700.0, 81559.0, kw.get(f)))
        base[f] = kw[f]
    if rng.random() < 0.1:
        base["state"] = rng.choice(_STATES)
    if rng.random() < 0.3:
        base["clock_reasons"] = tuple(rng.sample(_REASONS, rng.randint(0, 2)))
    kw.update(state=base.get("state", GpuState.OK), clock_reasons=base.get("clock_reasons", ()))
    if rng.random() < 0.03:  # known by its bus id only
        return gpu(-1, bus_id=f"0000:{i:02x}:00.0", **kw)
    return gpu(i, **kw)


_COUNTERS = ("ecc_corrected_volatile", "remap_correctable", "power_limit_w")


def _random_base(rng: random.Random) -> dict[str, Any]:
    """A GPU's first values: some counters 0, -0.0 or None (so equal-looking first changes
    that are not the same value meet at one time)."""
    return {f: rng.choice((0, -0.0, 0.0, None)) for f in _COUNTERS if rng.random() < 0.7}


def _random_stream(seed: int, n: int) -> list[HostSample]:
    rng = random.Random(seed)
    bases: dict[int, dict[str, Any]] = {i: _random_base(rng) for i in range(8)}
    present = list(range(8))
    out = []
    ts = 1000.0
    for _ in range(n):
        ts += rng.choice((1.0, 1.0, 1.0, 0.5, 2.0))
        if rng.random() < 0.05:  # a GPU vanishes, or one (back or new) appears
            if present and rng.random() < 0.5:
                present.remove(rng.choice(present))
            else:
                i = rng.randrange(12) if rng.random() < 0.7 else rng.choice((63, 64, 70, 1023))
                bases.setdefault(i, _random_base(rng))
                if i not in present:
                    present.insert(rng.randrange(len(present) + 1), i)
        out.append(sample(tuple(_random_gpu(rng, i, bases[i]) for i in present), ts=ts))
    return out


def _random_differences(seeds: range) -> tuple[int, int]:
    """(checks that differ, checks), the streams folded in random batches."""
    differ = checks = 0
    for seed in seeds:
        feed = _random_stream(seed, 300)
        rng = random.Random(-seed)
        new, old = GpuSteps(4), OldGpuSteps(4)
        n = 0
        while n < len(feed):
            todo = feed[n: n + rng.choice((1, 1, 2, 5, 16))]
            first = todo[0] if rng.random() < 0.3 else None
            counts_new: list[float] = []
            counts_old: list[float] = []
            mixed_new = new.fold(todo, first, counts_new)
            mixed_old = old.fold(todo, first, counts_old)
            n += len(todo)
            checks += 1
            differ += (mixed_new, counts_new) != (mixed_old, counts_old)
            if checks % 3 == 0 or n == len(feed):
                times = [feed[0].ts - 1, *(x.ts for x in feed[:n:7]), feed[n - 1].ts + 1]
                differ += _steps_digest(new, times) != _steps_digest(old, times)
    return differ, checks


def test_random_streams_answer_as_the_fold_before() -> None:
    differ, checks = _random_differences(range(8))
    assert checks > 400
    assert differ == 0


def test_negative_control_a_shared_series_recorded_into_is_seen(
        decoded: list[tuple[list[HostSample], list[HostSample]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GpuSteps, "_own", lambda self, key, index, field, st: st)
    assert _random_differences(range(2))[0] > 0
    assert _stream_differences(decoded[1:2])[0] > 0


class _EqualPair:
    """Shares first changes whose (time, value) compare equal: 0.0 with -0.0."""

    @staticmethod
    def pack(t: float, v: float) -> tuple[float, float]:
        return (t, v)


def test_negative_control_zero_shared_with_minus_zero_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps_module, "_PAIR", _EqualPair)
    assert _random_differences(range(4))[0] > 0


def test_the_step_fold_holds_under_40_percent(
        decoded: list[tuple[list[HostSample], list[HostSample]]]) -> None:
    """What a host's step fold holds of its own after the simulator's stream (its static
    epoch and the last sample, which the history holds anyway, left out)."""
    lazy, _ = decoded[0]
    new, old = HostHistory(), _old_history()
    for s in lazy:
        new.add(s)
        old.add(s)

    def own(h: HostHistory) -> int:
        seen: set[int] = set()
        deep_size(h.last_sample, seen)
        deep_size(lazy[-1].static_epoch, seen)
        return deep_size(h._gpu_steps, seen)

    assert len(new._gpu_steps.steps) == 88 and isinstance(new._gpu_steps._view_gpus, list)
    assert own(new) * 5 < own(old) * 2, (own(new), own(old))  # ~9 KB against ~30 KB
