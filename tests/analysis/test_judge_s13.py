"""A quiet tick checked against the last quiet inputs without building its own (issue 38,
session 13, branch issue38-judge13), and the fold judging exactly as before.

``SampleJudge`` keeps the last judging's inputs; when they are a quiet tick's (no GPU with
clock-event reasons or whose load the epoch's verdicts read, no disk saturated, no
swapping, no stray places), a tick is checked against them field by field
(``sample_judge._still_quiet``) instead of ``tick_inputs`` building its tuple and ``_same``
comparing it; the peers' answer is asked again only when a hello was added
(``PeerCounts.version``).

Held to ``sample_judge_before_s13`` and ``fleet_state_before_s13`` (main ``31f101a``):

* ``test_judges_s10``'s harness (templates joining and replayed long, hostile relay streams,
  spoiled statics, noisy streams, every kind of item, peers joining and leaving, the
  session's events): after every item each host's kept findings field by field with types
  and onsets, counters, status, merged findings, the fold's logs; every second each row;
* collector frames through the console's whole fold (``test_apply_s12``'s consoles), their
  relayed rows' judge inputs attacked: disk utilisations and swap at and around their
  lines, NaN, ±inf, -0.0, None; clock-event reasons coming and going; a stray's memory;
  ticks refused (another static's id, a lost GPU's row); the console's clock stepped:
  after every frame every item passed on, each host's kept state, row, the fold's logs,
  ``all_findings``, each host's findings and GPU verdicts, the fleet's diagnosis, which
  hosts changed and which beyond their numbers.

``HostState.apply_sample`` writes out ``_apply_sample`` with the answers its callees give a
quiet tick without calling them (no detector due, the same static facts for the
allocations, ``take_sample(None)``): the reference fleet is ``fleet_state_before_s13``.

Negative controls: a check blind to the disks, to swap, to the reasons, or never asking the
peers again; the written-out fold forgetting ``take_sample(None)``'s count or running the
detectors only when none is due: each is caught.
"""

from __future__ import annotations

import inspect
import math
import random
import textwrap
import types
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from probes import fleet_state
from probes.analysis import detectors, sample_judge
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState
from probes.transport import host_clock
from probes.transport.collector_wire import frame, unframe
from probes.wire.compact import SampleRow
from probes.wire.protocol import MessageReader
from tests.analysis import fleet_state_before_s13
from tests.analysis import sample_judge_before_s13 as before_s13
from tests.analysis import test_judges_s10 as harness
from tests.analysis.test_apply_s12 import T0, Console, _feed
from tests.analysis.test_judges_s10 import KINDS, compare, streams
from tests.analysis.test_judges_s10c import gen_low
from tests.analysis.test_quiet_tick import _fold, _host
from tests.bench.bench_apply_s12 import IdleWorker
from tests.bench.bench_relay_decode import collector_frames


@pytest.fixture(autouse=True)
def _reference() -> Iterator[None]:
    """The harness's reference fleet with the module copied before this change, and
    today's detectors on both sides (this change touches none)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "before_s10", before_s13)
        mp.setattr(harness, "detectors_before_s10",
                   types.SimpleNamespace(DetectorSchedule=detectors.DetectorSchedule))
        mp.setattr(harness, "Sides", Sides)
        yield


class Sides(harness.Sides):
    """The harness's two fleets, the reference one ``fleet_state_before_s13``'s."""

    def __init__(self, specs: list[HostSpec]) -> None:
        super().__init__(specs)
        self.old = fleet_state_before_s13.FleetState(specs)  # type: ignore[assignment]
        for h in self.old.hosts.values():
            h.sample_judge = before_s13.SampleJudge()  # type: ignore[assignment]
        self.readers[id(self.old)] = {s.name: MessageReader() for s in specs}


@pytest.mark.parametrize("kind", KINDS)
def test_the_judges_judge_as_before(kind: str) -> None:
    seed = 300 + KINDS.index(kind)
    assert compare(streams(kind, seed), seed) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_links_a_generation_low_judge_as_before(seed: int) -> None:
    assert compare(gen_low(150, 8, seed), seed) is None


def test_every_kind_of_item_judges_as_before() -> None:
    hosts, specs = harness.item_hosts()
    assert compare(hosts, 311, specs=specs) is None


# --- the console's whole fold, the relayed rows' judge inputs attacked ---------------------

ODD = (math.nan, math.inf, -math.inf, -0.0, 0.0, None)


def _judged_numbers(frames: list[bytes], seed: int, rate: float) -> list[bytes]:
    """The frames with some relayed ticks' judge inputs moved: a disk's utilisation or the
    swap at, under and over their lines or odd, a GPU's clock-event reasons, a process's
    memory; now and then a tick of another static (refused) or a GPU's row gone (refused:
    the count no longer fits)."""
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
            row = dec.decode(body)
            how = rng.randrange(8)
            if how == 0 and row.disks:
                row.disks[rng.randrange(len(row.disks))].util = rng.choice(
                    (*ODD, 89.9, 90.0, 99.5, 100.0, 1e308))
            elif how == 1:
                row.host.swap_in_pages_s = rng.choice((*ODD, 299.0, 300.0, 300.7, 5e9))
            elif how == 2 and row.gpus:
                row.gpus[rng.randrange(len(row.gpus))].clock_reasons = rng.choice(
                    (("hw_slowdown",), ("sw_power_cap",), ()))
            elif how == 3 and row.gpus:
                g = row.gpus[rng.randrange(len(row.gpus))]
                if g.processes:
                    g.processes = [rng.choice((*ODD, 1.0, 8e4)) for _ in g.processes]
            elif how == 4:
                row.host.swap_in_pages_s = rng.choice(ODD)
                for d in row.disks:
                    d.util = rng.choice(ODD)
            elif how == 5:
                batch[n] = (i, (sid ^ 1, body))
                continue
            elif how == 6 and row.gpus:
                row.gpus.pop()
            else:
                row.ts = rng.choice([row.ts - 600.0, row.ts + 0.5, row.ts + 3600.0])
            batch[n] = (i, (sid, enc.encode(row)))
        out.append(frame(batch))
    return out


def _explained(fleet: Any, name: str, now: float) -> object:
    """What the console explains of a host: its findings (every field, the details
    included) and its GPUs' verdicts."""
    state = fleet.hosts[name]
    return repr((state.findings(state.status_at(now)), state.judgements()))


def frames_compare(kind: str, seed: int, seconds: int = 90, rate: float = 0.2
                   ) -> str | None:
    """Both consoles over one set of attacked frames; where they first differ."""
    feed = _feed(kind, seconds, seed)
    specs = tuple(HostSpec(name=f"h{k:02d}", expect_gpus=8 if k % 3 == 2 else None)
                  for k in range(len(feed)))
    frames, _ = collector_frames(feed, specs, seconds)
    frames = _judged_numbers(frames, seed, rate)
    worker = IdleWorker() if seed % 2 == 0 else None
    new = Console(FleetState(list(specs), scan_worker=worker), host_clock.clocked, specs,
                  seed)
    old_fleet = fleet_state_before_s13.FleetState(list(specs), scan_worker=worker)
    for state in old_fleet.hosts.values():
        state.sample_judge = before_s13.SampleJudge()  # type: ignore[assignment]
    old = Console(old_fleet, host_clock.clocked, specs, seed)
    for k, data in enumerate(frames):
        if new.second(k, data) != old.second(k, data):
            return f"tick or scans at {k}"
        if new.items != old.items:
            return f"items at {k}"
        now = T0 + k + 0.7
        for name in new.fleet.hosts:
            if _host(new.fleet.hosts[name]) != _host(old.fleet.hosts[name]):
                return f"host {name} at {k}"
            if repr(new.fleet.hosts[name].row(now)) != repr(old.fleet.hosts[name].row(now)):
                return f"row of {name} at {k}"
            if _explained(new.fleet, name, now) != _explained(old.fleet, name, now):
                return f"explained {name} at {k}"
        if _fold(new.fleet) != _fold(old.fleet):
            return f"fold at {k}"
        if repr(new.fleet.all_findings()) != repr(old.fleet.all_findings()):
            return f"all findings at {k}"
        if repr(new.fleet.diagnosis()) != repr(old.fleet.diagnosis()):
            return f"diagnosis at {k}"
        if (new.fleet.judged_since(0), new.fleet.changed_since(0)) != \
                (old.fleet.judged_since(0), old.fleet.changed_since(0)):
            return f"changes at {k}"
    return None


FRAMES = [("templates", 0, 0.2), ("hostile", 1, 0.2), ("templates", 2, 0.5),
          ("hostile", 3, 0.05)]


@pytest.mark.parametrize(("kind", "seed", "rate"), FRAMES)
def test_the_console_folds_attacked_rows_as_before(kind: str, seed: int, rate: float) -> None:
    assert frames_compare(kind, seed, rate=rate) is None


def test_the_streams_reach_both_answers() -> None:
    """Not vacuous: the quiet check answers yes and no, quiet inputs are kept, and the
    peers are asked again after a hello and found the same."""
    seen = {"quiet": 0, "moved": 0, "peers found the same": 0, "stored": 0}

    def counted(judge: Any, *a: Any) -> bool:
        was = judge._peers_seen
        got = STILL_QUIET(judge, *a)
        seen["quiet" if got else "moved"] += 1
        seen["peers found the same"] += got and was not in (-1, judge._peers_seen)
        return got

    quiet = sample_judge._quiet_inputs

    def stored(inputs: Any) -> Any:
        got = quiet(inputs)
        seen["stored"] += got is not None
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, "_still_quiet", counted)
        mp.setattr(sample_judge, "_quiet_inputs", stored)
        assert compare(streams("joining", 300), 300) is None
        assert frames_compare("templates", 0, seconds=40) is None
    assert seen["quiet"] > 500 and seen["moved"] > 20, seen
    assert seen["stored"] > 20 and seen["peers found the same"] > 0, seen


STILL_QUIET = sample_judge._still_quiet


# --- negative controls ----------------------------------------------------------------------

def _blind(field: str) -> Any:
    def check(judge: Any, quiet: Any, host: str, hello: Any, sample: Any, limits: Any,
              expect: Any, peers: Any) -> bool:
        row = sample.wire_row
        if row is None:
            return False
        real = STILL_QUIET
        if field == "peers":
            return bool(real(judge, quiet, host, hello, sample, limits, expect, None)
                        and expect == quiet[10])
        swap = row.host.swap_in_pages_s
        utils = [d.util for d in row.disks]
        reasons = [g.clock_reasons for g in row.gpus]
        try:
            if field == "disks":
                for d in row.disks:
                    d.util = None
            elif field == "swap":
                row.host.swap_in_pages_s = None
            elif field == "reasons":
                for g in row.gpus:
                    g.clock_reasons = ()
            return bool(real(judge, quiet, host, hello, sample, limits, expect, peers))
        finally:
            row.host.swap_in_pages_s = swap
            for d, u in zip(row.disks, utils, strict=True):
                d.util = u
            for g, r in zip(row.gpus, reasons, strict=True):
                g.clock_reasons = r
    return check


@pytest.mark.parametrize("field", ["disks", "swap", "reasons"])
def test_negative_control_a_blind_check_is_caught(field: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, "_still_quiet", _blind(field))
        assert frames_compare("templates", 0, seconds=40, rate=0.3) is not None


def test_negative_control_peers_never_asked_again_are_caught() -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, "_still_quiet", _blind("peers"))
        assert any(compare(streams(k, 300 + KINDS.index(k)), 300 + KINDS.index(k))
                   for k in ("joining", "long"))


def _written_out_otherwise(old: str, new: str) -> Any:
    """``HostState._apply_sample`` with one line of its quiet-tick path changed."""
    src = textwrap.dedent(inspect.getsource(HostState._apply_sample))
    assert old in src
    space: dict[str, Any] = {}
    exec(src.replace(old, new), vars(fleet_state), space)
    return space["_apply_sample"]


@pytest.mark.parametrize(("old", "new"), [
    ("kept.revision += 1", "pass"),
    ("if not detectors._idle_from <= ts <= detectors._idle_to:",
     "if detectors._idle_from <= ts <= detectors._idle_to:"),
], ids=["take-none-uncounted", "detectors-inverted"])
def test_negative_control_the_written_out_fold_otherwise_is_caught(old: str, new: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HostState, "_apply_sample", _written_out_otherwise(old, new))
        assert compare(streams("long", 300 + KINDS.index("long")),
                       300 + KINDS.index("long")) is not None
