"""A sync repaints neighbouring changed lines as one region (issue 38, the 1 Hz redraw).

In a busy fleet every line on screen changes each second; ``refresh_rows`` asked for one
refresh per line (~30 µs each, and as many dirty regions for the compositor to cut) and now
asks for one per run of neighbouring lines.  Two checks:

* the screen: a table driven through random steps (ticks changing some, most or every row,
  scrolling, cursor moves, new orders, filters, hosts joining and leaving) at two sizes, one
  narrower than the table (a horizontal scrollbar), shows after every step what a full
  redraw shows (every widget's kept lines dropped, the screen rendered afresh), segment by
  segment; negative control: runs one line short leave stale lines on screen.
* the lines marked: on the same table states, the screen lines (and columns) the new
  ``refresh_rows`` marks dirty are those the code before (``redraw11_before_s11``) marked,
  one line at a time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from textual.app import App
from textual.geometry import Region
from textual.widget import Widget

from tests.widgets.redraw11_before_s11 import refresh_rows_before
from tests.widgets.test_table_paint import TableApp, line, screen_of
from widgets._table_paint import PaintedTable
from widgets.fleet_table import FleetLine, FleetTable

STEPS = 45


def _hosts(names: list[int], power: dict[int, float]) -> tuple[FleetLine, ...]:
    return tuple(line(i, power.get(i, 5600.0)) for i in names)


def _fresh(app: App[Any]) -> list[list[Any]]:
    """The screen drawn afresh: every widget's kept lines dropped first."""
    for widget in app.screen.walk_children(with_self=True):
        if isinstance(widget, Widget):
            widget._styles_cache.clear()
    return screen_of(app)


async def drive(seed: int, size: tuple[int, int], until_differ: bool = False
                ) -> tuple[int, int, int]:
    """(steps, steps whose screen differed from a full redraw, lines refreshed); with
    ``until_differ``, stopped at the first step that differs."""
    rng = random.Random(seed)
    names = list(range(60))
    spare = list(range(60, 90))
    power = {i: 5000.0 + i for i in names}
    app = TableApp()
    differ = refreshed = 0
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = _hosts(names, power)
        await pilot.pause()
        await pilot.pause()
        for _ in range(STEPS):
            roll = rng.random()
            if roll < 0.45:  # a tick: some rows, most rows or every row changes
                share = rng.choice([0.1, 0.6, 1.0])
                for i in names:
                    if rng.random() < share:
                        power[i] = power.get(i, 5000.0) + rng.randrange(1, 50)
            elif roll < 0.6:
                table.scroll_to(y=rng.randrange(0, 40), animate=False)
            elif roll < 0.7:
                table.move_cursor(row=rng.randrange(0, len(names)), animate=False)
            elif roll < 0.8:  # a new order
                rng.shuffle(names)
            elif roll < 0.87:  # a filter, then back
                shown = [i for i in names if i % 3]
                table.hosts = _hosts(shown, power)
                await pilot.pause()
            elif spare and roll < 0.94:  # hosts join
                names += [spare.pop() for _ in range(min(3, len(spare)))]
            else:  # hosts leave
                for _ in range(3):
                    names.remove(rng.choice(names))
            for i in names:  # and every tick moves a share of the rows with it
                if rng.random() < 0.5:
                    power[i] = power.get(i, 5000.0) + 1
            table.hosts = _hosts(names, power)
            await pilot.pause()
            await pilot.pause()
            shown_now = screen_of(app)
            differ += shown_now != _fresh(app)
            if differ and until_differ:
                break
        refreshed = table.lines_built
    return STEPS, differ, refreshed


@pytest.mark.parametrize("size", [(120, 16), (90, 14)])
async def test_the_screen_after_each_step_is_a_full_redraw(size: tuple[int, int]) -> None:
    steps, differ, built = await drive(1, size)
    assert differ == 0 and built > steps, (steps, differ, built)


async def test_the_comparison_sees_runs_one_line_short(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = PaintedTable._refresh_region

    def short(self: PaintedTable, region: Region) -> PaintedTable:
        if region.height > 1:
            region = region._replace(height=region.height - 1)
        return plain(self, region)

    monkeypatch.setattr(PaintedTable, "_refresh_region", short)
    _, differ, _ = await drive(1, (120, 16), until_differ=True)
    assert differ > 0


def _marked(table: PaintedTable, refresh: Any, keys: set[str]) -> set[tuple[int, int, int]]:
    """The (line, first column, end column) cells ``refresh`` asks to repaint."""
    out: set[tuple[int, int, int]] = set()
    real = Widget.refresh

    def spy(self: Widget, *regions: Region, **kw: Any) -> Widget:
        for r in regions:
            out.update((y, r.x, r.right) for y in range(r.y, r.bottom))
        return self

    Widget.refresh = spy  # type: ignore[method-assign,assignment]
    try:
        refresh(table, keys)
    finally:
        Widget.refresh = real  # type: ignore[method-assign]
    return out


@pytest.mark.parametrize("size", [(120, 16), (90, 14)])
async def test_the_lines_marked_are_those_marked_line_by_line(size: tuple[int, int]) -> None:
    rng = random.Random(7)
    app = TableApp()
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = _hosts(list(range(50)), {})
        await pilot.pause()
        await pilot.pause()
        cases = 0
        for _ in range(60):
            table.scroll_to(y=rng.randrange(0, 45), animate=False)
            await pilot.pause()
            share = rng.choice([0.05, 0.3, 0.8, 1.0])
            keys = {f"gpu{i:04d}" for i in range(50) if rng.random() < share}
            new = _marked(table, PaintedTable.refresh_rows, keys)
            old = _marked(table, refresh_rows_before, keys)
            assert new == old, (int(table.scroll_y), sorted(keys))
            cases += bool(new)
        assert cases > 40
