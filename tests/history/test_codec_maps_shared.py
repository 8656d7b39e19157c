"""A ring's series -> codec map is shared by every ring that added the same series in the
same order (issue 38, memory: each host's four tiers held four ~1.5 KB dicts, the same at
every host).  The map reads exactly as the ring's own dict did after the same adds and drops
(``OwnRing``: the ring before the change), order and codecs included; queries over whole
histories are held to the old ring by ``test_rings_lazy`` (its ``EagerRing`` keeps its own
map)."""

from __future__ import annotations

import random
from array import array
from collections.abc import Mapping

import pytest

from probes.history import HostHistory, storage
from probes.history.keys import MIB16
from probes.history.storage import F32, HALF, PCT, Codec, Ring, codecs_after
from tests.history.test_rings_lazy import SMALL, stream

CODECS = (F32, HALF, PCT, MIB16)


class OwnRing(Ring):
    """The ring before the change: its own dict, set and popped in place."""

    def __init__(self, span_s: float, width: int, counted: bool) -> None:
        super().__init__(span_s, width, counted)
        self.own: dict[str, Codec] = {}
        self.codecs = self.own

    def add_series(self, key: str, codec: Codec) -> None:
        if self.cap:
            self.cols[key] = codec.fill * (self.cap * self.width)
        self.own[key] = codec

    def drop_series(self, key: str) -> None:
        self.cols.pop(key, None)
        self.own.pop(key, None)
        self.partial.pop(key, None)


def _steps(rng: random.Random, n: int) -> list[tuple[str, Codec | None]]:
    keys = [f"gpu/{g}/f{f}" for g in range(3) for f in range(3)] + ["host/load1"]
    return [(rng.choice(keys), None if rng.random() < 0.25 else rng.choice(CODECS))
            for _ in range(n)]


def _differences(steps: list[tuple[str, Codec | None]],
                 after: object = codecs_after) -> int:
    """Rings fed the steps (with rows appended now and then) against ``OwnRing``."""
    diffs = 0
    rings = [Ring(60.0, 1, False) for _ in range(3)]
    old = OwnRing(60.0, 1, False)
    t = 0.0
    for i, (key, codec) in enumerate(steps):
        for ring in (*rings, old):
            if codec is None:
                ring.drop_series(key)
            elif ring is old:
                ring.add_series(key, codec)
            else:
                ring.codecs = after(ring.codecs, key, codec)  # type: ignore[operator]
                if ring.cap:  # as ``add_series`` does, with the codec the map now holds
                    ring.cols[key] = ring.codecs[key].fill * (ring.cap * ring.width)
        if i % 7 == 0:
            t += 1.0
            for ring in (*rings, old):
                ring.append([t], {k: c.encode([float(i % 50)]) for k, c in ring.codecs.items()})
        want = list(old.codecs.items())
        for ring in rings:
            diffs += list(ring.codecs.items()) != want
            diffs += {k: bytes(c) for k, c in ring.cols.items()} != \
                {k: bytes(c) for k, c in old.cols.items()}
        diffs += any(r.codecs is not rings[0].codecs for r in rings)  # one map for all
    return diffs


def test_shared_maps_read_as_each_ring_own_dict() -> None:
    rng = random.Random(38)
    assert sum(_differences(_steps(rng, rng.randrange(5, 120))) for _ in range(60)) == 0


def test_a_map_that_ignores_a_changed_codec_is_caught() -> None:
    def by_key_only(now: Mapping[str, Codec], key: str, codec: Codec | None
                    ) -> Mapping[str, Codec]:
        if codec is not None and key in now:
            return now  # a key added again with another codec keeps its first
        return codecs_after(now, key, codec)

    rng = random.Random(7)
    assert sum(_differences(_steps(rng, 80), by_key_only) for _ in range(20)) > 0


def test_two_hosts_hold_the_same_maps() -> None:
    a, b = HostHistory(SMALL, process_forget_s=60.0), HostHistory(SMALL, process_forget_s=60.0)
    for s in stream(3, 40):
        a.add(s)
    for s in stream(3, 40):
        b.add(s)
    rings_a, rings_b = a.store.rings, b.store.rings
    assert rings_a[0].codecs  # series were added
    for ra, rb in zip(rings_a, rings_b, strict=True):
        assert ra.codecs is rb.codecs and isinstance(ra.codecs, dict)


def test_the_step_table_stays_bounded_and_maps_in_use_stay_right(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "CODEC_MAPS_MAX", 16)
    storage._codec_steps.clear()
    ring, old = Ring(60.0, 1, False), OwnRing(60.0, 1, False)
    for i in range(200):
        key, codec = f"k{i % 37}", CODECS[i % 3]
        for r in (ring, old):
            r.add_series(key, codec)
        if i % 5 == 0:
            for r in (ring, old):
                r.drop_series(f"k{(i * 7) % 37}")
        assert len(storage._codec_steps) <= 16
        assert list(ring.codecs.items()) == list(old.codecs.items())
    ring.append([1.0], {k: array(c.store, c.fill) for k, c in ring.codecs.items()})
    assert set(ring.cols) == set(old.codecs)
