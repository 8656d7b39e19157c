"""What changes rarely on a host's GPUs: step series, which GPUs are present, how many answer.

Folded as each sample is staged (``fold`` also takes a batch): per sample only state and
clock-event reasons are compared (they flap); the slower fields are compared on the newest
sample, and only when that differs are the samples walked one by one.

A wire v2 sample kept as its row (``HostSample.wire_row``) is folded by ``fold_row`` without
building its GPUs: of the step fields only the clock-event reasons move (``ROW_STEPS_FIT``);
the others, the index and the state are its static epoch's, the same on every sample of it.

Held small (issue 38: ~88 series a host, nearly all changing once in a run): series whose
one change is the same (time, value) are one shared ``StepSeries`` until one of them changes
again (then that key gets its own copy, ``_own``), in a list by slot (``StepTable``), not a
dict of 88 keys; a row's GPU whose reasons moved is a slotted ``_GpuView``, not a copy of
the ``GpuSample``; the last signature of each GPU is the newest sample's tuple, not an equal
one of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from operator import attrgetter
from struct import Struct
from typing import NamedTuple, Protocol, cast

from probes.wire.compact import GPU_ROW_FIELDS, SampleRow, StaticEpoch
from probes.wire.samples import GpuSample, GpuState
from tests.history.before_s13.keys import GPU_STEP_FIELDS, STATE_CODES, gpu_key, reason_mask
from tests.history.before_s13.storage import StepSeries

_SIG_GET = attrgetter(*GPU_STEP_FIELDS)
_INDEX_GET = attrgetter("index")
_FAST_GET = attrgetter("state", "clock_reasons")
_GPUS_GET = attrgetter("gpus")
_REASONS_GET = attrgetter("clock_reasons")
ROW_STEPS_FIT = [f for f in GPU_STEP_FIELDS if f in GPU_ROW_FIELDS] == ["clock_reasons"]
"""The clock-event reasons are the only step field a tick's row holds (``fold_row``'s
premise; else the history folds every sample's built GPUs)."""
_PAIR = Struct("dd")
"""A first change's (time, value) as the key it is shared under: bit for bit (0.0 and -0.0
are not the same value here; a NaN is shared only with the same NaN)."""
_VIEW_FIELDS = ("index", *GPU_STEP_FIELDS)
_VIEW_GET = attrgetter(*_VIEW_FIELDS)
_REASONS_AT = _VIEW_FIELDS.index("clock_reasons")


class _GpuView:
    """What the fold reads of a row sample's GPU whose clock-event reasons are not its static
    half's: the index and the step fields (~170 bytes, where a ``GpuSample`` copy was ~1 KB)."""

    __slots__ = _VIEW_FIELDS

    def __init__(self, values: tuple[object, ...]) -> None:
        for name, v in zip(_VIEW_FIELDS, values, strict=True):
            setattr(self, name, v)


class Folded(Protocol):
    """What the fold reads of a sample: a ``HostSample``, or a row's ``_StepRow``."""

    @property
    def ts(self) -> float: ...
    @property
    def gpus(self) -> tuple[GpuSample, ...]: ...


class _StepRow(NamedTuple):
    """A row sample as the fold reads it: each GPU its epoch's static half with the tick's
    clock-event reasons (``GpuSteps._views``)."""

    ts: float
    gpus: tuple[GpuSample, ...]


SLOT_GPUS = 64
"""GPU indices whose step series sit in a host's ``StepTable`` list; higher ones in its dict."""
_FIELDS_N = len(GPU_STEP_FIELDS)
_SLOT_OF: dict[str, int] = {}
"""Every host's slot of a step series' key (index × fields + field): one table for all."""
_KEY_AT: dict[int, str] = {}


_GPU_STEP_KEYS: dict[int, tuple[str, ...]] = {}
"""Every GPU index's step series keys, in ``GPU_STEP_FIELDS`` order (one table for all)."""
_STATE_J = GPU_STEP_FIELDS.index("state")
_REASONS_J = GPU_STEP_FIELDS.index("clock_reasons")


def _gpu_step_keys(index: int) -> tuple[str, ...]:
    """GPU ``index``'s step series keys, their slots known to every ``StepTable``."""
    keys = _GPU_STEP_KEYS.get(index)
    if keys is None:
        keys = tuple(gpu_key(index, f) for f in GPU_STEP_FIELDS)
        if 0 <= index < SLOT_GPUS:
            for j, key in enumerate(keys):
                _KEY_AT[index * _FIELDS_N + j] = key
                _SLOT_OF[key] = index * _FIELDS_N + j
            _GPU_STEP_KEYS[index] = keys
    return keys


class StepTable(Mapping[str, StepSeries]):
    """A host's step series by key, as a dict would hold them, in a list by slot (~0.8 KB
    for 8 GPUs, where a dict of 88 keys took ~3.1 KB); GPU indices past ``SLOT_GPUS`` in a
    dict."""

    __slots__ = ("_at", "_more")

    def __init__(self) -> None:
        self._at: list[StepSeries | None] = []
        self._more: dict[str, StepSeries] | None = None

    def get(self, key: str, default: StepSeries | None = None) -> StepSeries | None:  # type: ignore[override]
        slot = _SLOT_OF.get(key)
        if slot is not None:
            at = self._at
            st = at[slot] if slot < len(at) else None
            return default if st is None else st
        more = self._more
        return default if more is None else more.get(key, default)

    def __getitem__(self, key: str) -> StepSeries:
        st = self.get(key)
        if st is None:
            raise KeyError(key)
        return st

    def __iter__(self) -> Iterator[str]:
        for slot, st in enumerate(self._at):
            if st is not None:
                yield _KEY_AT[slot]
        if self._more is not None:
            yield from self._more

    def __len__(self) -> int:
        return len(self._at) - self._at.count(None) + len(self._more or ())

    def put_gpu(self, index: int, keys: tuple[str, ...], sts: list[StepSeries | None]) -> None:
        """A GPU never seen holds ``sts`` (None: no series), a field each
        (``_gpu_step_keys(index)``, its slots known)."""
        if not 0 <= index < SLOT_GPUS:
            for j, st in enumerate(sts):
                if st is not None:
                    self.put(keys[j], index, j, st)
            return
        at = self._at
        s0 = index * _FIELDS_N
        if s0 + _FIELDS_N > len(at):  # concatenated: allocated exactly (``extend`` over-allocates)
            at = self._at = at + [None] * (s0 + _FIELDS_N - len(at))
        at[s0:s0 + _FIELDS_N] = sts

    def put(self, key: str, index: int, field: int, st: StepSeries) -> None:
        """``key`` (``gpu_key(index, GPU_STEP_FIELDS[field])``) holds ``st``."""
        if not 0 <= index < SLOT_GPUS:
            if self._more is None:
                self._more = {}
            self._more[key] = st
            return
        slot = index * _FIELDS_N + field
        if slot not in _KEY_AT:
            _KEY_AT[slot] = key
            _SLOT_OF[key] = slot
        at = self._at
        if slot >= len(at):
            at.extend([None] * (slot + 1 - len(at)))
        at[slot] = st


class GpuSteps:
    """Step series per GPU (``GPU_STEP_FIELDS``), GPU presence and the count of GPUs answering.

    Args:
        max_changes: changes kept per step series.
    """

    def __init__(self, max_changes: int) -> None:
        self._max_changes = max_changes
        self.steps = StepTable()
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
        self._firsts: dict[bytes, StepSeries] = {}
        """Series that changed once, by their (time, value) (``_PAIR``): shared by every key
        whose one change it is, never recorded into."""

    def fold(self, todo: Sequence[Folded], first: Folded | None, counts: list[float]) -> bool:
        """Fold samples not yet seen; append each one's count of GPUs answering to ``counts``.

        Returns:
            True when a sample after ``first`` (the first staged; None when none of ``todo``
            is) lists other GPUs than the one before it, so the staged samples cannot be cut
            into columns by position.
        """
        self._row_epoch = self._view_epoch = None  # the views of an epoch left are let go
        self._view_gpus = []
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
        view = _StepRow(ts, self._views(epoch, reasons))
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
                values = list(_VIEW_GET(g))
                values[_REASONS_AT] = rs
                views[i] = cast(GpuSample, _GpuView(tuple(values)))
        return tuple(views)

    def _fold(self, todo: Sequence[Folded], first: Folded | None, counts: list[float]) -> bool:
        mixed = False
        last = todo[-1]
        full = tuple(map(_SIG_GET, last.gpus))
        if full != self._row_sigs:
            for r in todo:
                self._step_changes(r)
                self._row_fast = tuple(map(_FAST_GET, r.gpus))
                mixed |= self._count_and_presence(r, first, counts)
            self._row_sigs = full
            sigs = self._last_sig
            for g, sig in zip(last.gpus, full, strict=True):  # hold one tuple, not two equal
                if sigs.get(g.index) == sig:
                    sigs[g.index] = sig
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

    def _same_as_before(self, todo: Sequence[Folded]) -> bool:
        """Every sample lists the same GPUs in the same state and clock reasons as the last
        one seen (checked in C over the whole batch)."""
        if self._count_for is None or self._count_for is not self._row_fast:
            return False
        gs = list(chain.from_iterable(map(_GPUS_GET, todo)))
        k = len(todo)
        return (list(map(_FAST_GET, gs)) == list(self._row_fast) * k
                and list(map(_INDEX_GET, gs)) == list(self._present) * k)

    def _count_and_presence(self, r: Folded, first: Folded | None,
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

    def _step_changes(self, r: Folded) -> None:
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
            if old is None and type(idx) is int:
                self._first_sig(ts, idx, g, sig)
                continue
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
                    self.steps.put(key, idx, j, self._first(ts, float(v)))
                else:
                    self._own(key, idx, j, st).record(ts, float(v))

    def _first_sig(self, ts: float, idx: int, g: GpuSample, sig: tuple[object, ...]) -> None:
        """A GPU's first signature (a GPU never signed has no step series): every field's
        first change recorded at once, as the loop above would one by one (the keys of the
        index kept for every host, no lookup of a series that cannot be there; issue 38,
        session 10: a host's first sample cost ~0.6 ms here, its 88 series one by one)."""
        vals = list(sig)
        vals[_STATE_J] = STATE_CODES.get(g.state, 1)
        vals[_REASONS_J] = reason_mask(g.clock_reasons)
        first = self._first
        self.steps.put_gpu(idx, _gpu_step_keys(idx),
                           [None if v is None else first(ts, float(v))  # type: ignore[arg-type]
                            for v in vals])

    def _first(self, ts: float, v: float) -> StepSeries:
        """A series whose one change is (``ts``, ``v``): the one shared for it."""
        pair = _PAIR.pack(ts, v)
        st = self._firsts.get(pair)
        if st is None:
            st = self._firsts[pair] = StepSeries(self._max_changes)
            st.record(ts, v)
        return st

    def _own(self, key: str, index: int, field: int, st: StepSeries) -> StepSeries:
        """``key``'s series, copied out of the shared one before it is recorded into."""
        first = st.first
        if first is None or self._firsts.get(_PAIR.pack(*first)) is not st:
            return st
        mine = StepSeries(self._max_changes)
        mine.record(*first)
        self.steps.put(key, index, field, mine)
        return mine

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
