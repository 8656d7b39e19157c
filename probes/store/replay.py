"""Replay: a recording played back through the same screens, with pause, speed and seek.

The replay is a backend like the live one: it emits the recorded items in time order, paced
by a clock that runs in recording time at the chosen speed.  The app uses that clock, so
"stale 42 s" and "first seen" mean the recording's seconds.  A seek starts over from a
little before the target (``SEEK_CONTEXT_S``) rather than from the file's start, so a jump
in a day-long file takes seconds: the screens then hold that much history before the target.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.errors import RigwatchError
from probes.store.codec import Item
from probes.store.recording_reader import RecordingReader
from probes.transport.backend import BackendBase, ReplayControls
from probes.wire.events import Emit

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
SEEK_CONTEXT_S = 1800.0
"""Recording played (unpaced) before a seek target, so charts and detectors have a past."""
TICK_S = 0.05
"""Longest real sleep between clock updates while waiting for the next item."""
YIELD_EVERY = 500


class ReplayError(RigwatchError):
    """A recording that cannot be replayed (empty) or a seek target that cannot be read."""

    title = "Cannot replay"


class ReplayClock:
    """The recording's time as the replay stands; the app's clock during a replay."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass(frozen=True)
class ReplayPosition:
    """What the header shows."""

    t: float
    speed: float
    paused: bool
    start: float
    end: float
    finished: bool

    def describe(self) -> str:
        """``replay 03:12:07 ×60 ▶ (41 %)``, in UTC like the rest of the console."""
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.t))
        state = "paused" if self.paused else "end" if self.finished else "▶"
        span = self.end - self.start
        done = 100.0 * (self.t - self.start) / span if span > 0 else 100.0
        return f"replay {clock} ×{self.speed:g} {state} ({done:.0f} %)"


class ReplayBackend(BackendBase):
    """Emits a recording's items at ``speed`` × recording time; controlled by the app.

    Control methods are called from the app's event loop (key bindings), the same loop the
    backend's coroutine runs in, so no locking is needed.  It is its own ``replay`` controls
    and raises no alerts: they would page people for the past.
    """

    raises_alerts = False

    def __init__(self, path: str, speed: float = 60.0) -> None:
        self.reader = RecordingReader(path)
        span = self.reader.span()
        if span is None:
            raise ReplayError(f"{path}: the recording holds no items")
        self.start, self.end = span
        self.specs = [HostSpec(name=h) for h in self.reader.hosts()]
        self.clock = ReplayClock(self.start)
        self.speed = speed
        self.paused = False
        self.finished = False
        self.on_rewind: Callable[[], None] | None = None
        """Called before a seek replays from its context: the app starts a fresh state."""
        self._seek_to: float | None = None
        self._wake = asyncio.Event()
        self.replay: ReplayControls | None = self

    def now(self) -> float:
        """The recording's time as the replay stands."""
        return self.clock.t

    def mode_text(self) -> str:
        """``replay 03:12:07 ×60 ▶ (41 %)``."""
        return self.position.describe()

    @property
    def position(self) -> ReplayPosition:
        """Where the replay stands."""
        return ReplayPosition(self.clock.t, self.speed, self.paused, self.start, self.end,
                              self.finished)

    def toggle_pause(self) -> None:
        """Pause or resume."""
        self.paused = not self.paused
        self._wake.set()

    def faster(self, step: int = 1) -> None:
        """Next speed up (or down with a negative step) the ×1…×600 ladder."""
        i = min(range(len(SPEEDS)), key=lambda k: abs(SPEEDS[k] - self.speed))
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i + step))]
        self._wake.set()

    def seek(self, t: float) -> None:
        """Go to recording time ``t`` (clamped to the recording)."""
        self._seek_to = max(self.start, min(self.end, t))
        self.finished = False
        self._wake.set()

    def next_finding(self) -> float | None:
        """Seek just past the next recorded finding; its time, or None when there is none."""
        t = self.reader.next_time("finding", self.clock.t + 0.001)
        if t is not None:
            self.seek(t + 1.0)
        return t

    def previous_finding(self) -> float | None:
        """Seek just past the previous recorded finding (before the current one)."""
        t = self.reader.prev_time("finding", self.clock.t - 2.0)
        if t is not None:
            self.seek(t + 1.0)
        return t

    async def run(self, emit: Emit) -> None:
        """Play from the start; honour seeks; at the end keep the state and wait."""
        target: float | None = None
        since = self.start
        while True:
            if target is not None:
                if self.on_rewind is not None:
                    self.on_rewind()
                since = max(self.start, target - SEEK_CONTEXT_S)
                self.clock.t = since
                self._introduce(emit, since)
            interrupted = await self._play(emit, since, target)
            if interrupted:
                target, self._seek_to = self._seek_to, None
                continue
            self.finished = True
            self.clock.t = self.end
            while self._seek_to is None:
                self._wake.clear()
                await self._wake.wait()
            target, self._seek_to = self._seek_to, None

    def _introduce(self, emit: Emit, before: float) -> None:
        """Each host's last hello before the context: what its GPUs and topology are."""
        last: dict[str, tuple[str, Item]] = {}
        for host, _ts, item in self.reader.items(until=before, kinds=["hello", "logsource"]):
            last[f"{host} {type(item).__name__}"] = (host, item)
        for host, item in last.values():
            emit(host, item)  # type: ignore[arg-type]

    async def _play(self, emit: Emit, since: float, fast_until: float | None) -> bool:
        """Emit items from ``since``; unpaced before ``fast_until``. True when a seek came."""
        n = 0
        for host, ts, item in self.reader.items(since=since):
            if isinstance(item, Finding):
                continue  # derived again by the console from the items
            if fast_until is not None and ts < fast_until:
                n += 1
                if n % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._seek_to is not None:
                        return True
            else:
                if fast_until is not None:
                    self.clock.t = fast_until
                    fast_until = None
                if await self._wait_until(ts):
                    return True
            self.clock.t = max(self.clock.t, ts)
            emit(host, item)
        return False

    async def _wait_until(self, ts: float) -> bool:
        """Let the clock run to ``ts`` at the current speed; True when a seek interrupts."""
        last = time.monotonic()
        while self.clock.t < ts or self.paused:
            if self._seek_to is not None:
                return True
            self._wake.clear()
            if self.paused:
                await self._wake.wait()
                last = time.monotonic()
                continue
            step = min(TICK_S, (ts - self.clock.t) / self.speed)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(step, 0.0))
            now = time.monotonic()
            self.clock.t = min(ts, self.clock.t + (now - last) * self.speed)
            last = now
        return self._seek_to is not None


_CLOCK = re.compile(r"^(?P<h>\d{1,2}):(?P<m>\d\d)(?::(?P<s>\d\d))?$")
_OFFSET = re.compile(r"^(?P<sign>[+-])(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd])$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_seek(text: str, now: float, start: float) -> float:
    """A seek target: ``+10m`` / ``-2h`` from now, ``HH:MM[:SS]`` (UTC, on or after the
    recording's first day), or an ISO date-time ``2026-12-03T03:12:07``.

    Raises:
        ReplayError: the text is none of these.
    """
    text = text.strip()
    m = _OFFSET.match(text)
    if m:
        delta = float(m.group("n")) * _UNIT[m.group("unit")]
        return now + delta if m.group("sign") == "+" else now - delta
    m = _CLOCK.match(text)
    if m:
        day = start - start % 86400.0
        t = day + int(m.group("h")) * 3600 + int(m.group("m")) * 60 + int(m.group("s") or 0)
        return t if t >= start - 1.0 else t + 86400.0
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReplayError(f"cannot read {text!r} as a time: use +10m, -1h, 03:12 or "
                          "2026-12-03T03:12:07") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()
