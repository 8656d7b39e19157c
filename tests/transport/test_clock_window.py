"""A host's clock window (``HostClockWatch._ahead``) is an ``array`` of its newest
``WINDOW`` readings, not a ``deque`` (issue 38, memory: ~0.8 KB a host empty, ~2.3 KB full,
against 8 bytes a reading).  The watch answers exactly as the deque's did: the reference is
the deque's ``observe``, kept here, fed the same random streams."""

from __future__ import annotations

import random
import sys
from collections import deque
from collections.abc import Callable

from probes.transport.host_clock import CORRECT_FROM_S, REPORT_STEP_S, WINDOW, HostClockWatch
from probes.wire.events import ClockOffset, Connected, SessionItem
from probes.wire.samples import Hello, HostSample
from tests.support.tui_fakes import T0, hello, sample


class DequeWatch(HostClockWatch):
    """The watch as it was before: its window a ``deque(maxlen=WINDOW)``."""

    def __init__(self, window: int = WINDOW) -> None:
        super().__init__()
        self._window: deque[float] = deque(maxlen=window)

    def observe(self, item: SessionItem, received: float) -> ClockOffset | None:
        if isinstance(item, Connected):
            self._window.clear()
            self._start = None
            return None
        if not isinstance(item, (Hello, HostSample)):
            return super().observe(item, received)
        update: ClockOffset | None = None
        if isinstance(item, Hello):
            self._speed = item.clock.speed
            self._start = item.ts
        self._window.append(self._real(item.ts) - received)
        self._seen += 1
        offset = max(self._window)
        if not (self.reported is not None and abs(offset - self.reported) < REPORT_STEP_S):
            self.reported = offset
            self.applied = offset if abs(offset) >= CORRECT_FROM_S else 0.0
            update = ClockOffset(received, round(offset, 3), round(self.applied, 3),
                                 self._seen)
        if self.applied:
            object.__setattr__(item, "ts", item.ts - self.applied)
        return update


def _stream(rng: random.Random, n: int) -> list[tuple[str, float, float]]:
    """(kind, host time, arrival) with skews that jump, delays, bursts and reconnects."""
    out: list[tuple[str, float, float]] = []
    skew = rng.choice((0.0, -600.0, 3.5, 1.2))
    t = T0
    for _ in range(n):
        t += rng.choice((1.0, 1.0, 0.1, 5.0))
        r = rng.random()
        if r < 0.02:
            out.append(("connected", t, t))
            out.append(("hello", t + skew, t + rng.uniform(0, 0.5)))
            continue
        if r < 0.04:
            skew += rng.choice((-30.0, 2.5, 0.7, 300.0, -0.0))
        delay = rng.choice((0.01, 0.2, 1.5, 40.0)) if rng.random() < 0.3 else 0.05
        out.append(("sample", t + skew, t + delay))
    return out


def _run(make: Callable[[], HostClockWatch], stream: list[tuple[str, float, float]]
         ) -> list[object]:
    watch = make()
    seen: list[object] = []
    for i, (kind, ts, received) in enumerate(stream):
        item: SessionItem = Connected(received) if kind == "connected" else \
            hello("h") if kind == "hello" else sample("h", i)
        if not isinstance(item, Connected):
            object.__setattr__(item, "ts", ts)
        update = watch.observe(item, received)
        seen.append((update, getattr(item, "ts", None), watch.applied, watch.reported))
    return seen


def test_the_array_window_answers_as_the_deque_did() -> None:
    rng = random.Random(38)
    updates = 0
    for _ in range(25):
        stream = _stream(rng, rng.randrange(20, 400))
        new, old = _run(HostClockWatch, stream), _run(DequeWatch, stream)
        assert new == old
        updates += sum(1 for u in new if u[0] is not None)  # type: ignore[index]
    assert updates > 40  # estimates moved (skews jumped), not only the first


def test_a_window_one_short_is_caught() -> None:
    rng = random.Random(7)
    differ = sum(_run(HostClockWatch, s) != _run(lambda: DequeWatch(WINDOW - 1), s)
                 for s in (_stream(rng, 400) for _ in range(10)))
    assert differ > 0


def test_a_full_window_is_small() -> None:
    watch = HostClockWatch()
    for i in range(3 * WINDOW):
        s = sample("h", i)
        watch.observe(s, s.ts + 0.1)
    assert len(watch._ahead) == WINDOW
    assert sys.getsizeof(watch._ahead) < 8 * WINDOW + 128  # a deque of floats: ~2.3 KB
