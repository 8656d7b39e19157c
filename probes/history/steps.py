"""What changes rarely on a host's GPUs: step series, which GPUs are present, how many answer.

Folded as each sample is staged (``fold`` also takes a batch): per sample only state and
clock-event reasons are compared (they flap); the slower fields are compared on the newest
sample, and only when that differs are the samples walked one by one.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

from probes.history.keys import GPU_STEP_FIELDS, STATE_CODES, gpu_key, reason_mask
from probes.history.storage import StepSeries
from probes.wire.samples import GpuState, HostSample

_SIG_GET = attrgetter(*GPU_STEP_FIELDS)
_INDEX_GET = attrgetter("index")
_FAST_GET = attrgetter("state", "clock_reasons")
_GPUS_GET = attrgetter("gpus")


class GpuSteps:
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

    def fold(self, todo: list[HostSample], first: HostSample | None,
             counts: list[float]) -> bool:
        """Fold samples not yet seen; append each one's count of GPUs answering to ``counts``.

        Returns:
            True when a sample after ``first`` (the first staged; None when none of ``todo``
            is) lists other GPUs than the one before it, so the staged samples cannot be cut
            into columns by position.
        """
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

    def _same_as_before(self, todo: list[HostSample]) -> bool:
        """Every sample lists the same GPUs in the same state and clock reasons as the last
        one seen (checked in C over the whole batch)."""
        if self._count_for is None or self._count_for is not self._row_fast:
            return False
        gs = list(chain.from_iterable(map(_GPUS_GET, todo)))
        k = len(todo)
        return (list(map(_FAST_GET, gs)) == list(self._row_fast) * k
                and list(map(_INDEX_GET, gs)) == list(self._present) * k)

    def _count_and_presence(self, r: HostSample, first: HostSample | None,
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
