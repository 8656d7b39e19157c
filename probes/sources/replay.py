"""Replay: a recording played back through the same screens, with pause, speed and seek.

The replay is a backend like the live one: it emits the recorded items in time order, paced
by a clock that runs in recording time at the chosen speed.  The app uses that clock, so
"stale 42 s" and "first seen" mean the recording's seconds, and each host's spec (tags,
expected GPUs) comes from the recording, with its interval set to the spacing of its
recorded samples: a simulated host's minute-apart samples are its normal pace, not silence.

A seek must show what playing straight through to the same instant shows: sticky findings
(an Xid, a lost GPU), detectors that need an hour of history, and onsets all depend on
everything before.  So a seek forward plays the items in between unpaced on top of what is
on screen, and a seek back starts over from the recording's first item (``on_rewind``) and
plays unpaced up to the target.  Both are exact; their cost is the items played (about
0.1-0.7 ms each).  Only a seek that would play more than ``EXACT_SEEK_ITEMS`` (hours of a
large fleet) thins what lies more than ``SEEK_CONTEXT_S`` (or ``WHOLE_SEEK_ITEMS``) before
its target to one sample per host per ``THIN_S``; every log line, hello and connect is still
played.  Sticky findings and their counts stay exact, onsets from samples may be up to
``THIN_S`` late, a soak detector's (a leak, sustained throttling) as late as the start of
the whole part, and the header says "approx. before HH:MM" until a seek is exact again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import math
import re
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.errors import ConfigError, RigwatchError
from probes.sources.base import BackendBase, ReplayControls
from probes.sources.source import Source, SourceSettings
from probes.store.codec import Item, kind_of
from probes.store.recording_format import RecordingError
from probes.store.recording_reader import RecordingReader
from probes.wire.events import Emit

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TICK_S = 0.05
"""Longest real sleep between clock updates while waiting for the next item."""
EXACT_SEEK_ITEMS = 30_000
"""The most items a seek plays one by one (tens of seconds on a slow machine); beyond, the
far past is thinned (see the module's notes)."""
SEEK_CONTEXT_S = 1800.0
"""Before the target of a thinned seek, this much recording is still played whole (less in a
fleet whose last ``WHOLE_SEEK_ITEMS`` items span less)."""
WHOLE_SEEK_ITEMS = EXACT_SEEK_ITEMS // 2
"""The most items a thinned seek plays whole before its target."""
THIN_S = 60.0
"""One sample per host per this many seconds in the thinned part of a seek."""
YIELD_EVERY = 500
"""Items played unpaced (a seek) between yields to the event loop, so the screens stay live."""
PAUSE_S = 0.02
"""The longest the reader skips unreadable rows (a hostile file) before the loop gets a turn."""

Entry = tuple[str, float, Item | None]
"""(host, recording time, item), as the reader yields them; None: the reader skipped rows
for ``PAUSE_S`` (nothing to play, the loop's turn)."""


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
    seeking_to: float | None = None
    """A seek's target while the items before it are still being played."""
    approximate_before: float | None = None
    """What is shown was built from a thinned past before this time."""
    dropped_before: float | None = None
    """The recording's retention deleted its samples before this time."""
    full_from: float | None = None
    """The recording keeps its samples before this time as 15 s / 5 min buckets."""
    skipped: int = 0
    """Rows of the file that could not be read (damaged or hostile), so far."""

    def describe(self) -> str:
        """``replay 03:12:07 ×60 ▶ (41 %)``, in UTC like the rest of the console; while a
        long seek plays its items, ``seeking to 17:50:00`` with the clock moving there."""
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.t))
        state = "paused" if self.paused else "end" if self.finished else "▶"
        if self.seeking_to is not None:
            state = "seeking to " + time.strftime("%H:%M:%S", time.gmtime(self.seeking_to))
            state += ", paused" if self.paused else ""
        span = self.end - self.start
        done = 100.0 * (self.t - self.start) / span if span > 0 else 100.0
        text = f"replay {clock} ×{self.speed:g} {state} ({done:.0f} %)"
        if self.approximate_before is not None:
            before = time.strftime("%H:%M", time.gmtime(self.approximate_before))
            text += f" approx. before {before}"
        if self.dropped_before is not None:
            gone = time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.dropped_before))
            text += f" · samples before {gone} dropped by retention"
        if self.full_from is not None and self.t < self.full_from:
            whole = time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.full_from))
            text += f" · buckets (15 s/5 min means) until {whole}"
        if self.skipped:
            text += f" · {self.skipped} unreadable row{'s' if self.skipped != 1 else ''} skipped"
        return text


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
        self.specs = replay_specs(self.reader)
        self.dropped_before = self.reader.dropped_before
        self.full_from = self.reader.full_resolution_from
        self._early = self.reader.stamped_late()
        self._moved = {(kind_of(item), host, ts) for _at, host, ts, item in self._early}
        self.clock = ReplayClock(self.start)
        self.speed = speed
        self.paused = False
        self.finished = False
        self.on_rewind: Callable[[], None] | None = None
        """Called before a seek back replays from the start: the app starts a fresh state."""
        self.rewinds = 0
        """Seeks that started over from the first item (a seek forward plays on)."""
        self._seek_to: float | None = None
        self._emitted_ts: float | None = None
        """The time of the last item emitted: a seek to after it plays on, before it rewinds."""
        self._stream: Generator[Entry, None, None] = self.ordered_items()
        self._fast_until: float | None = None
        """A seek's target while the items before it are played unpaced."""
        self._thin_until: float | None = None
        """While a far seek plays, samples before this are thinned to one per ``THIN_S``."""
        self._kept: dict[str, float] = {}
        """Each host's last sample played in the thinned part."""
        self.approximate_before: float | None = None
        """The state on screen was built from a thinned past before this time (None: exact)."""
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
        target = self._seek_to if self._seek_to is not None else self._fast_until
        return ReplayPosition(self.clock.t, self.speed, self.paused, self.start, self.end,
                              self.finished, target, self.approximate_before,
                              self.dropped_before, self.full_from, self.reader.skipped)

    @property
    def seeking(self) -> bool:
        """A seek is asked for or its items are still being played (unpaced)."""
        return self._seek_to is not None or self._fast_until is not None

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
        try:
            t = self.reader.next_time("finding", self.clock.t + 0.001)
        except RecordingError:
            return None
        if t is not None:
            self.seek(t + 1.0)
        return t

    def previous_finding(self) -> float | None:
        """Seek just past the previous recorded finding (before the current one)."""
        try:
            t = self.reader.prev_time("finding", self.clock.t - 2.0)
        except RecordingError:
            return None
        if t is not None:
            self.seek(t + 1.0)
        return t

    def findings_at(self, t: float) -> list[tuple[str, Finding]]:
        """The findings recorded at ``t`` (where ``>`` or ``<`` landed), worst first."""
        found = [(host, item) for host, _, item in
                 self.reader.items(since=t, until=math.nextafter(t, math.inf),
                                   kinds=["finding"]) if isinstance(item, Finding)]
        return sorted(found, key=lambda hf: -hf[1].severity.rank)

    async def run_once(self, emit: Emit) -> None:
        """The whole recording, unpaced, in play order: one read of it is its end."""
        n = 0
        for host, ts, item in self.ordered_items():
            n += 1
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if item is None:
                continue
            self.clock.t = max(self.clock.t, ts)
            emit(host, item)  # type: ignore[arg-type]
        self.clock.t = self.end

    async def run(self, emit: Emit) -> None:
        """Play from the start; honour seeks; at the end keep the state and wait."""
        self._stream = self.ordered_items()
        held: Entry | None = None
        """The next item, read but not yet emitted (a seek can come while it waits)."""
        n = 0
        while True:
            if self._seek_to is not None:
                held, self._fast_until = self._begin_seek(held)
            if held is None:
                held = next(self._stream, None)
            if held is None:  # the end: the clock runs out to the last time, then waits
                self._land()
                if await self._wait_until(self.end):
                    continue
                self.finished = True
                while self._seek_to is None:
                    self._wake.clear()
                    await self._wake.wait()
                continue
            host, ts, item = held
            if item is None:  # the reader skipped bad rows for a while: the loop's turn
                held = None
                await asyncio.sleep(0)
                continue
            if self._fast_until is not None and ts < self._fast_until:
                n += 1
                if n % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._seek_to is not None:
                        continue
            else:
                self._land()
                if await self._wait_until(ts):
                    continue
            self.clock.t = max(self.clock.t, ts)
            self._emitted_ts = ts
            held = None
            emit(host, item)  # type: ignore[arg-type]

    def _land(self) -> None:
        """A seek's unpaced part is over: the clock stands at its target."""
        if self._fast_until is not None:
            self.clock.t, self._fast_until = self._fast_until, None
        self._thin_until = None

    def _begin_seek(self, held: Entry | None) -> tuple[Entry | None, float]:
        """Take the pending seek: (the item to go on from, the time to play unpaced to).

        Forward, what is on screen is straight play up to here: play on from the held item.
        Back, it holds items after the target: the app starts over and so does the stream.
        """
        target = self._seek_to
        assert target is not None
        self._seek_to = None
        self.finished = False
        forward = self._emitted_ts is None or self._emitted_ts < target
        far = self.reader.count_between(self._emitted_ts if forward else None,
                                        target) > EXACT_SEEK_ITEMS
        self._thin_until = None
        if far:  # the last SEEK_CONTEXT_S whole, or fewer items in a large fleet
            whole_from = self.reader.time_before(target, WHOLE_SEEK_ITEMS)
            self._thin_until = max(target - SEEK_CONTEXT_S, whole_from or self.start)
        self._kept = {}
        if far:
            self.approximate_before = self._thin_until
        elif not forward:
            self.approximate_before = None
        if forward:
            return held, target
        self.rewinds += 1
        if self.on_rewind is not None:
            self.on_rewind()
        self._stream.close()
        self._stream = self.ordered_items()
        self._emitted_ts = None
        self.clock.t = self.start
        return None, target

    def ordered_items(self) -> Generator[Entry, None, None]:
        """The recording's items from the start in the order a replay plays them.

        Time order, except that a session's Connected and hello come before the items of
        their host that arrived after them stamped earlier (a simulated host's backlog), as
        the live console saw them.  Recorded findings are left out: the console derives
        them again from the items (a recorded one only marks where to jump).
        """
        early = sorted(((at, n, host, item) for n, (at, host, _ts, item)
                        in enumerate(self._early)), key=lambda e: (e[0], e[1]))
        k = 0
        for host, ts, item in self.reader.entries(skip=self._skip, pause_s=PAUSE_S):
            while k < len(early) and early[k][0] <= ts:
                at, _n, first, opening = early[k]
                yield first, at, opening
                k += 1
            if not isinstance(item, Finding):
                yield host, ts, item
        for at, _n, first, opening in early[k:]:
            yield first, at, opening

    def _skip(self, kind: str, host: str, ts: float) -> bool:
        """Rows left out before they are decoded: recorded findings, openings played early
        (``ordered_items``), and samples in the thinned part of a far seek (one per host
        per ``THIN_S``)."""
        if kind == "finding" or (kind, host, ts) in self._moved:
            return True
        until = self._thin_until
        if until is None or kind != "sample" or ts >= until:
            return False
        last = self._kept.get(host)
        if last is not None and ts - last < THIN_S:
            return True
        self._kept[host] = ts
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


def replay_specs(reader: RecordingReader) -> list[HostSpec]:
    """The recorded hosts' specs, each with its interval set to its recorded pace.

    Staleness is "silent for three intervals" on the replay clock.  A simulated host's
    samples lie a simulated step apart in recording time (60 s in the demo), and a live
    host's may be further apart than its inventory said: the recording's own spacing is
    what silence is measured against, so a healthy recording never reads stale.
    """
    specs = []
    for spec in reader.host_specs():
        pace = reader.sample_spacing(spec.name) or spec.interval_s * spec.speed
        specs.append(dataclasses.replace(spec, interval_s=max(pace, spec.interval_s)))
    return specs


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


def from_args(args: argparse.Namespace, _settings: SourceSettings) -> Source | None:
    """A recording as the source: ``rigwatch replay NAME`` (played at ``--speed``), or
    ``snapshot``/``preflight --recording NAME`` (read to its end); None without one.

    Raises:
        ConfigError: no such recording, or it cannot be replayed.
    """
    from probes.store.catalog import find_recording, record_dir

    name = args.file if getattr(args, "command", None) == "replay" else getattr(
        args, "recording", None)
    if name is None:
        return None
    named = [f"--{o.replace('_', '-')}" for o in ("demo", "inventory", "slurm_job",
                                                  "prometheus") if getattr(args, o, None)]
    if named:
        raise ConfigError(f"rigwatch: a recording names its own hosts; it cannot be read "
                          f"with {', '.join(named)}")
    path = find_recording(name, record_dir(args))
    try:
        backend = ReplayBackend(str(path), speed=getattr(args, "speed", 60.0))
    except (RecordingError, ReplayError) as exc:
        raise ConfigError(f"rigwatch: {exc}") from None
    return Source(backend, name=path.stem, records=False, title=path.name)
