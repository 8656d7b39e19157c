"""Under a numeric order, off-screen rows take fresh numbers, not a full build (issue 38).

While the fleet screen's order reads one number and no filter is set
(``FleetRows.only_numbers_read``), an off-screen row due at its refresh slot whose status,
findings and GPUs answering are as built gets its numbers afresh on the kept row
(``row_judge.renumbered``) instead of ``HostState.row``.  Here a random fleet (numbers
moving, GPUs hot or missing, hosts down, back, silent) is read each tick through such rows
and through the rows as before (the same class with ``only_numbers_read`` off: a full build
at each slot), the rows on screen scrolling and a filter set for a while.  Every tick:
every row's four numbers equal the rows' before, so each numeric order is the same; the
totals equal; the rows on screen equal a fresh ``HostState.row`` field by field; a row
with fresh numbers on older verdicts is one a scroll draws again at once
(``renumbered_among``).  Fewer rows are built.  Negative control: a ``renumbered`` that keeps
the stale numbers is caught.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from probes.analysis.fleet_row import FleetRow
from probes.analysis.row_judge import renumbered
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import HostSample
from tests.support.tui_fakes import T0, hello, sample
from tui.views import fleet_rows
from tui.views.fleet_rows import FleetRows
from tui.views.fleet_view import sort_rows

HOSTS = [f"h{i:02d}" for i in range(20)]
TICKS = 60
ORDERS = ("temp", "mem", "util", "power")


def _numbers(row: FleetRow) -> tuple[object, ...]:
    return row.name, row.max_temp_c, row.mem_used_pct, row.mean_util_pct, row.power_w


def _tick_items(rng: random.Random, fleet: FleetState, step: int,
                trouble: dict[str, int | None]) -> None:
    """One second of the fleet: most hosts send a sample with moving numbers; now and
    then a host's trouble (a hot GPU) comes or goes."""
    now = T0 + step
    for name in HOSTS:
        if rng.random() < 0.04:
            trouble[name] = rng.choice([None, None, 2, 5])
        host = fleet.hosts[name]
        roll = rng.random()
        if host.status.is_down:
            if roll < 0.3:  # back
                fleet.apply(name, Connected(now), now)
                fleet.apply(name, hello(name), now)
            continue
        if roll < 0.02:
            fleet.apply(name, Disconnected(now, "connection refused", 5.0,
                                           kind=DisconnectKind.UNREACHABLE), now)
            continue
        if roll < 0.08:
            continue  # silent this second
        s = sample(name, step, trouble_gpu=trouble.get(name))
        gpus = tuple(dataclasses.replace(
            g, power_w=300.0 + rng.randrange(300), temp_c=50.0 + rng.randrange(40),
            util_pct=float(rng.randrange(101)),
            mem_used_mib=(g.mem_used_mib or 0.0) + rng.randrange(1000))
            for g in s.gpus)
        if rng.random() < 0.03:
            gpus = gpus[:7]  # one GPU missing
        fleet.apply(name, dataclasses.replace(s, gpus=gpus), now)


def _run(seed: int, made: dict[str, FleetRow] | None = None) -> dict[str, int]:
    """``made``: the rows ``renumbered`` made, by host (a recording wrapper's)."""
    rng = random.Random(seed)
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for name in HOSTS:
        fleet.apply(name, Connected(T0), T0)
        fleet.apply(name, hello(name), T0)
    view, before = FleetRows(fleet), FleetRows(fleet)
    top = 0
    trouble: dict[str, int | None] = {}
    diffs = {"numbers": 0, "order": 0, "totals": 0, "on screen": 0, "renumbers": 0,
             "builds": 0, "builds before": 0, "unreported": 0}
    for step in range(1, TICKS):
        _tick_items(rng, fleet, step, trouble)
        now = T0 + step + rng.random() * 0.5
        fleet.tick(now)
        if rng.random() < 0.3:  # a scroll
            top = rng.randrange(len(HOSTS) - 4)
        only = not 25 <= step < 32  # a filter set, then cleared
        view.focus = before.focus = frozenset(HOSTS[top:top + 5])
        view.only_numbers_read = only
        rows, was = view.rows(now), before.rows(now)
        if only:
            diffs["numbers"] += sum(_numbers(a) != _numbers(b)
                                    for a, b in zip(rows, was, strict=True))
            for order in ORDERS:
                diffs["order"] += ([r.name for r in sort_rows(rows, order)]
                                   != [r.name for r in sort_rows(was, order)])
        diffs["totals"] += view.totals(now) != before.totals(now)
        for row in rows:
            if made is not None and made.get(row.name) is row:  # older verdicts: a scroll
                diffs["unreported"] += not view.renumbered_among(frozenset({row.name}))
            if row.name in view.focus:
                diffs["on screen"] += repr(row) != repr(fleet.hosts[row.name].row(now))
    diffs["renumbers"] = view.row_renumbers
    diffs["builds"], diffs["builds before"] = view.row_builds, before.row_builds
    return diffs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_numeric_orders_as_full_builds_give_them(seed: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[str, FleetRow] = {}

    def recorded(row: FleetRow, sample: HostSample | None) -> FleetRow:
        out = made[row.name] = renumbered(row, sample)
        return out

    monkeypatch.setattr(fleet_rows, "renumbered", recorded)
    diffs = _run(seed, made)
    assert diffs["renumbers"] > 50, diffs  # the case is exercised
    assert diffs["builds"] < diffs["builds before"] - 50, diffs
    assert (diffs["numbers"], diffs["order"], diffs["totals"], diffs["on screen"]) \
        == (0, 0, 0, 0), diffs
    assert diffs["unreported"] == 0, diffs  # such a row scrolled on screen asks a redraw


def test_a_stale_number_kept_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_rows, "renumbered", lambda row, sample: row)
    diffs = _run(1)
    assert diffs["numbers"] > 0 and diffs["order"] > 0, diffs
