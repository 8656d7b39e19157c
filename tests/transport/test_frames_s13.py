"""The console's side of a collector frame folds as before session 13 (issue 38, branch
issue38-frames13).

Session 13 changed three things on the path from a collector's pipe to the fold:
``CollectorBackend._fold`` takes a relayed tick first (its host named only then), the readers
and ``slices.due`` bound once), ``collector_wire.relayed_sample`` judges a row's texts one
by one and keeps the ones proven printable (``_texts_printable``), and the clock watch's
tick path answers "nothing moved" without calling ``_estimate``.  The references are the
code before, copied: ``frames_before_s13`` (``fold``, ``relayed_sample``) and
``host_clock_before_s13`` (``clocked``).

Both consoles take the same frames, each through its own fold and clock into its own
``FleetState`` (today's, the same on both sides: the fold is not this branch's).  The
frames are real collector output: ``bench_relay_decode.collector_frames`` over the agent's
recordings, the simulator's hostile streams (``agent_stream``: garbage, garbled and lost
ticks, restarted agents, text to sanitise) and v1 streams, with relayed ticks attacked in
the frame (``test_apply_s12._attacked``: another static's id, cut or random bodies, texts
not printable, a disk twice, wrong process counts, odd floats and times, plus texts first
seen good then bad); and a real ``Relay`` with ``SessionFleet``'s sessions over scripted
hosts (``test_coalesce_relay``: a host stalling mid-way and coming back, one whose agent
exits and comes back), read at once or only once its pipe was full.  After every frame:
every item passed on (samples field by field with float bits and their row as msgpack,
clock estimates by bits, the rest by ``repr``), each reader's counts and streak, the
shard's readers and ``down``, each host's state, fleet row and the fold's logs.
Negative controls: a text check blind to clock-event reasons, a clock watch that never
reports from a tick, and a fold that drops one host's ticks are each told apart.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import os
import random
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import collector_wire, host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, frame, frame_length, unframe
from probes.wire.compact import SampleRow
from tests.analysis.test_apply_s12 import T0, _attacked, _feed, _view
from tests.analysis.test_quiet_tick import _fold as _fold_logs
from tests.analysis.test_quiet_tick import _host
from tests.bench.bench_relay_decode import collector_frames
from tests.transport import frames_before_s13, host_clock_before_s13
from tests.transport import test_coalesce_relay as coalesce_relay

Fold = Callable[..., Any]


class Side:
    """One console: its shard's readers, its clock watches, its fleet."""

    def __init__(self, specs: tuple[HostSpec, ...], fold: Fold, clocked: Any,
                 seed: int) -> None:
        self.fold = fold
        self.shard = _Shard(1, CollectorJob(specs, 4, 0.05))
        ticks = itertools.count()
        self.slices = FoldSlices(budget_s=7, clock=lambda: float(next(ticks)))
        self.fleet = FleetState(list(specs))
        self.items: list[tuple[str, object]] = []
        self.now = T0
        rng = random.Random(seed)

        def received() -> float:  # the console's clock 5 s behind for its first 8 s
            step = 5.0 if self.now < T0 + 8 else 0.0
            return self.now - step + rng.choice([0.02, 0.05, 0.3 * rng.random()])

        def fold_item(host: str, item: Any) -> None:
            self.items.append((host, _view(item)))
            self.fleet.apply(host, item, self.now)

        self.emit = clocked(fold_item, received)

    def take(self, k: int, data: bytes) -> None:
        self.now = T0 + k
        self.items = []
        batch = check_batch(unframe(data[4:]), len(self.shard.job.specs))
        asyncio.run(self.fold(self.shard, batch, self.emit, self.slices))
        self.fleet.tick(self.now + 0.5)


def _state(side: Side) -> object:
    readers = side.shard.readers
    return (sorted(readers), sorted(side.shard.down),
            [(i, repr(r.stats), r.bad_streak, None if r.compact is None else
              r.compact.static_id) for i, r in sorted(readers.items())])


def compare(frames: list[bytes], specs: tuple[HostSpec, ...], seed: int,
            new_fold: Fold = CollectorBackend._fold) -> tuple[str | None, dict[str, int]]:
    """Both consoles over the frames; where they first differ (None: nowhere), and what
    today's side saw."""
    new = Side(specs, new_fold, host_clock.clocked, seed)
    old = Side(specs, frames_before_s13.fold, host_clock_before_s13.clocked, seed)
    seen = {"row samples": 0, "offsets": 0, "items": 0}
    for k, data in enumerate(frames):
        new.take(k, data)
        old.take(k, data)
        if new.items != old.items:
            return f"items at {k}", seen
        if _state(new) != _state(old):
            return f"readers at {k}", seen
        seen["items"] += len(new.items)
        seen["row samples"] += sum(1 for _, v in new.items if isinstance(v, tuple)
                                   and len(v) == 8 and v[5] is not None)
        seen["offsets"] += sum(1 for _, v in new.items if isinstance(v, tuple) and len(v) == 4)
        for name in new.fleet.hosts:
            if _host(new.fleet.hosts[name]) != _host(old.fleet.hosts[name]):
                return f"host {name} at {k}", seen
            if repr(new.fleet.hosts[name].row(T0 + k + 0.7)) != \
                    repr(old.fleet.hosts[name].row(T0 + k + 0.7)):
                return f"row of {name} at {k}", seen
        if _fold_logs(new.fleet) != _fold_logs(old.fleet):
            return f"fold at {k}", seen
    for name in new.fleet.hosts:  # the newest samples, their GPUs built
        if repr(new.fleet.hosts[name].last) != repr(old.fleet.hosts[name].last):
            return f"last sample of {name}", seen
    seen["garbled"] = sum(r.stats.garbled for r in new.shard.readers.values())
    return None, seen


def _texts_spoiled(frames: list[bytes], seed: int) -> list[bytes]:
    """Relayed ticks whose texts were good in earlier ticks and are spoiled now: a disk
    renamed to what is not printable, a clock-event reason good then bad, one of each in
    the same tick (the cache of good texts must not vouch for them)."""
    rng = random.Random(seed)
    dec = msgspec.msgpack.Decoder(SampleRow)
    enc = msgspec.msgpack.Encoder()
    out = [frames[0]]
    for k, data in enumerate(frames[1:]):
        batch: list[Any] = unframe(data[4:])  # type: ignore[assignment]
        for n, (i, entry) in enumerate(batch):
            if type(entry) is not tuple:
                continue
            row = dec.decode(entry[1])
            how = rng.randrange(6) if k > 3 else 5
            if how == 0 and row.disks:
                row.disks[-1].name = row.disks[-1].name + rng.choice(["\u0007", "\u00e9", "\n"])
            elif how == 1 and row.gpus:
                row.gpus[rng.randrange(len(row.gpus))].clock_reasons = \
                    ("hw_slowdown", rng.choice(["sw_power_cap", "sw\u0007", "\u00e9x"]))
            elif how == 2 and row.gpus and row.disks:
                row.gpus[0].clock_reasons = ("hw_slowdown",)
                row.disks[0].name = rng.choice([row.disks[0].name, "sd\u001b[1m"])
            elif how == 3 and row.gpus:
                row.gpus[-1].clock_reasons = ("hw_slowdown", "sw_thermal_slowdown")
            batch[n] = (i, (entry[0], enc.encode(row)))
        out.append(frame(batch))
    return out


CASES = [("templates", 0, 0.0), ("hostile", 1, 0.0), ("v1", 2, 0.0), ("templates", 3, 0.2),
         ("hostile", 4, 0.35), ("templates", 5, -1.0)]


def _frames(kind: str, seed: int, rate: float, seconds: int = 60
            ) -> tuple[list[bytes], tuple[HostSpec, ...]]:
    feed = _feed(kind, seconds, seed)
    specs = tuple(HostSpec(name=f"h{k:02d}", expect_gpus=8 if k % 3 == 2 else None)
                  for k in range(len(feed)))
    frames, _ = collector_frames(feed, specs, seconds)
    if rate > 0:
        frames = _attacked(frames, seed, rate)
    elif rate < 0:
        frames = _texts_spoiled(frames, seed)
    return frames, specs


@pytest.mark.parametrize(("kind", "seed", "rate"), CASES)
def test_the_console_takes_collector_frames_as_before(kind: str, seed: int,
                                                       rate: float) -> None:
    frames, specs = _frames(kind, seed, rate)
    where, seen = compare(frames, specs, seed)
    assert where is None, where
    assert seen["row samples"] > 200, seen  # not vacuous: ticks came as rows
    assert seen["offsets"] > 3, seen  # and the clocks were estimated again and again
    if rate:
        assert seen["garbled"] > 20, seen  # attacked ticks were refused


def _relay_frames(seed: int, keeps_up: bool) -> tuple[list[bytes], tuple[HostSpec, ...]]:
    """What a real ``Relay`` over ``SessionFleet``'s sessions sent, frame by frame
    (``test_coalesce_relay``'s scripted hosts: a stall, an agent that exits, spoiled
    streams), on the coalescing loop."""
    plan = coalesce_relay.scripts(seed)
    r, w = os.pipe()
    if keeps_up:
        fcntl.fcntl(w, coalesce_relay.F_SETPIPE_SZ, 1 << 20)
    skip = 0 if keeps_up else coalesce_relay._fill(w)
    reads = threading.Event()
    if keeps_up:
        reads.set()
    reader = coalesce_relay.Console(r, reads)
    reader.start()
    asyncio.run(coalesce_relay.collector(plan, w, reads, None))
    reader.join(10)
    os.close(r)
    data = bytes(reader.data[skip:])
    frames = []
    while data:
        n = frame_length(data[:4])
        frames.append(data[:4 + n])
        data = data[4 + n:]
    return frames, tuple(HostSpec(name=name) for name in plan)


@pytest.mark.parametrize(("seed", "keeps_up"), [(1, True), (3, False)])
def test_frames_of_stalling_and_restarting_sessions_are_taken_as_before(
        seed: int, keeps_up: bool) -> None:
    frames, specs = _relay_frames(seed, keeps_up)
    where, seen = compare(frames, specs, seed)
    assert where is None, where
    if keeps_up:
        assert seen["row samples"] > 50, seen
        assert len(frames) > 5 and seen["items"] > 100, seen
    else:  # each host's newest sample kept while the pipe was full, the drops counted
        assert seen["row samples"] >= 4 and seen["items"] > 20, seen


def test_the_cache_of_good_texts_starts_again_when_full() -> None:
    """Past ``PRINTABLE_KEPT`` texts the set starts again; the verdicts stay the same."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collector_wire, "PRINTABLE_KEPT", 3)
        mp.setattr(collector_wire, "_printable", set())
        frames, specs = _frames("templates", 6, -1.0, seconds=30)
        where, seen = compare(frames, specs, 6)
        assert where is None, where
        assert len(collector_wire._printable) <= 3
        assert seen["garbled"] > 10, seen


# --- negative controls -------------------------------------------------------------------------

def _blind_to_reasons(row: SampleRow) -> bool:
    return all(d.name.isascii() and d.name.isprintable() for d in row.disks)


def _never_reports(self: Any, received: float, offset: float) -> None:
    return None


async def _drops_a_host(shard: _Shard, batch: Any, emit: Any, slices: FoldSlices) -> None:
    await CollectorBackend._fold(shard, [(i, e) for i, e in batch
                                         if not (i == 1 and type(e) is tuple)], emit, slices)


@pytest.mark.parametrize("perturbed", ["reasons", "clock", "fold"])
def test_negative_control_a_console_taking_frames_otherwise_is_caught(perturbed: str) -> None:
    fold: Fold = CollectorBackend._fold
    with pytest.MonkeyPatch.context() as mp:
        if perturbed == "reasons":
            mp.setattr(collector_wire, "_texts_printable", _blind_to_reasons)
            frames, specs = _frames("templates", 5, -1.0, seconds=30)
        else:
            frames, specs = _frames("templates", 0, 0.0, seconds=30)
            if perturbed == "clock":
                mp.setattr(host_clock.HostClockWatch, "_estimate", _never_reports)
            else:
                fold = _drops_a_host
        assert compare(frames, specs, 5, fold)[0] is not None
