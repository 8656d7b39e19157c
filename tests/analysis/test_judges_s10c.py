"""A tick's judge inputs read off the decoded row alone, the epoch's loaded links read once
(issue 38 item 1, session 10c), and the judges judge exactly as before.

``sample_judge.tick_inputs`` now takes the disks and swap from the row's Structs (the
sample's stats are filled from them), the GPUs' reasons as one tuple, the links whose load
counts from ``StaticVerdicts.loaded`` (computed with the verdicts) and compares with the last
tick's inputs in one tuple comparison.  Held to ``sample_judge_before_s10c`` (main at
``e046a8e``, put in every host of the reference fleet; both fleets run today's detectors)
through ``test_judges_s10``'s harness: two fleets fed the same items (templates joining and
replayed long, hostile relay streams, spoiled statics, noisy streams, every kind of item,
peers joining, the session's events); after every item each host's kept findings field by
field with types and onsets, counters, status, merged findings, the fold's logs; after
every second each row.  Negative controls: a judge blind to the loaded links, one reading
the swap off the wrong field, and a comparison blind to the disks are each caught.
"""

from __future__ import annotations

import json
import random
import types
from collections.abc import Iterator
from typing import Any

import pytest

from probes.analysis import detectors, sample_judge
from tests.analysis import sample_judge_before_s10c as before_s10c
from tests.analysis import test_judges_s10 as harness
from tests.analysis.test_judges_s10 import KINDS, T0, Step, compare, streams
from tests.support.templates import TEMPLATES, template

GEN, UTIL = 7, 1
"""``pcie_gen`` in a ``static`` message's GPU array, ``util_pct`` in a tick's GPU row."""


def gen_low(ticks: int, hosts: int, seed: int) -> dict[str, list[Step]]:
    """The templates with some GPUs' links trained a generation low (an info finding that
    counts only while the GPU is busy: ``StaticVerdicts.loaded``) and their load dropping
    under the busy line now and then; at random ticks a new ``static`` message (a new
    epoch) moves which GPUs are low."""
    rng = random.Random(seed)
    out: dict[str, list[Step]] = {}
    for k in range(hosts):
        hello, lines = template(k % TEMPLATES, ticks)[1]
        first = [json.loads(x) for x in lines[0].splitlines()]
        static = next(m for m in first if isinstance(m, dict) and m.get("type") == "static")
        low = {rng.randrange(8)}
        steps: list[Step] = [("bytes", hello)]
        for t, raw in enumerate(lines):
            msgs = [json.loads(x) for x in raw.splitlines()]
            if t and rng.random() < 0.03:
                low = set(rng.sample(range(8), rng.randrange(4)))
                msgs.insert(0, dict(static, ts=T0 + t - 0.5))
            steps.append(("bytes", _lowered(msgs, low, rng)))
        out[f"g{k:02d}"] = steps
    return out


def _lowered(msgs: list[Any], low: set[int], rng: random.Random) -> bytes:
    """The messages, a ``static`` one's ``low`` GPUs a generation under their maximum, a
    tick's ``low`` GPUs idle now and then."""
    out = []
    for msg in msgs:
        if isinstance(msg, dict) and msg.get("type") == "static":
            msg = json.loads(json.dumps(msg))
            for i, g in enumerate(msg["gpus"]):
                if i in low and isinstance(g[GEN], int):
                    g[GEN] -= 1
        elif isinstance(msg, list):
            for i, g in enumerate(msg[2]):
                if i in low and rng.random() < 0.3:
                    g[UTIL] = rng.choice([3.0, 97.0])
        out.append(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    return b"".join(out)


@pytest.fixture(autouse=True)
def _reference() -> Iterator[None]:
    """The harness's reference fleet with today's module copied before this change, and
    today's detectors on both sides (this change touches no detector)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "before_s10", before_s10c)
        mp.setattr(harness, "detectors_before_s10",
                   types.SimpleNamespace(DetectorSchedule=detectors.DetectorSchedule))
        yield


@pytest.mark.parametrize("kind", KINDS)
def test_the_judges_judge_as_before(kind: str) -> None:
    seed = 100 + KINDS.index(kind)
    assert compare(streams(kind, seed), seed) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_links_a_generation_low_judge_as_before(seed: int) -> None:
    assert compare(gen_low(150, 8, seed), seed) is None


def test_every_kind_of_item_judges_as_before() -> None:
    hosts, specs = harness.item_hosts()
    assert compare(hosts, 111, specs=specs) is None


def test_the_streams_reach_the_inputs_changed() -> None:
    """Not vacuous: over the streams some tick has a link whose load counts, a saturated
    disk, swapping and strays in its inputs, and some tick's answer is "the same"."""
    seen: dict[str, int] = dict.fromkeys(("loaded", "disks", "swap", "strays", "same"), 0)
    inputs, same = sample_judge.tick_inputs, sample_judge._same

    def watched(*a: Any) -> Any:
        got = inputs(*a)
        if got is not None:
            seen["loaded"] += bool(got[1] is not None and got[1].loaded)
            seen["disks"] += bool(got[6])
            seen["swap"] += got[7] is not None
            seen["strays"] += bool(got[8])
        return got

    def counted(a: Any, b: Any) -> bool:
        seen["same"] += (r := same(a, b))
        return r

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, "tick_inputs", watched)
        mp.setattr(sample_judge, "_same", counted)
        for kind in ("long", "noisy"):
            assert compare(streams(kind, 100 + KINDS.index(kind)), 0) is None
        assert compare(gen_low(150, 8, 0), 0) is None
    assert all(seen.values()), seen


# --- negative controls ----------------------------------------------------------------------

def _blind_to_links(static: object) -> Any:
    return () if isinstance(static, sample_judge.StaticVerdicts) else sample_judge._EVERY


def _swap_out(*a: Any) -> Any:
    got = inputs(*a)
    if got is None:
        return got
    out = a[2].wire_row.host.swap_out_pages_s
    return (*got[:7], None if out is None else f"{out:.0f}", *got[8:])


def _same_but_disks(a: Any, b: Any) -> bool:
    return same((*a[:6], None, *a[7:]), (*b[:6], None, *b[7:]))


inputs, same = sample_judge.tick_inputs, sample_judge._same


@pytest.mark.parametrize(("attr", "perturbed", "kinds"), [
    ("_loaded", _blind_to_links, ("gen-low",)),
    ("tick_inputs", _swap_out, ("noisy",)),
    ("_same", _same_but_disks, ("noisy", "long")),
])
def test_negative_control_a_wrong_input_is_caught(attr: str, perturbed: Any,
                                                  kinds: tuple[str, ...]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge, attr, perturbed)
        assert any(compare(gen_low(150, 8, 0), 0) if k == "gen-low" else
                   compare(streams(k, 100 + KINDS.index(k)), 100 + KINDS.index(k))
                   for k in kinds)
