"""The console's per-sample path outside the history (issue 38, session 12, ``apply12``)
folds exactly as before.

Changed: the host clock watch keeps its window's maximum as values come and go
(``HostClockWatch._add``) instead of ``max`` over the window every tick; ``HostLogs.
take_readings`` answers a host with nothing to take before asking its scanner;
``HostState.apply_sample`` builds the numbers mark inline; ``FleetState.all_findings``
reads each host's findings as kept.  Held to the modules as they were
(``tests/analysis/{host_clock,fleet_state,host_logs}_before_s12``, main ``2425ab3``):

* the clock watch alone, over seeded scripts of hellos (speeds 0.5–60), samples, log lines,
  reconnects and other items, with delays that jitter, repeat (ties) and drift, clocks
  stepped by minutes, and odd times (NaN, ±inf, ±0, a time equal to its arrival, ints):
  after every item the estimate passed on (field by field, bits of every float), the item's
  corrected time (bits), what was reported and applied, the window (bits);
* the whole console side of a collector's frames (``CollectorBackend._fold``, ``clocked``,
  ``FleetState.apply``, ``tick``, ``take_scans``): the simulator's templates, hostile agent
  streams (``test_relay_rows.agent_stream``: statics moving, ticks lost or repeated, garbage,
  restarts, odd PCIe chains), v1 streams, and relayed ticks attacked in the frame (another
  static's id, a body cut or garbage, a disk or reason not printable, a disk twice, a
  GPU's process list the wrong length, odd floats); after every frame every item passed on
  (a sample field by field, its row as msgpack, its floats' bits), each reader's counts,
  each host's kept findings with types and onsets, counters, status and reachability,
  merged findings, the fold's logs; each row; the fleet's findings (``all_findings``, each
  host's read as kept, not copied); the last samples with their GPUs built.

Negative controls: a clock watch blind to its maximum leaving the window, one that takes a
NaN for an ordinary value, and a take_readings that never folds are each caught.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import struct
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from probes.analysis import host_logs
from probes.analysis.fleet_changes import numbers_only
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, frame, unframe
from probes.wire.compact import SampleRow
from probes.wire.events import ClockOffset, Connected, Disconnected, SourceHealth
from probes.wire.protocol import MessageReader
from probes.wire.samples import ClockFacts, Hello, HostSample, LogEvent
from tests.analysis import fleet_state_before_s12, host_clock_before_s12, host_logs_before_s12
from tests.analysis.test_quiet_tick import _fold, _host
from tests.bench.bench_apply_s12 import IdleWorker
from tests.bench.bench_relay_decode import collector_frames
from tests.support.templates import TEMPLATES, template
from tests.transport.test_relay_rows import agent_stream

T0 = 1_800_000_000.0


def bits(x: object) -> object:
    """A value as compared here: a float by its bits (NaN, -0.0 told apart), else itself."""
    if isinstance(x, float):
        return ("float", struct.pack("<d", x))
    if isinstance(x, int) and not isinstance(x, bool):
        return ("int", x)
    return x


def _offset(update: ClockOffset | None) -> object:
    if update is None:
        return None
    return tuple(bits(getattr(update, f.name)) for f in dataclasses.fields(update))


# --- the clock watch alone --------------------------------------------------------------------

_HELLO: list[Hello] = []


def _hello() -> Hello:
    if not _HELLO:
        hello = MessageReader().feed(template(0, 1)[1][0])[0]
        assert isinstance(hello, Hello)
        _HELLO.append(hello)
    return _HELLO[0]


ODD = (math.nan, math.inf, -math.inf, 0.0, -0.0)


def clock_script(seed: int, n: int) -> list[tuple[str, Any, Any]]:
    """(kind, the item's time, when it arrived): seeded, with delays that jitter, repeat and
    drift, the host's clock stepped, hellos of other speeds, and odd times."""
    rng = random.Random(seed)
    skew = rng.choice([0.0, 0.4, 3.0, -600.0, 1e6])
    delay_kind = rng.choice(["jitter", "tie", "drift-down", "drift-up"])
    out: list[tuple[str, Any, Any]] = []
    for k in range(n):
        now = T0 + k
        if rng.random() < 0.01:
            skew += rng.choice([-600.0, -5.0, -1.5, 1.5, 5.0, 600.0])
        if delay_kind == "jitter":
            delay = 0.01 + 0.2 * rng.random()
        elif delay_kind == "tie":
            delay = 0.05 if rng.random() < 0.9 else 0.01 * rng.randrange(8)
        elif delay_kind == "drift-down":
            delay = 0.001 * k
        else:
            delay = max(0.0, 1.0 - 0.001 * k)
        ts: Any = now + skew
        received: Any = now + delay
        r = rng.random()
        if r < 0.03:
            ts = rng.choice(ODD)
        elif r < 0.05:
            ts = received  # a value of 0.0
        elif r < 0.06:
            ts, received = -0.0, 0.0  # a value of -0.0
        elif r < 0.07:
            ts, received = int(now), int(now) + rng.randrange(2)
        roll = rng.random()
        if roll < 0.02:
            out.append(("hello", (ts, rng.choice([1.0, 1.0, 60.0, 0.5])), received))
        elif roll < 0.03:
            out.append(("connected", ts, received))
        elif roll < 0.05:
            out.append(("log", ts, received))
        elif roll < 0.06:
            out.append(("other", ts, received))
        else:
            out.append(("sample", ts, received))
    return out


def _item(kind: str, what: Any) -> Any:
    if kind == "hello":
        ts, speed = what
        return dataclasses.replace(_hello(), ts=ts, clock=ClockFacts(speed=speed))
    if kind == "connected":
        return Connected(what)
    if kind == "log":
        return LogEvent(what, "kernel", "a line")
    if kind == "other":
        return Disconnected(what, "reset", 1.0)
    return HostSample(ts=what, seq=1)


def _watch(w: Any) -> object:
    return (bits(w.reported), bits(w.applied), w._seen, bits(w._speed), bits(w._start),
            [bits(x) for x in w._ahead])


def clock_compare(seed: int, n: int = 1500) -> str | None:
    """Both watches over one script; where they first differ (None: nowhere)."""
    new, old = host_clock.HostClockWatch(), host_clock_before_s12.HostClockWatch()
    for k, (kind, what, received) in enumerate(clock_script(seed, n)):
        a, b = _item(kind, what), _item(kind, what)
        got_new, got_old = new.observe(a, received), old.observe(b, received)
        if _offset(got_new) != _offset(got_old):
            return f"estimate at {k} ({kind}): {got_new} != {got_old}"
        if bits(getattr(a, "ts", None)) != bits(getattr(b, "ts", None)):
            return f"item's time at {k} ({kind})"
        if _watch(new) != _watch(old):
            return f"watch at {k} ({kind})"
    return None


def test_the_clock_watch_estimates_as_before() -> None:
    updates = 0
    for seed in range(24):
        assert clock_compare(seed) is None, seed
        w = host_clock.HostClockWatch()
        for kind, what, received in clock_script(seed, 1500):
            updates += w.observe(_item(kind, what), received) is not None
    assert updates > 200, updates  # not vacuous: estimates moved, clocks stepped


def test_the_clock_watch_window_slides_with_its_maximum_leaving() -> None:
    """Not vacuous: the kept maximum is dropped as it leaves (read again) and carried
    otherwise, and odd values make it read whole."""
    w = host_clock.HostClockWatch()
    reads = {"whole": 0}
    real_max = max

    def counted(*a: Any, **kw: Any) -> Any:
        reads["whole"] += 1
        return real_max(*a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_clock, "max", counted, raising=False)
        for k in range(400):  # the delay growing: the oldest value is the maximum
            w.observe(HostSample(ts=T0 + k, seq=k), T0 + k + 0.001 * k)
        slid = reads["whole"]
        for k in range(400, 800):  # jitter: the maximum leaves now and then
            w.observe(HostSample(ts=T0 + k, seq=k), T0 + k + random.Random(k).random())
    assert slid >= 330, slid
    assert reads["whole"] - slid < 100, reads


def _blind_to_leaving(self: Any, value: float) -> float:
    ahead = self._ahead
    ahead.append(value)
    if len(ahead) > host_clock.WINDOW:
        del ahead[0]
    top = self._top
    if top is None or value > top or value != value:
        top = self._top = max(ahead)
    return top


def _nan_as_plain(self: Any, value: float) -> float:
    ahead = self._ahead
    ahead.append(value)
    gone = None
    if len(ahead) > host_clock.WINDOW:
        gone = ahead[0]
        del ahead[0]
    top = self._top
    if top is None or gone == top:
        top = max(ahead)
    elif value > top:
        top = ahead[-1]
    self._top = top
    return top


@pytest.mark.parametrize("perturbed", [_blind_to_leaving, _nan_as_plain])
def test_negative_control_a_wrong_maximum_is_caught(perturbed: Callable[..., float]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_clock.HostClockWatch, "_add", perturbed)
        assert any(clock_compare(seed) is not None for seed in range(24))


# --- the console's side of a collector's frames ----------------------------------------------

def _feed(kind: str, seconds: int, seed: int) -> list[tuple[bytes, list[bytes]]]:
    """Each host's (first bytes, one chunk a second)."""
    rng = random.Random(seed)
    feed: list[tuple[bytes, list[bytes]]] = []
    if kind == "templates":
        for k in range(TEMPLATES):
            hello, ticks = template(k, seconds)[1]
            feed.append((hello, list(ticks)))
        return feed
    for k in range(8):
        data = agent_stream(seed * 8 + k, 2 * seconds, v=1 if kind == "v1" and k % 2 else 2)
        lines = data.splitlines(keepends=True)  # cut at random: a chunk may hold none
        cut = sorted(rng.choices(range(1, len(lines)), k=seconds - 1))
        chunks = [b"".join(lines[a:b]) for a, b in zip([0, *cut], [*cut, len(lines)],
                                                          strict=True)]
        feed.append((b"", chunks))
    return feed


def _attacked(frames: list[bytes], seed: int, rate: float) -> list[bytes]:
    """The frames with some relayed ticks attacked as a broken or hostile pipe might."""
    rng = random.Random(seed)
    out = [frames[0]]
    dec = msgspec.msgpack.Decoder(SampleRow)
    enc = msgspec.msgpack.Encoder()
    for data in frames[1:]:
        batch: list[Any] = unframe(data[4:])  # type: ignore[assignment]
        for n, (i, entry) in enumerate(batch):
            if type(entry) is not tuple or rng.random() >= rate:
                continue
            sid, body = entry
            how = rng.randrange(9)
            if how == 0:
                entry = (sid ^ 1, body)
            elif how == 1:
                entry = (sid, body[:len(body) // 2])
            elif how == 2:
                entry = (sid, bytes(rng.randrange(256) for _ in range(len(body))))
            else:
                row = dec.decode(body)
                if how == 3 and row.disks:
                    row.disks[0].name = rng.choice(["sd\u0007", "sd\u00e9", "", "sd\u001b]0;x"])
                elif how == 4 and row.gpus:
                    row.gpus[0].clock_reasons = (rng.choice(["hw_slowdown", "sw\u0007", "\u00e9"]),)
                elif how == 5 and row.disks:
                    row.disks.append(row.disks[0])
                elif how == 6 and row.gpus:
                    row.gpus[-1].processes = [1.0] * rng.randrange(4)
                elif how == 7 and row.gpus:
                    row.gpus[0].temp_c = rng.choice(  # type: ignore[attr-defined]
                        [math.nan, math.inf, -0.0, 1e308])
                    row.host.cpu_pct = rng.choice([math.nan, -0.0, 0.0])
                else:
                    row.ts = rng.choice([math.nan, row.ts - 600.0, row.ts + 0.5, -0.0])
                entry = (sid, enc.encode(row))
            batch[n] = (i, entry)
        out.append(frame(batch))
    return out


def _sample_view(s: HostSample) -> object:
    host, disks = s.host, s.disks  # a row sample builds them when read (lazy12)
    d = s.__dict__
    return (bits(d["ts"]), d["seq"], [(k, bits(v)) for k, v in host.__dict__.items()],
            [[(k, bits(v)) for k, v in x.__dict__.items()] for x in disks],
            repr(d["pcie"]), None if d.get("wire_row") is None
            else msgspec.msgpack.encode(d["wire_row"]), "gpus" in d,
            type(d.get("static_epoch")).__name__)


def _view(item: object) -> object:
    if type(item) is HostSample:
        return _sample_view(item)
    if isinstance(item, ClockOffset):
        return _offset(item)
    return repr(item)


class Console:
    """One side: the shard's readers, clock watches and fold."""

    def __init__(self, fleet: Any, clocked: Any, specs: tuple[HostSpec, ...],
                 seed: int) -> None:
        self.fleet = fleet
        self.shard = _Shard(1, CollectorJob(specs, 4, 0.05))
        self.slices = FoldSlices(budget_s=3600.0)
        self.items: list[tuple[str, Any]] = []
        rng = random.Random(seed)
        self.now = T0

        def received() -> float:  # the console's clock 5 s behind for its first 8 s
            step = 5.0 if self.now < T0 + 8 else 0.0
            return self.now - step + rng.choice([0.02, 0.05, 0.3 * rng.random()])

        def fold(host: str, item: Any) -> None:
            self.items.append((host, _view(item)))
            self.fleet.apply(host, item, self.now)

        self.emit = clocked(fold, received)

    def second(self, k: int, data: bytes) -> tuple[object, ...]:
        self.now = T0 + k
        self.items = []
        batch = check_batch(unframe(data[4:]), len(self.shard.job.specs))
        asyncio.run(CollectorBackend._fold(self.shard, batch, self.emit, self.slices))
        moved = self.fleet.tick(self.now + 0.5)
        scans = [self.fleet.take_scans() for _ in range(2)]
        return (moved, scans)


def chain_compare(kind: str, seed: int, seconds: int = 90, rate: float = 0.0
                  ) -> tuple[str | None, dict[str, int]]:
    """Both consoles over one set of frames; where they first differ (None: nowhere), and
    what today's side saw (samples from relayed rows, ticks refused, clock estimates)."""
    feed = _feed(kind, seconds, seed)
    specs = tuple(HostSpec(name=f"h{k:02d}", expect_gpus=8 if k % 3 == 2 else None)
                  for k in range(len(feed)))
    frames, _ = collector_frames(feed, specs, seconds)
    if rate:
        frames = _attacked(frames, seed, rate)
    worker = IdleWorker() if seed % 2 == 0 else None  # the console's worker path, or none
    new = Console(FleetState(list(specs), scan_worker=worker), host_clock.clocked, specs, seed)
    old = Console(fleet_state_before_s12.FleetState(list(specs), scan_worker=worker),
                  host_clock_before_s12.clocked, specs, seed)
    seen = {"row samples": 0, "offsets": 0}
    for k, data in enumerate(frames):
        if new.second(k, data) != old.second(k, data):
            return f"tick or scans at {k}", seen
        if new.items != old.items:
            return f"items at {k}", seen
        seen["row samples"] += sum(1 for _, v in new.items if isinstance(v, tuple)
                                   and len(v) == 8 and v[5] is not None)
        seen["offsets"] += sum(1 for _, v in new.items if isinstance(v, tuple) and len(v) == 4)
        for i, (a, b) in enumerate(zip(new.shard.readers.values(),
                                       old.shard.readers.values(), strict=True)):
            if (repr(a.stats), a.bad_streak) != (repr(b.stats), b.bad_streak):
                return f"reader {i} at {k}", seen
        for name in new.fleet.hosts:
            if _host(new.fleet.hosts[name]) != _host(old.fleet.hosts[name]):
                return f"host {name} at {k}", seen
            if repr(new.fleet.hosts[name].row(T0 + k + 0.7)) != \
                    repr(old.fleet.hosts[name].row(T0 + k + 0.7)):
                return f"row of {name} at {k}", seen
        if _fold(new.fleet) != _fold(old.fleet):
            return f"fold at {k}", seen
        if repr(new.fleet.all_findings()) != repr(old.fleet.all_findings()):
            return f"all findings at {k}", seen
    for name in new.fleet.hosts:  # the newest samples with their GPUs built
        if repr(new.fleet.hosts[name].last) != repr(old.fleet.hosts[name].last):
            return f"last sample of {name}", seen
    seen["garbled"] = sum(r.stats.garbled for r in new.shard.readers.values())
    seen["findings"] = len(new.fleet.all_findings())
    return None, seen


CHAIN = [("templates", 0, 0.0), ("hostile", 1, 0.0), ("v1", 2, 0.0), ("templates", 3, 0.15),
         ("hostile", 4, 0.3)]


@pytest.mark.parametrize(("kind", "seed", "rate"), CHAIN)
def test_the_console_folds_relayed_frames_as_before(kind: str, seed: int, rate: float) -> None:
    where, seen = chain_compare(kind, seed, rate=rate)
    assert where is None, where
    assert seen["row samples"] > 200, seen  # not vacuous: ticks came as rows
    assert seen["findings"] > 5, seen  # and findings were there to read
    if rate:
        assert seen["garbled"] > 20, seen  # attacked ticks were refused


def _mark_without_last(self: Any, sample: HostSample, now: float) -> bool:
    kept, reach = self.findings_kept, self.reach
    content = kept.content
    mark = (content - kept.reworded, reach.status, reach.outage, reach.watch, None)
    self.changes += 1
    self.revision += 1
    reach.note_sample(now)
    self._apply_sample(sample)
    if kept.content == content:
        self.quiet += 1
    return numbers_only(self, mark)


@pytest.mark.parametrize("perturbed", [
    (HostState, "apply_sample", _mark_without_last),
    (host_clock.HostClockWatch, "_add", _blind_to_leaving)], ids=["mark", "leaving"])
def test_negative_control_the_console_folding_otherwise_is_caught(perturbed: Any) -> None:
    """(The console's clock set right after 8 s: the high values leave the window ~70 s
    later, and the estimate must fall with them.)"""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(*perturbed)
        assert chain_compare("templates", 0)[0] is not None


# --- the log worker's readings ---------------------------------------------------------------

class _Scanner:
    """What ``take_readings`` reads of a live scanner, in any state."""

    def __init__(self, rng: random.Random) -> None:
        from collections import deque
        self.done: Any = rng.choice([(), deque(), deque([1])])
        self.readings: Any = rng.choice([(), deque(), deque(
            [("job:/x", T0 + rng.random(), ("samples/s", 10.0 * rng.random()), "line")
             for _ in range(rng.randrange(1, 3))])])

    def take_readings(self) -> list[Any]:
        r = self.readings
        return [] if not r else [r.popleft() for _ in range(len(r))]


def _speeds(logs: Any) -> object:
    return {k: (s.unit, [bits(t) for t in s.ts], [bits(v) for v in s.values], s.version,
                s.line) for k, s in logs.speed._series.items()}


def logs_compare(seed: int) -> str | None:
    new, old = host_logs.HostLogs(), host_logs_before_s12.HostLogs()
    taken = 0
    for k in range(200):
        a, b = _Scanner(random.Random(seed * 1000 + k)), _Scanner(random.Random(seed * 1000 + k))
        new.scanner, old.scanner = a, b  # type: ignore[assignment]
        answer = new.take_readings()
        if answer != old.take_readings():
            return f"answer at {k}"
        if _speeds(new) != _speeds(old) or (a.done, a.readings) != (b.done, b.readings):
            return f"speeds at {k}"
        taken += answer
    assert taken > 50, taken  # not vacuous
    return None


def test_take_readings_answers_as_before() -> None:
    for seed in range(4):
        assert logs_compare(seed) is None


def test_negative_control_readings_never_folded_are_caught() -> None:
    def never(self: Any) -> bool:
        scanner = self.scanner
        return bool(scanner.done or scanner.readings)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_logs.HostLogs, "take_readings", never)
        assert logs_compare(0) is not None


def test_source_health_is_no_timed_item() -> None:
    """An item the watch does not time passes untouched on both (the general path)."""
    item = SourceHealth(T0, "collector-0", None, "ok")
    for w in (host_clock.HostClockWatch(), host_clock_before_s12.HostClockWatch()):
        assert w.observe(item, T0 + 1.0) is None
    assert item.ts == T0
