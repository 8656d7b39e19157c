"""The fleet table keeps its renderings through a focus change (issue 38, keys).

A focus change (``/`` opens the filter line, ``escape`` closes it, a screen left and back)
restyles the table; it used to drop every kept line, cell, template and stamp, so the next
paint drew every cell through Rich again (most of those keys' paint at 1024 hosts).  The
renderings are keyed by the pseudo-classes they were drawn under, so they are now kept, and
dropped only when the styles under the same pseudo-classes changed (``_check_look``).

Proved here: after focus round trips with rows changing in between, every line on screen as
the kept renderings give it equals DataTable's own fresh render, segment by segment (the
row's meta taken off; focused and blurred); a round trip with nothing changed builds no line
(it built every line on screen before). A class whose rule changes a component style under
the same pseudo-classes is seen: the screen equals that of a table drawn with the class at
once; negative control: a table that never drops its renderings on a restyle shows stale
lines. Each line read during a paint, with the table's base style read once a paint, equals
DataTable's own ``render_line`` (which reads it per line); negative control: another base
style differs.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widgets import DataTable, Input

from tests.widgets.test_table_paint import ROWS, SIZE, TableApp, fleet, rowless, screen_of
from widgets._table_paint import PaintedTable
from widgets.fleet_table import FleetTable

ALT = "#fleet-table.-alt > .datatable--even-row { background: #7f1f5f; }"


class FocusApp(TableApp):
    """The fleet table and an input to take the focus from it."""

    CSS = ALT

    def compose(self) -> ComposeResult:
        yield self.table(id="fleet-table")
        yield Input(id="box")


class NeverDrops(FleetTable):
    """The negative control: renderings kept through any restyle."""

    def _check_look(self) -> None:
        self._look_checked = True


def lines_against_datatables(table: FleetTable) -> tuple[int, int]:
    """(lines compared, lines that differ): every data line on screen as the kept
    renderings give it, against DataTable's own render with every cache dropped."""
    base, width = table.rich_style, table.size.width
    ours = {}
    for y in range(table.size.height):
        found = table._line_key(y, 0, width, base)
        if found is not None:
            ours[y] = list(table._render_line(y, 0, width, base))
    table._clear_caches()  # DataTable's caches and the kept renderings
    differ = sum(rowless(DataTable._render_line(table, y, 0, width, base)) != line
                 for y, line in ours.items())
    return len(ours), differ


async def drawn(pilot: Any, app: App[Any]) -> None:
    await pilot.pause()
    await pilot.pause()
    screen_of(app)  # every line drawn


async def test_a_focus_round_trip_keeps_renderings_that_are_datatables_own() -> None:
    app = FocusApp()
    async with app.run_test(size=SIZE) as pilot:
        table, box = app.query_one(FleetTable), app.query_one("#box", Input)
        table.hosts = fleet()
        table.focus()
        table.move_cursor(row=4)
        table.hover_coordinate = table.cursor_coordinate._replace(row=7)
        table._show_hover_cursor = True
        await drawn(pilot, app)
        box.focus()
        await drawn(pilot, app)
        table.focus()
        await drawn(pilot, app)
        built = table.lines_built
        for _ in range(2):  # nothing changed: every line comes from the kept renderings
            box.focus()
            await drawn(pilot, app)
            table.focus()
            await drawn(pilot, app)
        assert table.lines_built == built
        for turn in range(4):
            # the rows change while the table is blurred and while it is focused
            (box if turn % 2 == 0 else table).focus()
            await drawn(pilot, app)
            table.hosts = fleet({i: 6000.0 + 17 * i + turn for i in range(turn % 2, ROWS, 2)})
            await drawn(pilot, app)
            assert table.has_focus == (turn % 2 == 1)
            compared, differ = lines_against_datatables(table)
            assert compared == table.size.height - 1 and differ == 0, turn
            await drawn(pilot, app)


async def screen_with_class(table_type: type[FleetTable], at_once: bool) -> list[list[Any]]:
    app = FocusApp(table_type)
    async with app.run_test(size=SIZE) as pilot:
        table, box = app.query_one(FleetTable), app.query_one("#box", Input)
        table.hosts = fleet()
        if at_once:
            table.add_class("-alt")
        table.focus()
        await drawn(pilot, app)
        box.focus()
        await drawn(pilot, app)
        table.focus()
        await drawn(pilot, app)
        if not at_once:  # under the same pseudo-classes as the lines kept
            table.add_class("-alt")
            await drawn(pilot, app)
        return screen_of(app)


async def test_a_restyle_under_the_same_pseudo_classes_draws_anew() -> None:
    expected = await screen_with_class(FleetTable, at_once=True)
    assert await screen_with_class(FleetTable, at_once=False) == expected
    # the negative control: renderings kept through the class's restyle are stale
    assert await screen_with_class(NeverDrops, at_once=False) != expected


async def _lines_in_a_paint(base: Style | None) -> tuple[int, int]:
    """(lines, lines that differ): each line ``render_line`` gives during a paint against
    DataTable's own ``render_line`` (which reads ``rich_style`` per line); ``base``: a
    base style forced in place of the one read once a paint (the negative control)."""
    seen = [0, 0]

    def checked(table: FleetTable, y: int) -> Strip:
        if base is not None:
            table._paint_style = base
        ours = PaintedTable.render_line(table, y)
        theirs = DataTable.render_line(table, y)
        seen[0] += 1
        seen[1] += list(ours) != list(theirs)
        return ours

    app = FocusApp()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FleetTable, "render_line", checked)
        async with app.run_test(size=SIZE) as pilot:
            table = app.query_one(FleetTable)
            table.hosts = fleet()
            table.focus()
            table.move_cursor(row=4)
            await drawn(pilot, app)
            table.scroll_to(y=5, animate=False)
            table.hosts = fleet({i: 6100.0 + i for i in range(ROWS)})
            await drawn(pilot, app)
    return seen[0], seen[1]


async def test_a_line_read_with_the_style_read_once_a_paint_is_datatables_own() -> None:
    lines, differ = await _lines_in_a_paint(None)
    assert lines >= 2 * (SIZE[1] - 4) and differ == 0
    # the negative control: a line drawn in another base style differs
    _, differ = await _lines_in_a_paint(Style(bold=True))
    assert differ > 0
