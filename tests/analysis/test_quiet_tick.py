"""A tick's own path through the fold (issue 38 item 1, session 9) folds as the path before.

``FleetState.apply`` takes a sample through ``HostState.apply_sample`` (``ReachTracker.
note_sample``, the chains judged only on a tick that carries them), ``numbers_only`` answers
a tick of the same static epoch from the epoch's identity, and a throttle finding is built
without the frozen class's ``__init__``.  Held to the code before
(``decode9_before_s9.FleetStateBefore`` under ``judging_before``: main at ``12ea918``) over
the simulator's fleets (``bench_ingest.template``, all 16, through the console's reader),
hostile and random wire streams (``test_relay_rows.agent_stream``: text to sanitise, odd
chains, ticks lost or sent twice, a second hello; ``test_static_check_once``'s spoiled
statics; ``test_judges_changed.stream``: reasons, load, clocks, disks, swap and strays drawn
anew, fabric reports, limits and peers changed), and every other kind of item the console
folds (``test_fleet_rows_equivalent._feeds``: v1, the checked path, replays, Prometheus),
with outages, retries, silences, a watcher's fault, Xid lines and clock offsets among them.
After every item both fleets hold the same: each host's kept findings field by field with
their types and onsets, its counters, status and reachability, its merged findings, the
fold's version and, in order, which hosts changed and which beyond their numbers
(``changed_since``/``judged_since``); after every second, each host's row.  Negative
controls: a reachability that keeps an outage through a sample, a fold that calls every
sample numbers only, and a throttle finding with one field off are each caught.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest

from probes import fleet_state
from probes.analysis import findings
from probes.analysis.findings import Finding
from probes.analysis.limits import DetectorLimits
from probes.analysis.reach_tracker import ReachTracker
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind, WatcherFault
from probes.fleet_state import FleetState, HostState
from probes.triage import Severity
from probes.wire.events import ClockOffset, Connected, Disconnected, SessionItem, SourceHealth
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, LogEvent
from tests.analysis.decode9_before_s9 import FleetStateBefore, _throttled_before, judging_before
from tests.analysis.test_fleet_rows_equivalent import XID, _feeds
from tests.analysis.test_judges_changed import _exact
from tests.analysis.test_judges_changed import stream as noisy_stream
from tests.support.templates import TEMPLATES, template
from tests.transport.test_relay_rows import agent_stream
from tests.wire.test_static_check_once import _streams as spoiled_statics

T0 = 1_800_000_000.0
Step = tuple[str, Any]
"""("bytes", wire bytes), ("items", a list of items per side: (new, old)), ("limits",
detector limits), ("peer", a GPU count another host of its model lists)."""


def _events(rng: random.Random, name: str, now: float) -> list[SessionItem]:
    """What the session says of a host beside its agent, now and then."""
    roll = rng.random()
    if roll < 0.015:
        return [Disconnected(now, "connection reset", 3.0, kind=rng.choice(list(DisconnectKind)))]
    if roll < 0.03:
        return [Connected(now)]
    if roll < 0.035:
        return [LogEvent(now, "kernel", XID)]
    if roll < 0.04:
        return [ClockOffset(now, rng.choice([0.5, 400.0]), 0.0)]
    if roll < 0.045:
        fault = rng.choice([None, WatcherFault.COLLECTOR_STALLED])
        return [SourceHealth(now, "collector-0", fault, "stalled")]
    return []


def _chunks(data: bytes, rng: random.Random) -> Iterator[bytes]:
    """A stream's bytes in random pieces, as a socket gives them."""
    lines = data.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        n = rng.randrange(1, 4)
        yield b"".join(lines[k:k + n])
        k += n


def wire_hosts(kind: str, rng: random.Random) -> dict[str, list[Step]]:
    """Each host's steps from wire bytes (``kind``: templates, hostile, statics, noisy)."""
    out: dict[str, list[Step]] = {}
    if kind == "templates":
        for k in range(TEMPLATES):
            hello, ticks = template(k, 70)[1]
            out[f"t{k}"] = [("bytes", hello)] + [("bytes", t) for t in ticks]
    elif kind == "hostile":
        for seed in range(8):
            out[f"a{seed}"] = [("bytes", c) for c in _chunks(agent_stream(seed, 70), rng)]
    elif kind == "statics":
        for k, s in enumerate(spoiled_statics(6)):
            out[f"s{k}"] = [("bytes", c) for c in _chunks(s, rng)]
    else:
        for seed in range(4):
            out[f"n{seed}"] = list(noisy_stream(seed, 120))
    return out


class Sides:
    """The fold (``new``) and the fold before (``old``), fed the same steps."""

    def __init__(self, specs: list[HostSpec], limits: DetectorLimits | None = None) -> None:
        self.new = FleetState(specs, limits)
        self.old = FleetStateBefore(specs, limits)
        self.readers = {id(f): {s.name: MessageReader() for s in specs}
                        for f in (self.new, self.old)}
        self.peers = 0

    def step(self, name: str, step: Step, now: float) -> None:
        kind, what = step
        for k, fleet in enumerate((self.new, self.old)):
            context: AbstractContextManager[None] = nullcontext() if k == 0 \
                else judging_before()
            with context:
                self._apply(fleet, name, kind, what if kind != "items" else what[k], now)

    def _apply(self, fleet: FleetState, name: str, kind: str, what: Any, now: float) -> None:
        state = fleet.hosts[name]
        if kind == "limits":
            state.limits = dataclasses.replace(state.limits, detectors=what)
        elif kind == "peer":
            hello = state.hello
            if hello is not None:
                gpus = (hello.facts.gpus * 2)[:what]
                fleet.peers.add(f"peer{self.peers % 4}", dataclasses.replace(
                    hello, facts=dataclasses.replace(hello.facts, gpus=gpus)))
                if fleet is self.old:
                    self.peers += 1
        else:
            got = self.readers[id(fleet)][name].feed(what) if kind == "bytes" else what
            for item in got:
                fleet.apply(name, item, getattr(item, "ts", now) or now)

    def tick(self, now: float) -> None:
        for k, fleet in enumerate((self.new, self.old)):
            with nullcontext() if k == 0 else judging_before():
                fleet.tick(now)


def _host(state: HostState) -> tuple[object, ...]:
    kept = state.findings_kept
    reach = state.reach
    return (_exact(kept.current), list(kept.since.items()), _exact(kept.sticky.values()),
            _exact(kept.fabric), _exact(kept.layout), _exact(kept.detected), kept.content,
            kept.revision, kept.reworded, state.quiet, state.changes, state.revision,
            reach.status, reach.down_reason, reach.last_seen, reach.data_seen, reach.outage,
            reach.watch, list(reach.onsets), None if state.last is None else
            (state.last.ts, state.last.seq), _exact(state.findings()))


def _fold(fleet: FleetState) -> tuple[object, ...]:
    log = fleet._log
    return (fleet.version, list(log._changed.items()), list(log._judged.items()),
            fleet._rank_epoch, sorted(fleet._unticked))


def compare(hosts: dict[str, list[Step]], specs: list[HostSpec] | None = None,
            seed: int = 0, limits: DetectorLimits | None = None) -> tuple[str | None, int]:
    """Fold both sides step by step; where they first differ (None: nowhere) and how many
    samples moved only numbers."""
    rng = random.Random(seed)
    specs = specs or [HostSpec(name=n, expect_gpus=8 if k % 2 else None)
                      for k, n in enumerate(hosts)]
    sides = Sides(specs, limits)
    log = sides.new._log
    numbers = 0
    rounds = max(len(v) for v in hosts.values())
    for t in range(rounds):
        now = T0 + t
        for name, steps in hosts.items():
            todo = list(steps[t:t + 1])
            todo += [("items", ([e], [e])) for e in _events(rng, name, now)]
            for step in todo:
                version = sides.new.version
                sides.step(name, step, now)
                numbers += log._changed.get(name, 0) > version >= log._judged.get(name, 0)
                new, old = sides.new.hosts[name], sides.old.hosts[name]
                if _host(new) != _host(old):
                    return f"host {name} at {t} after {step[0]} {str(step[1])[:60]}", 0
                if _fold(sides.new) != _fold(sides.old):
                    return f"fold at {t}, {name} after {step[0]}", 0
        read_at = now + rng.choice([0.2, 0.9, 7.0])
        sides.tick(read_at)
        for name in hosts:
            if repr(sides.new.hosts[name].row(read_at)) != repr(sides.old.hosts[name].row(read_at)):
                return f"row of {name} at {t}", 0
        if _fold(sides.new) != _fold(sides.old):
            return f"fold at {t} after its tick", 0
    return None, numbers


def item_hosts() -> tuple[dict[str, list[Step]], list[HostSpec]]:
    """``test_fleet_rows_equivalent``'s fleet of every kind of item, 60 seconds, each side
    its own items (two runs of the same seeded feeds)."""
    new, old = _feeds(), _feeds()
    hosts = {name: [("items", (next(new[name][1], []), next(old[name][1], [])))
                    for _ in range(60)] for name in new}
    return hosts, [spec for spec, _ in new.values()]


WIRE = ("templates", "hostile", "statics", "noisy")


@pytest.mark.parametrize("kind", WIRE)
def test_a_tick_folds_as_before_over_wire_streams(kind: str) -> None:
    rng = random.Random(WIRE.index(kind))
    where, numbers = compare(wire_hosts(kind, rng), seed=WIRE.index(kind))
    assert where is None, where
    # not vacuous: the numbers-only answer was given (the noisy streams move an input in
    # three ticks of ten)
    assert numbers > {"templates": 300, "noisy": 20}.get(kind, 0), numbers


def test_every_kind_of_item_folds_as_before() -> None:
    hosts, specs = item_hosts()
    where, _ = compare(hosts, specs, seed=5, limits=DetectorLimits(alloc_idle_s=120.0))
    assert where is None, where


def test_the_templates_take_the_tick_path() -> None:
    """Not vacuous: the simulator's ticks go through ``apply_sample``, most of them quiet
    (no finding moved: ``HostState.quiet``), and throttled hosts reword every tick."""
    calls = 0
    taken = HostState.apply_sample

    def counted(self: HostState, *a: Any) -> bool:
        nonlocal calls
        calls += 1
        return taken(self, *a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HostState, "apply_sample", counted)
        sides = Sides([HostSpec(name=f"t{k}") for k in range(8)])
        for k in range(8):
            hello, ticks = template(k, 40)[1]
            for t, chunk in enumerate([hello, *ticks]):
                sides.step(f"t{k}", ("bytes", chunk), T0 + t)
    assert calls == 8 * 40
    states = sides.new.hosts.values()
    assert sum(s.quiet for s in states) > 8 * 40 // 2
    assert sum(s.findings_kept.reworded for s in states) > 30


# --- negative controls ----------------------------------------------------------------------

def _kept_outage(self: ReachTracker, now: float) -> None:
    self.last_seen = self.data_seen = now
    self.status = fleet_state.HostStatus.STREAMING


def _throttled_off(*a: Any) -> Finding | None:
    f = findings_throttled(*a)
    return None if f is None else dataclasses.replace(f, count=2)


findings_throttled: Callable[..., Finding | None] = findings._throttled

CONTROLS: dict[str, tuple[Any, str, Any]] = {
    "outage kept": (ReachTracker, "note_sample", _kept_outage),
    "all numbers": (fleet_state, "numbers_only", lambda host, mark: True),
    "throttle off": (findings, "_throttled", _throttled_off),
}


@pytest.mark.parametrize("control", list(CONTROLS))
def test_negative_control_a_tick_path_that_folds_otherwise_is_caught(
        monkeypatch: pytest.MonkeyPatch, control: str) -> None:
    where, attr, value = CONTROLS[control]
    monkeypatch.setattr(where, attr, value)
    hosts = wire_hosts("templates", random.Random(0))
    assert compare(hosts, seed=0)[0] is not None


def test_a_throttle_finding_is_the_one_init_built() -> None:
    """``_throttled`` against the code before on random GPUs: every field, its type and the
    ``__dict__``'s order equal; negative control: a field set apart is caught."""
    rng = random.Random(3)
    reasons = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
               "gpu_idle", "sync_boost")
    made = 0
    for _ in range(400):
        gpu = type("G", (), {"index": rng.choice([0, 3, 7, -1]),
                             "sm_clock_max_mhz": rng.choice([None, 0.0, 1980.0, 1410])})()
        now = type("R", (), {
            "clock_reasons": tuple(rng.sample(reasons, rng.randrange(0, 4))),
            "util_pct": rng.choice([None, 0.0, 50.0, 79.9, 80.0, 99.5]),
            "sm_clock_mhz": rng.choice([None, 0.0, 1236.4, 1236.6, 1700])})()
        limits = DetectorLimits(power_cap_busy_util_pct=rng.choice([50.0, 80.0, 96.0]))
        ts = T0 + rng.random()
        got = findings._throttled("h", gpu, now, ts, limits)  # type: ignore[arg-type]
        want = _throttled_before("h", gpu, now, ts, limits)  # type: ignore[arg-type]
        assert (got is None) == (want is None)
        if got is None or want is None:
            continue
        made += 1
        assert list(got.__dict__) == list(want.__dict__)
        assert _exact([got]) == _exact([want]) and got == want and hash(got) == hash(want)
        assert got.extra is not want.extra and type(got.extra) is dict
        assert got.severity is Severity.WARNING
        off = dataclasses.replace(got, count=2)
        assert _exact([off]) != _exact([want])
    assert made > 100


def test_a_hello_and_a_sample_of_an_unknown_host_are_ignored() -> None:
    fleet = FleetState([HostSpec(name="a")])
    version = fleet.version
    hello, ticks = template(0, 3)[1]
    reader = MessageReader()
    for item in reader.feed(hello) + reader.feed(ticks[0]) + reader.feed(ticks[1]):
        fleet.apply("nobody", item, T0)
        assert isinstance(item, Hello) or fleet.version == version
    assert fleet.changed_since(0) == []
