"""The console's clock watch as it was before session 13 (issue 38, branch
issue38-frames13; main ``31f101a``), verbatim below this line: the reference for
``test_frames_s13``.

A host's clock against the console's: estimated from when its messages arrive, and
taken off every time the host reports, before anything is folded or recorded.

A host whose clock is ten minutes behind would otherwise win "first failure" by its own
clock, and its part of a recording would play ten minutes early.  The agent stamps each
sample when it takes it; the message arrives a link's delay later, never earlier.  So the
largest ``host time - arrival time`` over the recent messages is the skew minus the
smallest delay seen: an NTP-style minimum filter that a stalled link or a burst of old
samples (a simulated history, a collector's flush) cannot pull off, because those only
arrive later.

A simulated host runs its clock ``speed`` times faster from its hello: its times are first
read back to real time (``HostClock``) before they are compared.  Its skew, if any, is
taken off like any host's; its speed is left to the screens.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

from probes.wire.events import ClockOffset, Connected, Emit, SessionItem
from probes.wire.samples import (
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    ProbeError,
)

CORRECT_FROM_S = 2.0
"""A skew smaller than this is left as it is: an NTP-synced host reads within a fraction
of a second, and its delays would only move its times back and forth."""
REPORT_STEP_S = 1.0
"""A new estimate is reported (and applied) when it moves this far from the last."""
WINDOW = 64
"""Messages the estimate looks back over: a clock that is stepped is followed within it."""
_TIMED = (Hello, HostSample, LogEvent, LogSourceState, ProbeError, FabricSample)
"""Messages that carry the host's time."""


class HostClockWatch:
    """One host's clock estimate; ``observe`` corrects each message as it passes."""

    def __init__(self) -> None:
        self._ahead = array("d")
        """The newest ``WINDOW`` host-minus-arrival times, oldest first: 8 bytes each, where
        a ``deque`` of floats took ~0.8 KB empty and ~2.3 KB full (a host; issue 38)."""
        self._start: float | None = None
        self._speed = 1.0
        self._seen = 0
        self._top: float | None = None
        """``max(self._ahead)`` kept as values come and go (issue 38: ``max`` over the
        window boxed 64 floats a tick); None where it is to be read again."""
        self._odd = 0
        """Values in the window that are zero or not finite: while any is there the maximum
        is read whole (``max`` of a window with a NaN depends on where the NaN sits, and
        -0.0 and 0.0 compare equal but print apart), so the kept one is exact."""
        self.reported: float | None = None
        """The offset last reported (host minus console), None before the first."""
        self.applied = 0.0
        """What is taken off the host's times now."""

    def _real(self, ts: float) -> float:
        """A host time read back to real time (a simulated host's clock runs faster)."""
        start = self._start
        if self._speed == 1.0 or start is None or ts <= start:
            return ts
        return start + (ts - start) / self._speed

    def observe(self, item: SessionItem, received: float) -> ClockOffset | None:
        """Correct ``item`` in place by the applied offset; return a new estimate to pass on
        first when this one moved it, else None.

        Args:
            item: a message from the host (decoded just now, not yet shared).
            received: the console's time it arrived.
        """
        if type(item) is HostSample:  # nearly every item: a tick (issue 38, its own path)
            ts = item.ts
            start = self._start
            if self._speed != 1.0 and start is not None and not ts <= start:
                ts = start + (ts - start) / self._speed  # ``_real``
            self._seen += 1
            update = self._estimate(received, self._add(ts - received))
            if self.applied:
                object.__setattr__(item, "ts", item.ts - self.applied)
            return update
        if isinstance(item, Connected):
            # a new agent: its hello starts the estimate again (the host may have rebooted)
            del self._ahead[:]
            self._start = None
            self._top, self._odd = None, 0
            return None
        if not isinstance(item, _TIMED):
            return None
        update = None
        if isinstance(item, Hello):
            self._speed = item.clock.speed
            self._start = item.ts
        if isinstance(item, (Hello, HostSample)):
            self._seen += 1
            update = self._estimate(received, self._add(self._real(item.ts) - received))
        if self.applied:
            object.__setattr__(item, "ts", item.ts - self.applied)
        return update

    def _add(self, value: float) -> float:
        """Put ``value`` in the window (the oldest out past ``WINDOW``); the window's
        ``max`` after, bit for bit: kept as values come and go while every value is finite
        and not zero (equal such floats are the same float), read whole otherwise."""
        ahead = self._ahead
        ahead.append(value)
        odd = self._odd
        if not (value != 0.0 and value - value == 0.0):  # zero, infinite or NaN
            odd += 1
        gone = None
        if len(ahead) > WINDOW:
            gone = ahead[0]
            del ahead[0]
            if not (gone != 0.0 and gone - gone == 0.0):
                odd -= 1
        self._odd = odd
        top = self._top
        if odd:
            self._top = None
            return max(ahead)
        if top is None or gone == top:
            top = max(ahead)
        elif value > top:
            top = ahead[-1]  # as the array holds it (a float, whatever ``value`` was)
        self._top = top
        return top

    def _estimate(self, received: float, offset: float) -> ClockOffset | None:
        """A new estimate when ``offset`` (the window's maximum) moved from the last."""
        if self.reported is not None and abs(offset - self.reported) < REPORT_STEP_S:
            return None
        self.reported = offset
        self.applied = offset if abs(offset) >= CORRECT_FROM_S else 0.0
        return ClockOffset(received, round(offset, 3), round(self.applied, 3), self._seen)


def clocked(emit: Emit, clock: Callable[[], float] = time.time) -> Emit:
    """``emit`` with every host's times corrected for its clock's skew, and a
    ``ClockOffset`` item passed on after the message that changed the estimate (that
    message already corrected by it: a stream still opens with its hello)."""
    watches: dict[str, HostClockWatch] = {}

    def corrected(host: str, item: SessionItem) -> None:
        watch = watches.get(host)
        if watch is None:
            watch = watches[host] = HostClockWatch()
        update = watch.observe(item, clock())
        emit(host, item)
        if update is not None:
            emit(host, update)

    return corrected
