"""A host's NVLinks are kept small (issue 38): slotted views, one object for every host
and message whose link reads the same, the values and their types as decoded."""

from __future__ import annotations

import math
import random

import pytest

from probes.analysis import fabric
from probes.analysis.fabric import FabricTracker, shared_link
from probes.rules.fabric import LinkView, nvlink_verdicts
from probes.wire.samples import FabricSample, NvLinkSample


def links(rng: random.Random, gpus: int = 8, per: int = 18) -> tuple[NvLinkSample, ...]:
    """An NVSwitch host's links: mostly alike, some down, slow, erroring, odd types."""
    out = []
    for g in range(gpus):
        for k in range(per):
            r = rng.random()
            out.append(NvLinkSample(
                g, k, active=None if r < 0.05 else r > 0.1,
                speed_gbs=rng.choice([26.562, 26.562, 26.562, 25.0, 25, 0.0, -0.0, None]),
                replay=rng.choice([0, 0, 0, None, 3]), recovery=rng.choice([0, 0, None, 1]),
                crc=rng.choice([0, 0, 0, 7])))
    return tuple(out)


def fresh(ns: tuple[NvLinkSample, ...]) -> tuple[LinkView, ...]:
    """The views as built before sharing: one new object per link."""
    return tuple(LinkView(n.gpu, n.link, n.active, n.speed_gbs, n.replay, n.recovery, n.crc)
                 for n in ns)


def fields(v: LinkView) -> list[tuple[type, object]]:
    return [(type(x), math.copysign(1.0, x) if isinstance(x, float) else x)
            for x in (v.gpu, v.link, v.active, v.speed_gbs, v.replay, v.recovery, v.crc)]


def test_a_link_view_has_no_dict() -> None:
    assert not hasattr(LinkView(0, 0, True), "__dict__")


def test_shared_links_are_the_decoded_values_and_types() -> None:
    for seed in range(20):
        ns = links(random.Random(seed))
        t = FabricTracker()
        t.add(FabricSample(1.0, nvlinks=ns))
        want = fresh(ns)
        assert t.links == want
        assert [fields(v) for v in t.links] == [fields(v) for v in want]
        assert nvlink_verdicts(t.links) == nvlink_verdicts(want)


def test_an_int_speed_and_a_negative_zero_are_not_merged_with_their_float() -> None:
    a = shared_link(0, 0, True, 25, 0, 0, 0)
    b = shared_link(0, 0, True, 25.0, 0, 0, 0)
    assert a is not b and type(a.speed_gbs) is int and type(b.speed_gbs) is float
    z = shared_link(0, 1, False, -0.0, None, None, None)
    assert z.speed_gbs is not None and math.copysign(1.0, z.speed_gbs) == -1.0
    assert shared_link(0, 1, False, 0.0, None, None, None) is not z


def test_hosts_with_alike_links_share_one_object_each() -> None:
    rng = random.Random(5)
    ns = links(rng)
    copies = tuple(NvLinkSample(n.gpu, n.link, n.active, n.speed_gbs, n.replay, n.recovery,
                                n.crc) for n in ns)  # another host's decode: new objects
    a, b = FabricTracker(), FabricTracker()
    a.add(FabricSample(1.0, nvlinks=ns))
    b.add(FabricSample(2.0, nvlinks=copies))
    assert all(x is y for x, y in zip(a.links, b.links, strict=True))
    # a link that changes is its own object; the rest stay shared
    changed = (NvLinkSample(0, 0, True, 26.562, 99, 0, 0), *copies[1:])
    b.add(FabricSample(3.0, nvlinks=changed))
    assert b.links[0] is not a.links[0] and b.links[0].replay == 99
    assert all(x is y for x, y in zip(a.links[1:], b.links[1:], strict=True))


def test_the_shared_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "SHARED_LINKS_MAX", 100)
    monkeypatch.setattr(fabric, "_shared_links", {})
    for i in range(1000):
        v = shared_link(0, 0, True, 26.562, i, 0, 0)
        assert v.replay == i
        assert len(fabric._shared_links) <= 100
