"""The wall's view model built the cheaper way (session 10) is the one built before.

``WallGpu``/``WallHost`` are named tuples now and ``wall_host`` builds a host's cells
without a ``FleetLine`` or a per-GPU ``_value`` dispatch; what the wall draws comes from
these fields only.  Here a fleet of simulated hosts (healthy, throttling, leaking, a link
down-trained, a GPU lost, hosts that drop with a reason, come back, go silent, or never
connect) is folded second by second, and at each step every metric's view, for the rows in
a random order, for named hosts and for the whole fleet, is compared field by field (``repr``:
the types of numbers too) with the reference copy (``tests.analysis.wall_view_before_s10``).
Negative controls: memory % computed in another order (the last bit), a down host's note
without its timing, each differ.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import HostSample
from tests.analysis import wall_view_before_s10 as before
from tests.support.tui_fakes import T0, sim_items
from tui.views.wall_view import wall_view
from widgets._wall_layout import METRICS

SCENARIOS = ("healthy", "throttle:1", "leak:1", "link-downgrade:1", "xid79:2@300", "train",
             "nccl-timeout", "low-ram", "healthy")
MINUTES = 30


def normal(view: Any) -> tuple[Any, ...]:
    """A view as plain values: metric, each host's fields and each GPU's, the rest."""
    return (view.metric, view.temp_margins, view.empty, view.mem_high_pct,
            tuple((h.name, h.tag, h.status,
                   tuple((repr(g.value), g.state, g.temp, g.mem_high) for g in h.gpus),
                   h.worst, h.note) for h in view.hosts))


def _fleet(seed: int) -> tuple[FleetState, list[list[tuple[str, Any]]]]:
    """A fleet and its items, a list per simulated step (hosts interleaved)."""
    rng = random.Random(seed)
    names = [f"gpu-{i:02d}" for i in range(14)]
    specs = [HostSpec(name=n, tags=(f"rack-{i % 3}",) if i % 5 else (), expect_gpus=8)
             for i, n in enumerate(names)]
    fleet = FleetState(specs)
    streams: dict[str, list[Any]] = {}
    for i, n in enumerate(names[:-2]):  # the last two never connect
        streams[n] = sim_items(n, SCENARIOS[i % len(SCENARIOS)], seed=i + 1, minutes=MINUTES)
    steps: list[list[tuple[str, Any]]] = [[] for _ in range(MINUTES + 2)]
    for n, items in streams.items():
        step = 0
        down_at = rng.randrange(5, MINUTES) if rng.random() < 0.4 else None
        silent_from = rng.randrange(10, MINUTES) if rng.random() < 0.2 else None
        for item in items:
            if isinstance(item, HostSample):
                step += 1
                if silent_from is not None and step >= silent_from:
                    continue
            steps[min(step, MINUTES + 1)].append((n, item))
            if down_at is not None and step == down_at and isinstance(item, HostSample):
                kind = rng.choice(list(DisconnectKind))
                steps[step].append((n, Disconnected(item.ts + 1, f"ssh: reset by peer {n}",
                                                    retry_in_s=rng.choice((None, 5.0, 90.0)),
                                                    kind=kind)))
                if rng.random() < 0.5:  # back a few steps later
                    steps[step + 3].append((n, Connected(item.ts + 180)))
    return fleet, steps


def _compare(seed: int, reference: Callable[..., Any]) -> int:
    """Fold the fleet and compare each step's views; how many hosts were compared."""
    rng = random.Random(seed)
    fleet, steps = _fleet(seed)
    compared = 0
    for step, items in enumerate(steps):
        now = T0 + step * 60.0 + 1.0
        for name, item in items:
            fleet.apply(name, item, now)
        rows = [h.row(now) for h in fleet.hosts.values()]
        rng.shuffle(rows)
        shown = rows[:rng.randrange(len(rows) + 1)]
        for metric in METRICS:
            for kwargs in ({"rows": shown, "empty": "no hosts match the filter"},
                           {"names": [r.name for r in shown]}, {}):
                new = wall_view(fleet, metric, now + 0.5, **kwargs)
                old = reference(fleet, metric, now + 0.5, **kwargs)
                assert normal(new) == normal(old), (step, metric, kwargs)
                compared += len(new.hosts)
    return compared


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_wall_view_is_the_one_built_before(seed: int) -> None:
    assert _compare(seed, before.wall_view_before) > 1000


def test_memory_percent_in_another_order_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: memory used % computed as ``used / total * 100`` (the last bit
    differs for some readings) is seen."""
    value = before._value

    def reordered(g: Any, metric: str) -> float | None:
        if metric == "mem" and g is not None and g.mem_used_mib is not None \
                and g.mem_total_mib:
            return g.mem_used_mib / g.mem_total_mib * 100.0
        return value(g, metric)

    monkeypatch.setattr(before, "_value", reordered)
    with pytest.raises(AssertionError):
        _compare(1, before.wall_view_before)


def test_a_note_without_its_timing_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a down host's note without when it was last seen is seen."""
    monkeypatch.setattr(before, "timing_text", lambda _row: "")
    with pytest.raises(AssertionError):
        _compare(1, before.wall_view_before)
