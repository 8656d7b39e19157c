"""Rows off screen keep their numbers while nothing reads them (issue 38, item 3).

While the fleet screen's order and filter read only names, status and findings
(``FleetRows.numbers_read`` False), an off-screen host's row is not rebuilt for its numbers
until it comes on screen.  Here a random fleet changes over ticks (numbers move, GPUs get
hot or go missing, hosts go down, come back, fall silent) while the rows on screen move
(a scroll) and the order/filter switches between reading numbers and not.  Every tick,
against every row built afresh: the rows on screen are equal field by field; while the
numbers are not read, every row's status, counts (GPUs answering included), findings and
reasons are equal, and so are the header's totals; while they are read, the rows equal
those of the reference code before (session 5's ``FleetRowsBefore``: numbers and the GPU
count wait at most a refresh slot off screen).  Negative controls: rows kept past a
findings change, rows kept on screen, each caught.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from probes.analysis.fleet_counts import count_rows
from probes.analysis.fleet_row import FleetRow
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState, HostState
from probes.wire.events import Connected, Disconnected
from tests.analysis.fleet_rows_before import FleetRowsBefore
from tests.support.tui_fakes import T0, hello, sample
from tui.views.fleet_rows import FleetRows

HOSTS = [f"h{i:02d}" for i in range(16)]
TICKS = 70
WAITING = ("max_temp_c", "mem_used_pct", "mean_util_pct", "power_w", "gpus", "temp_level",
           "mem_high", "jobs")
"""What an off-screen row may keep while no one reads it."""


def _settled(row: FleetRow) -> FleetRow:
    return dataclasses.replace(row, **dict.fromkeys(WAITING))


def _tick_items(rng: random.Random, fleet: FleetState, step: int) -> None:
    """One second of the fleet: most hosts send a sample with moving numbers."""
    now = T0 + step
    for name in HOSTS:
        host = fleet.hosts[name]
        roll = rng.random()
        if host.status.is_down:
            if roll < 0.3:  # back
                fleet.apply(name, Connected(now), now)
                fleet.apply(name, hello(name), now)
            continue
        if roll < 0.03:
            fleet.apply(name, Disconnected(now, "connection refused", 5.0,
                                           kind=DisconnectKind.UNREACHABLE), now)
            continue
        if roll < 0.12:
            continue  # silent this second (stale after a few)
        s = sample(name, step, trouble_gpu=rng.choice([None, None, None, 2, 5]))
        gpus = tuple(dataclasses.replace(g, power_w=300.0 + rng.randrange(300),
                                         temp_c=50.0 + rng.randrange(40))
                     for g in s.gpus)
        if rng.random() < 0.05:
            gpus = gpus[:7]  # one GPU missing
        fleet.apply(name, dataclasses.replace(s, gpus=gpus), now)


def _run(seed: int, view_of: Callable[[FleetState], Any], *, always_read: bool
         ) -> dict[str, int]:
    """Ticks of a random fleet through ``view_of(fleet)``; the differences found, by kind."""
    rng = random.Random(seed)
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for name in HOSTS:
        fleet.apply(name, Connected(T0), T0)
        fleet.apply(name, hello(name), T0)
    view = view_of(fleet)
    before = FleetRowsBefore(fleet)
    top, read = 0, True
    diffs = {"on screen": 0, "settled": 0, "totals": 0, "before": 0, "waited": 0}
    for step in range(1, TICKS):
        _tick_items(rng, fleet, step)
        now = T0 + step + rng.random() * 0.5
        fleet.tick(now)
        if rng.random() < 0.3:  # a scroll
            top = rng.randrange(len(HOSTS) - 4)
        if not always_read and rng.random() < 0.15:  # a sort or a filter key
            read = not read
        view.focus = before.focus = frozenset(HOSTS[top:top + 5])
        view.numbers_read = read
        rows = view.rows(now)
        totals = view.totals(now)
        afresh = [h.row(now) for h in fleet.hosts.values()]
        assert [r.name for r in rows] == HOSTS
        for row, full in zip(rows, afresh, strict=True):
            if row.name in view.focus:
                diffs["on screen"] += repr(row) != repr(full)
            diffs["waited"] += repr(row) != repr(full)
            if not read:  # while read, a count may wait its slot as before (``before``)
                diffs["settled"] += repr(_settled(row)) != repr(_settled(full))
        if not read:
            diffs["totals"] += totals != count_rows(afresh)
        if always_read:
            diffs["before"] += repr(rows) != repr(before.rows(now))
    return diffs


@pytest.mark.parametrize("seed", [1, 2])
def test_rows_off_screen_wait_for_nothing_but_their_numbers(seed: int) -> None:
    diffs = _run(seed, FleetRows, always_read=False)
    assert diffs["waited"] > 0  # numbers did wait off screen: the case is exercised
    assert (diffs["on screen"], diffs["settled"], diffs["totals"]) == (0, 0, 0), diffs


def test_while_numbers_are_read_rows_are_as_before() -> None:
    diffs = _run(4, FleetRows, always_read=True)
    assert diffs["waited"] > 0
    assert (diffs["on screen"], diffs["before"]) == (0, 0), diffs


class _BlindToFindings(FleetRows):
    """Negative control: an off-screen row kept whatever its findings did."""

    def _may_wait(self, host: HostState, kept: Any, now: float, status: Any) -> bool:
        return self.focus is not None and host.name not in self.focus


class _KeptOnScreen(FleetRows):
    """Negative control: a row kept on screen too, while its findings hold."""

    def _may_wait(self, host: HostState, kept: Any, now: float, status: Any) -> bool:
        return not self.numbers_read and host.findings_as_kept(status) is kept.found


def test_the_comparison_sees_rows_kept_past_what_they_show() -> None:
    blind = _run(1, _BlindToFindings, always_read=False)
    assert blind["settled"] > 0 and blind["totals"] > 0, blind
    kept = _run(1, _KeptOnScreen, always_read=False)
    assert kept["on screen"] > 0, kept
