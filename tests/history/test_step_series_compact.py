"""A step series held small (issue 38: ~90 a host, most changing once) answers every
question as main's did (``OldStepSeries``: its class at ``6999a55``, kept here)."""

from __future__ import annotations

import math
import random
import tracemalloc
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable

import pytest

from probes.history.storage import Point, StepSeries, size

Series = "StepSeries | OldStepSeries"


class OldStepSeries:
    """A value that changes rarely, kept as (time, value) at each change.

    Bounded: after ``max_changes`` changes the oldest are dropped; the first value seen and
    the total increase (for counters) are kept regardless.  Slotted: a host has ~90 of them,
    most never changing, so their per-object dicts were ~20 KB a host.
    """

    __slots__ = ("_max", "_t", "_v", "first", "first_increase_ts", "increase_total", "peak")

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
        return size(self._t) + size(self._v) + 200


def answers(st: object, rng: random.Random, lo: float, hi: float) -> list[object]:
    """Everything a reader can ask, with the same random queries for either class."""
    out: list[object] = [st.first, st.peak, st.increase_total,  # type: ignore[attr-defined]
                         st.first_increase_ts, st.latest(), st.changes()]  # type: ignore[attr-defined]
    for _ in range(6):
        a = rng.choice([rng.uniform(lo - 5, hi + 5), float(rng.randint(int(lo), int(hi)))])
        b = a + rng.choice([0.0, 1.0, rng.uniform(0, hi - lo + 10)])
        out += [st.value_at(a), st.changes(a), st.segments(a, b),  # type: ignore[attr-defined]
                st.points(a, b), st.points(a, b, max_points=rng.randint(1, 5)),  # type: ignore[attr-defined]
                st.points(until=b), st.points(since=a)]  # type: ignore[attr-defined]
    return out


def same(x: object, y: object) -> bool:
    """Equal, NaN equal to NaN, floats and tuples compared element by element."""
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(map(same, x, y))
    return bool(x == y) and type(x) is type(y)


def stream(rng: random.Random, n: int) -> list[tuple[float, float]]:
    """Times ascending (repeats too), values repeating, rising, falling, NaN now and then."""
    t = 1_800_000_000.0
    v = float(rng.randint(0, 4))
    out = []
    for _ in range(n):
        t += rng.choice([0.0, 1.0, 1.0, 1.0, 2.5, 60.0])
        r = rng.random()
        if r < 0.4:
            pass
        elif r < 0.5:
            v = math.nan
        elif r < 0.55:
            v = -0.0
        else:
            v = float(rng.randint(-3, 12)) + rng.choice([0.0, 0.5])
        out.append((t, v))
    return out


def compare(new: Callable[[int], object], seeds: range) -> int:
    """Feed each random stream to both classes, asking everything now and then; the number
    of answers that differ."""
    diffs = 0
    for seed in seeds:
        rng = random.Random(seed)
        cap = rng.choice([0, 1, 2, 3, 8, 16, 512])
        pairs = stream(rng, rng.randint(0, 300))
        a, b = new(cap), OldStepSeries(cap)
        for i, (t, v) in enumerate(pairs):
            a.record(t, v)  # type: ignore[attr-defined]
            b.record(t, v)
            if i % 19 == 0 or i == len(pairs) - 1:
                lo, hi = pairs[0][0], t
                q1, q2 = random.Random(seed * 1000 + i), random.Random(seed * 1000 + i)
                diffs += sum(not same(x, y) for x, y in zip(answers(a, q1, lo, hi),
                                                            answers(b, q2, lo, hi), strict=True))
        if not pairs:
            diffs += sum(not same(x, y) for x, y in zip(
                answers(a, random.Random(0), 0.0, 10.0), answers(b, random.Random(0), 0.0, 10.0),
                strict=True))
    return diffs


class TestSameAnswers:
    def test_random_streams_answer_as_before(self) -> None:
        assert compare(StepSeries, range(100)) == 0

    def test_a_series_that_forgets_its_first_value_is_caught(self) -> None:
        class ForgetsFirst(StepSeries):
            __slots__ = ()

            @property
            def first(self) -> tuple[float, float] | None:
                tv = self._tv
                return (tv[0], tv[1]) if tv else None

        assert compare(ForgetsFirst, range(100)) > 0

    def test_a_peak_of_the_kept_changes_only_is_caught(self) -> None:
        class KeptPeak(StepSeries):
            __slots__ = ()

            @property
            def peak(self) -> float | None:
                vals = self._tv[1::2]
                return max(vals) if vals else None

        assert compare(KeptPeak, range(100)) > 0


def held(make: Callable[[], object], n: int = 2000) -> float:
    """Bytes a series holds after its first change (mean over ``n``; the time and the value
    are fresh objects each, as a sample's are)."""
    tracemalloc.start()
    try:
        keep = []
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            st = make()
            st.record(1_800_000_000.0 + i * 1.5, float(i % 7) + 0.25)  # type: ignore[attr-defined]
            keep.append(st)
        return (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()


class TestSmall:
    def test_a_series_with_one_change_holds_under_200_bytes(self) -> None:
        new, old = held(StepSeries), held(OldStepSeries)
        assert new < 200, new
        assert old > 2 * new, (old, new)

    def test_nbytes_counts_the_one_array(self) -> None:
        st = StepSeries()
        assert st.nbytes() == size(array("d")) + 80
        st.record(1.0, 2.0)
        assert st.nbytes() == size(array("d", (1.0, 2.0))) + 80
        assert st.latest() == Point(1.0, 2.0, 2.0, 2.0, 1)

    @pytest.mark.parametrize("cap", [1, 4, 512])
    def test_changes_stay_bounded(self, cap: int) -> None:
        st = StepSeries(cap)
        for i in range(3 * cap + 5):
            st.record(float(i), float(i % 3))
        assert len(st.changes()) <= cap
        assert st.first == (0.0, 0.0) and st.peak == 2.0
