"""A tier's columns are made when it has rows to hold (issue 38): a host's coarse tiers stay
empty for minutes, and an empty column per series per tier cost ~12 KB a host.  Every query
answers as with the columns made at once (``EagerRing``: the ring before the change)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from probes.history import HostHistory, Tier
from probes.history import tiers as tiers_module
from probes.history.storage import Codec, Ring
from probes.wire.samples import DiskStats, GpuProcess, GpuState, HostSample
from tests.history.test_history import T0, gpus, sample


class EagerRing(Ring):
    """Every series' column made when the series is added, however empty the ring."""

    def add_series(self, key: str, codec: Codec) -> None:
        self.cols[key] = codec.fill * (self.cap * self.width)
        self.codecs[key] = codec


SMALL = (Tier(1.0, 120.0), Tier(5.0, 600.0), Tier(30.0, 1800.0), Tier(150.0, 3600.0))
"""Short tiers: a random stream of a few hundred samples reaches every one of them."""


def stream(seed: int, n: int) -> list[HostSample]:
    """GPUs coming and going, NaN-free values moving, processes and disks changing, gaps."""
    rng = random.Random(seed)
    out, t = [], T0
    for i in range(n):
        t += rng.choice([1.0, 1.0, 1.0, 2.0, 7.0, 45.0])
        count = rng.choice([8, 8, 8, 7, 2])
        gs = tuple(replace(g, util_pct=rng.choice([None, float(rng.randint(0, 100))]),
                           temp_c=float(rng.randint(30, 90)),
                           mem_used_mib=rng.uniform(0, 80000.0),
                           state=rng.choice([GpuState.OK, GpuState.OK, GpuState.UNKNOWN]),
                           processes=tuple(GpuProcess(pid=rng.randint(1, 4), name="p", user="u",
                                                      used_mib=rng.uniform(0, 9000.0))
                                           for _ in range(rng.randint(0, 2))))
                   for g in gpus(8)[:count])
        disks = tuple(DiskStats(name=f"d{k}", util=rng.uniform(0, 100), r_await=1.0,
                                w_await=None, aqu_sz=0.5) for k in range(rng.randint(0, 2)))
        out.append(sample(t, gs, seq=i, disks=disks, cpu_pct=rng.uniform(0, 100)))
    return out


def answers(h: HostHistory, rng: random.Random, t0: float, t1: float) -> list[object]:
    out: list[object] = [h.series_keys()]
    for key in h.series_keys():
        s = h.series(key)  # type: ignore[arg-type]
        if s is None:  # a step series: not in the rings
            continue
        out.append(s.latest())
        for _ in range(3):
            a = rng.uniform(t0 - 10, t1)
            b = rng.uniform(a, t1 + 10)
            out.append(s.columns(a, b))
            out.append(s.columns(a, b, max_points=rng.randint(1, 40)))
        out.append(s.columns())
    return out


def same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return len(x) == len(y) and all(map(same, x, y))
    return bool(x == y)


def differ(monkeypatch: pytest.MonkeyPatch, seeds: range, new: type[Ring] = Ring) -> int:
    diffs = 0
    for seed in seeds:
        samples = stream(seed, 300)
        built = []
        for ring in (EagerRing, new):
            monkeypatch.setattr(tiers_module, "Ring", ring)
            h = HostHistory(SMALL, process_forget_s=60.0)
            built.append(h)
        checks = [*sorted(random.Random(seed).sample(range(len(samples)), 5)), len(samples) - 1]
        for i, s in enumerate(samples):
            for h in built:
                h.add(replace(s))
            if i in checks:
                got = [answers(h, random.Random(seed + i), samples[0].ts, s.ts) for h in built]
                diffs += sum(not same(a, b) for a, b in zip(*got, strict=True))
    return diffs


def test_queries_answer_as_with_the_columns_made_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert differ(monkeypatch, range(3)) == 0


def test_a_ring_that_loses_what_it_held_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    class Forgets(Ring):
        """Remakes every column, empty, whenever it grows (a wrong laziness)."""

        def append(self, ts, data, counts=(), keep_from=math.inf):  # type: ignore[no-untyped-def]
            if self.n + len(ts) > self.cap and self.n:
                self.cols = {k: c.fill * (self.cap * self.width) for k, c in self.codecs.items()}
            super().append(ts, data, counts, keep_from)

    assert differ(monkeypatch, range(2), Forgets) > 0


def test_an_empty_tier_holds_no_column() -> None:
    h = HostHistory()
    for i in range(90):  # a minute and a half at 1 Hz: only the raw tier has rows
        h.add(sample(T0 + i, gpus(8), seq=i))
    h.flush()
    rings = h.store.rings
    assert rings[0].cols and len(rings[0].cols) == len(rings[0].codecs) > 40
    empty = [r for r in rings if not r.cap]
    assert empty, "a coarse tier is still empty after 90 s"
    assert all(not r.cols and r.codecs for r in empty)
    eager = sum(len(r.codecs) * (Codec("f").fill * 0).__sizeof__() for r in empty)
    assert eager > 2000  # what their empty columns cost before
