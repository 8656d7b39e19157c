"""The per-sample judges' inputs read the peers' GPU count only where a finding reads it
(issue 38 item 1, session 10), and judge exactly as before.

``SampleJudge`` judges a tick again only when its inputs moved.  Before, the inputs held the
peers' answer whole (``PeerCounts.expected``: the count most hosts of the model list and
how many hosts list it), which moves with every hello while a fleet connects: every host
of an inventory without ``expect_gpus`` was judged whole, and then rested whole for a
minute.  Now the answer counts only where it exceeds what the host lists (else
``gpu_short_finding`` builds nothing from it).

Held to ``sample_judge_before_s10`` and ``detectors_before_s10`` (main at ``001268f``, its
``SampleJudge`` and ``DetectorSchedule`` put in every host of the reference fleet: the young
history's detectors, ``test_detectors_young``, are held here too) over: the simulator's 16
templates replayed long and joining one by one, hostile relay streams, spoiled statics,
noisy streams (reasons, load, clocks, disks, swap, strays, fabric, limits, hellos again:
``test_judges_changed.stream``), each with peers of 7–10 GPUs joining and leaving at random,
and the session's events (outages, Xid lines, clock offsets, a watcher's fault). After every
item each host's kept findings field by field with types and onsets, counters, status,
merged findings; the fold's logs; after every second each row. Negative controls: a judge
reading the peers' count alone (not how many hosts list it), and one a GPU laxer about what
the host lists, are caught.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from probes.analysis import sample_judge
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.triage import Code
from probes.wire.protocol import MessageReader
from tests.analysis import detectors_before_s10
from tests.analysis import sample_judge_before_s10 as before_s10
from tests.analysis.test_quiet_tick import _events, _fold, _host, item_hosts, wire_hosts
from tests.support.templates import TEMPLATES, template

T0 = 1_800_000_000.0
Step = tuple[str, Any]


class Sides:
    """Today's fold (``new``) and one whose hosts judge samples and run their detectors as
    before (``old``)."""

    def __init__(self, specs: list[HostSpec]) -> None:
        self.new = FleetState(specs)
        self.old = FleetState(specs)
        for h in self.old.hosts.values():
            h.sample_judge = before_s10.SampleJudge()  # type: ignore[assignment]
            h.detectors = detectors_before_s10.DetectorSchedule(  # type: ignore[assignment]
                h.detectors.limits, h.detectors.stretch)
        self.readers = {id(f): {s.name: MessageReader() for s in specs}
                        for f in (self.new, self.old)}
        self.n = 0

    def step(self, name: str, step: Step, now: float) -> None:
        kind, what = step
        if kind == "peer" and isinstance(what, int):  # a noisy stream's: a count alone
            self.n += 1
            what = (f"peer{self.n % 4}", what)
        for k, fleet in enumerate((self.new, self.old)):
            state = fleet.hosts[name]
            if kind == "peer":  # (peer's name, GPUs it lists)
                hello = state.hello
                if hello is not None:
                    gpus = (hello.facts.gpus * 2)[:what[1]]
                    fleet.peers.add(what[0], dataclasses.replace(
                        hello, facts=dataclasses.replace(hello.facts, gpus=gpus)))
            elif kind == "limits":
                state.limits = dataclasses.replace(state.limits, detectors=what)
            else:
                got = self.readers[id(fleet)][name].feed(what) if kind == "bytes" \
                    else what[k]
                for item in got:
                    fleet.apply(name, item, getattr(item, "ts", now) or now)


def _with_peers(hosts: dict[str, list[Step]], rng: random.Random, rate: float,
                counts: tuple[int, ...], names: int = 9) -> dict[str, list[Step]]:
    """Each host's steps with peers joining (or listing anew) now and then, ``names`` of
    them, so how many hosts list a count moves both ways."""
    out: dict[str, list[Step]] = {}
    for name, steps in hosts.items():
        mixed: list[Step] = []
        for s in steps:
            mixed.append(s)
            if rng.random() < rate:
                mixed.append(("peer", (f"peer{rng.randrange(names)}", rng.choice(counts))))
        out[name] = mixed
    return out


def joining(ticks: int, hosts: int, every: int) -> dict[str, list[Step]]:
    """The simulator's templates, host *i* saying hello ``every * i`` steps in (it stays
    silent before: no step)."""
    out: dict[str, list[Step]] = {}
    for i in range(hosts):
        hello, lines = template(i % TEMPLATES, ticks)[1]
        out[f"j{i:02d}"] = [("none", None)] * (every * i) + [("bytes", hello)] + \
            [("bytes", t) for t in lines]
    return out


def compare(hosts: dict[str, list[Step]], seed: int, expect_some: bool = True,
            specs: list[HostSpec] | None = None) -> str | None:
    """Fold both sides step by step; where they first differ (None: nowhere)."""
    rng = random.Random(seed)
    specs = specs or [HostSpec(name=n, expect_gpus=8 if expect_some and k % 4 == 3 else None)
                      for k, n in enumerate(hosts)]
    sides = Sides(specs)
    rounds = max(len(v) for v in hosts.values())
    for t in range(rounds):
        now = T0 + t
        for name, steps in hosts.items():
            todo = [s for s in steps[t:t + 1] if s[0] != "none"]
            if todo or (t < len(steps) and sides.new.hosts[name].hello is not None):
                todo += [("items", ([e], [e])) for e in _events(rng, name, now)]
            for step in todo:
                sides.step(name, step, now)
                new, old = sides.new.hosts[name], sides.old.hosts[name]
                if _host(new) != _host(old):
                    return f"host {name} at {t} after {step[0]} {str(step[1])[:60]}"
                if _fold(sides.new) != _fold(sides.old):
                    return f"fold at {t}, {name} after {step[0]}"
        read_at = now + rng.choice([0.2, 0.9, 7.0])
        for fleet in (sides.new, sides.old):
            fleet.tick(read_at)
        for name in hosts:
            if repr(sides.new.hosts[name].row(read_at)) != \
                    repr(sides.old.hosts[name].row(read_at)):
                return f"row of {name} at {t}"
    return None


PEERS = (7, 8, 8, 9, 9, 10)
"""GPU counts peers list: under, at and over the simulator's 8."""


def streams(kind: str, seed: int) -> dict[str, list[Step]]:
    rng = random.Random(seed)
    if kind == "joining":
        return _with_peers(joining(120, 4, 3), rng, 0.2, (7, 8, 9, 9, 9, 9, 9, 9, 9, 10), 16)
    if kind == "at-count":  # a fleet connecting: peers list what the hosts list
        return _with_peers(joining(80, 16, 1), rng, 0.1, (8,), 6)
    if kind == "long":
        return _with_peers(joining(400, 16, 5), rng, 0.02, PEERS)
    return _with_peers(wire_hosts(kind, rng), rng, 0.08, PEERS)


KINDS = ("joining", "at-count", "long", "templates", "hostile", "statics", "noisy")


@pytest.mark.parametrize("kind", KINDS)
def test_the_judges_judge_as_before(kind: str) -> None:
    seed = KINDS.index(kind)
    assert compare(streams(kind, seed), seed) is None


def test_every_kind_of_item_judges_as_before() -> None:
    """v1 ticks, the checked path, replays, Prometheus (``test_quiet_tick.item_hosts``):
    judged whole every tick, the detectors over their histories as before."""
    hosts, specs = item_hosts()
    assert compare(hosts, 11, specs=specs) is None


def _judged_whole(kind: str) -> tuple[dict[str, int], set[str | None]]:
    """Ticks judged whole by each side over ``streams(kind, 0)``, and the evidence of every
    short count today's side showed."""
    whole = {"new": 0, "old": 0}
    evidence: set[str | None] = set()
    with pytest.MonkeyPatch.context() as mp:
        for side, module in (("new", sample_judge), ("old", before_s10)):
            def counted(*a: Any, _parts: Any = module.sample_judged_parts,
                        _side: str = side) -> Any:
                whole[_side] += 1
                return _parts(*a)

            mp.setattr(module, "sample_judged_parts", counted)
        hosts = streams(kind, 0)
        sides = Sides([HostSpec(name=n) for n in hosts])
        for t in range(max(len(v) for v in hosts.values())):
            for name, steps in hosts.items():
                for step in steps[t:t + 1]:
                    if step[0] != "none":
                        sides.step(name, step, T0 + t)
                evidence.update(f.evidence for f in sides.new.hosts[name].findings_kept.current
                                if f.code is Code.GPU_COUNT_SHORT)
    return whole, evidence


def test_a_short_host_names_its_peers_as_they_move() -> None:
    """Not vacuous: a short host's finding names how many hosts list the count, and that
    moves (what the inputs must keep where the count exceeds the host's)."""
    _, evidence = _judged_whole("joining")
    assert len(evidence) >= 3, evidence


def test_peers_at_the_hosts_count_leave_the_inputs_alone() -> None:
    """The quiet answer is given where before the peers' moves judged whole (and rested)."""
    whole, evidence = _judged_whole("at-count")
    assert not evidence
    assert 2 * whole["new"] < whole["old"], whole  # a quarter of the templates throttle


# --- negative controls ----------------------------------------------------------------------

def _count_alone(*a: Any) -> Any:
    got = _inputs(*a)
    return got if got is None else (*got[:-1], None if got[-1] is None else got[-1][0])


def _one_laxer(host: str, hello: Any, sample: Any, limits: Any, expect: Any,
               peers: Any) -> Any:
    got = _inputs(host, hello, sample, limits, expect, peers)
    if got is None or got[-1] is None:
        return got
    listed = max(len(hello.facts.gpus) if hello else 0, sample.static_epoch.listed)
    return got if got[-1][0] > listed + 1 else (*got[:-1], None)


_inputs = sample_judge.tick_inputs


@pytest.mark.parametrize("perturbed", [_count_alone, _one_laxer])
def test_negative_control_inputs_missing_the_peers_are_caught(perturbed: Any) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, "tick_inputs", perturbed)
        assert compare(streams("joining", 0), 0) is not None
