"""``cells`` (a host's GPU cells at once, issue 38) is ``cell`` for each GPU, exactly.

The wall looks at every host on its screen each tick; ``cells`` makes the metric's and the
host's choices once a host.  ``cell`` stays the definition: over random GPUs (every verdict,
temperature level and memory mark; readings in and far out of every scale, None, NaN and
the infinities) on every metric (and one the scales do not name) and every host status,
the two agree cell for cell.  Negative control: a ``cells`` that rounds the level instead
of cutting it differs.
"""

from __future__ import annotations

import math
import random

import pytest

from probes.analysis.judge import GpuVerdict, TempLevel
from widgets import _wall_layout
from widgets._wall_layout import RAMP, WallGpu, cell, cells

METRICS = ("mem", "temp", "util", "status", "power")
STATUSES = ("streaming", "stale", "down", "connecting", "unknown", "auth failed")


def _value(rng: random.Random) -> float | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.08:
        return math.nan
    if roll < 0.1:
        return rng.choice((math.inf, -math.inf))
    if roll < 0.2:  # on a level's edge
        return rng.choice((0.0, 12.5, 25.0, 50.0, 87.5, 100.0, 30.0, 37.5, 82.5, 90.0))
    return rng.uniform(-300.0, 400.0)


def _gpus(rng: random.Random) -> tuple[WallGpu, ...]:
    return tuple(WallGpu(_value(rng), rng.choice(list(GpuVerdict)), rng.choice(list(TempLevel)),
                         rng.random() < 0.3) for _ in range(rng.randrange(0, 10)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cells_is_cell_for_each_gpu(seed: int) -> None:
    rng = random.Random(seed)
    checked = 0
    for _ in range(3000):
        metric, status, gpus = rng.choice(METRICS), rng.choice(STATUSES), _gpus(rng)
        assert cells(metric, status, gpus) == [cell(metric, status, g) for g in gpus], (
            metric, status, gpus)
        checked += len(gpus)
    assert checked > 10000


def test_a_cells_that_rounds_the_level_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def rounded(metric: str, status: str, gpus: tuple[WallGpu, ...]) -> list[tuple[str, str]]:
        out = []
        for g in gpus:
            glyph, name = cell(metric, status, g)
            if name.startswith("level-") and g.value is not None and math.isfinite(g.value):
                lo, hi = _wall_layout.SCALE.get(metric, (0.0, 100.0))
                n = max(0, min(len(RAMP) - 1, round((g.value - lo) / (hi - lo) * len(RAMP))))
                glyph, name = RAMP[n], f"level-{n}"
            out.append((glyph, name))
        return out

    rng = random.Random(1)
    differ = 0
    for _ in range(500):
        metric, status, gpus = rng.choice(METRICS), rng.choice(STATUSES), _gpus(rng)
        differ += rounded(metric, status, gpus) != cells(metric, status, gpus)
    assert differ > 10
