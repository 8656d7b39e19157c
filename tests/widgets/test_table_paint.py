"""The fleet table paints what changed, and what it paints is what DataTable would paint.

A table line is kept by what it shows (``widgets/_table_paint.py``) and a sync repaints only
the rows it wrote.  Proved here on the screen itself: after a row, the width, the cursor or
the theme changes, what the compositor shows equals what a table that was handed the final
state at once shows; a table whose line cache keys on the line's place alone (the negative
control) shows stale lines in each case.  Counted, never timed: a tick that changed two of
the rows on screen builds two lines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from probes.fleet_state import FleetRow, HostStatus
from themes import CSS_PATH, DEFAULT_THEME, THEMES, fallback_variables
from widgets.fleet_table import FleetLine, FleetTable

SIZE = (120, 16)
ROWS = 40


def line(i: int, power: float = 5600.0) -> FleetLine:
    return FleetLine(FleetRow(
        name=f"gpu{i:04d}", tags=("rack-00",), status=HostStatus.STREAMING, stale_s=None,
        gpus_ok=8, gpus_expected=8, max_temp_c=60.0 + i % 9, mem_used_pct=40.0 + i % 50,
        mean_util_pct=97.0, power_w=power, findings=i % 3, worst=None,
        worst_summary=f"GPU{i % 8} {'x' * (i % 11)}" if i % 3 else None, simulated=False))


def fleet(changed: dict[int, float] | None = None) -> tuple[FleetLine, ...]:
    return tuple(line(i, (changed or {}).get(i, 5600.0)) for i in range(ROWS))


class PlaceKeyedTable(FleetTable):
    """The negative control: a line kept by its place alone, and kept through a restyle."""

    def _line_key(self, y: int, x1: int, x2: int,
                  base_style: Style) -> tuple[tuple[object, ...], int, int] | None:
        found = super()._line_key(y, x1, x2, base_style)
        return None if found is None else ((found[1], found[2]), found[1], found[2])

    def forget_paint(self) -> None:
        self._rendered.clear()


class TableApp(App[None]):
    """The fleet table alone, with the app's stylesheet and themes."""

    CSS_PATH = CSS_PATH

    def __init__(self, table: type[FleetTable] = FleetTable) -> None:
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME
        self.table = table

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return fallback_variables()

    def compose(self) -> ComposeResult:
        yield self.table(id="fleet-table")


def rowless(strip: Any) -> list[Any]:
    """A line DataTable drew, as a line of this table carries it (session 14): the ``row``
    of its place taken off every style's meta (the mouse's row is worked out from the
    pointer, ``PaintedTable._forward_event``), the ``column`` kept, equal neighbours joined."""
    out = []
    for seg in strip:
        style = seg.style
        if style is not None and style._meta:
            meta = style.meta
            meta.pop("row", None)
            style = style.clear_meta_and_links()
            if meta:
                style += Style.from_meta(meta)
        out.append(Segment(seg.text, style, seg.control))
    return list(Segment.simplify(out))


def screen_of(app: App[Any]) -> list[list[tuple[str, Style | None]]]:
    """Every line as the compositor shows it now (kept lines included), meta left out."""
    strips = app.screen._compositor.render_strips()
    return [[(seg.text, seg.style) for seg in strip.discard_meta().simplify()]
            for strip in strips]


Change = Callable[[App[Any], FleetTable, Pilot[Any]], Awaitable[None]]


async def row_changes(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    table.hosts = fleet({2: 6123.0, 5: 4987.0})


async def width_changes(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    await pilot.resize_terminal(SIZE[0] + 14, SIZE[1])


async def cursor_moves(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    table.move_cursor(row=3)


async def rows_move(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    table.hosts = moved()


def moved() -> tuple[FleetLine, ...]:
    """A new order: the rows on screen change places among themselves (two rows down, in
    the same stripe, and one row down, in the other) and rows from below come up."""
    rows = fleet()
    return (*rows[2:6], *rows[:2], rows[7], rows[6], *rows[20:], *rows[8:20])


async def filtered_then_cleared(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    table.hosts = fleet()[::3]
    await pilot.pause()
    await pilot.pause()
    screen_of(app)
    table.hosts = fleet({2: 6123.0})


async def theme_changes(app: App[Any], table: FleetTable, pilot: Pilot[Any]) -> None:
    app.theme = next(t.name for t in THEMES if t.name != DEFAULT_THEME)


CHANGES: dict[str, tuple[Change, Callable[[App[Any], FleetTable], None]]] = {
    "row": (row_changes, lambda app, table: setattr(table, "hosts", fleet({2: 6123.0,
                                                                          5: 4987.0}))),
    "width": (width_changes, lambda app, table: None),
    "cursor": (cursor_moves, lambda app, table: table.move_cursor(row=3)),
    "sort": (rows_move, lambda app, table: setattr(table, "hosts", moved())),
    "filter": (filtered_then_cleared, lambda app, table: setattr(table, "hosts",
                                                                 fleet({2: 6123.0}))),
    "theme": (theme_changes, lambda app, table: setattr(
        app, "theme", next(t.name for t in THEMES if t.name != DEFAULT_THEME))),
}


async def changed_then_shown(table_type: type[FleetTable], change: Change,
                             size: tuple[int, int] = SIZE) -> list[list[Any]]:
    """The screen after the table was drawn, then changed and drawn again."""
    app = TableApp(table_type)
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        await pilot.pause()
        await pilot.pause()
        screen_of(app)  # every line drawn (and kept) before the change
        await change(app, table, pilot)
        await pilot.pause()
        await pilot.pause()
        return screen_of(app)


async def drawn_at_once(final: Callable[[App[Any], FleetTable], None],
                        size: tuple[int, int]) -> list[list[Any]]:
    """The screen of a table handed the final state before its first draw."""
    app = TableApp()
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        final(app, table)
        await pilot.pause()
        await pilot.pause()
        return screen_of(app)


@pytest.mark.parametrize("what", list(CHANGES))
async def test_a_changed_line_is_drawn_again(what: str) -> None:
    change, final = CHANGES[what]
    size = (SIZE[0] + 14, SIZE[1]) if what == "width" else SIZE
    expected = await drawn_at_once(final, size)
    assert await changed_then_shown(FleetTable, change) == expected
    # the negative control: kept by place alone, the old line stays on screen
    assert await changed_then_shown(PlaceKeyedTable, change) != expected


async def test_a_tick_builds_only_the_lines_of_the_rows_it_changed() -> None:
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        await pilot.pause()
        await pilot.pause()
        built = table.lines_built
        assert built >= SIZE[1] - 2  # every row on screen was drawn once
        table.hosts = fleet({2: 6123.0, 5: 4987.0, ROWS - 1: 5001.0})  # the last is off screen
        await pilot.pause()
        await pilot.pause()
        assert table.lines_built - built == 2
        table.hosts = fleet({2: 6123.0, 5: 4987.0, ROWS - 1: 5001.0})  # nothing new
        table.refresh()  # even a whole repaint takes every line as kept
        await pilot.pause()
        await pilot.pause()
        assert table.lines_built - built == 2


async def test_a_built_line_is_datatables_own() -> None:
    """``_build_line`` and ``_get_offsets`` give what DataTable's own steps give, for every
    line on screen, with the cursor and the hover on rows of both stripes and a crop."""
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = tuple(replace(h, row=replace(h.row, power_w=5000.0 + 7 * i))
                            for i, h in enumerate(fleet()))
        await pilot.pause()
        table.move_cursor(row=4)
        table.hover_coordinate = table.cursor_coordinate._replace(row=7)
        table._show_hover_cursor = True
        await pilot.pause()
        base = table.rich_style
        width = table.size.width
        compared = 0
        for y in range(table.size.height):
            assert table._get_offsets(y) == DataTable._get_offsets(table, y)
            key, row, line_no = table._line_key(y, 0, width, base) or (None, -1, 0)
            if key is None:
                continue
            for x1, x2 in ((0, width), (3, width - 5)):
                table.forget_paint()
                ours = table._build_line(row, line_no, x1, x2, base)
                table.forget_paint()
                theirs = DataTable._render_line(table, y, x1, x2, base)
                assert list(ours) == rowless(theirs), (y, x1)
                compared += 1
                if row in (4, 7):  # the cursor's and the hover's colours hide the stripe
                    continue
                # the negative control: a line built in the other stripe differs
                other = table._build_line(row, line_no, x1, x2, base)
                table._row_styles[(row % 2, base, table._pseudo_class_state)] = (
                    table._get_row_style(row + 1, base))
                table._runs.clear()
                table._rendered.clear()
                assert list(table._build_line(row, line_no, x1, x2, base)) != list(other)
        assert compared >= 2 * (SIZE[1] - 2)


async def test_a_cell_filled_from_a_template_is_datatables_own() -> None:
    """A plain cell (a power figure, a temperature, a status word) is drawn by filling the
    rendering of another cell of its length, class and column: the same segments, styles and
    meta that DataTable renders for it (``_render_cell``, DataTable's own paths, stamps the
    place's meta on the kept rendering).  Negative control: a template justified the other
    way gives other segments."""
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = tuple(FleetLine(replace(h.row, power_w=5000.0 + 7 * i,
                                              tags=(f"rack-{i % 7}",)))
                            for i, h in enumerate(fleet()))
        await pilot.pause()
        base = table.rich_style
        widths = [c.get_render_width(table) for c in table.ordered_columns]

        def cells_of(row: int, ours: bool) -> list[Any]:
            style = table._get_row_style(row, base)
            render = table._render_cell if ours else (
                lambda *a, **k: DataTable._render_cell(table, *a, **k))
            return [render(row, column, style, width, cursor=row == table.cursor_row)
                    for column, width in enumerate(widths)]

        table.forget_paint()
        cells_of(2, ours=True)  # the templates: row 2's cells
        filled = table.templates_filled
        for row in (4, 6, 8):
            assert cells_of(row, ours=True) == cells_of(row, ours=False), row
        assert table.templates_filled - filled >= 3 * 5  # numbers and words were filled
        # the negative control
        table.forget_paint()
        cells_of(2, ours=True)
        table._templates = {shape: None if t is None else (*t[:3], not t[3], *t[4:])
                            for shape, t in table._templates.items()}
        assert cells_of(4, ours=True) != cells_of(4, ours=False)


class PlaceKept(FleetTable):
    """The negative control: a line kept by its row's place too (as before session 14), so a
    row that moved is a line built anew."""

    def _line_key(self, y: int, x1: int, x2: int,
                  base_style: Style) -> tuple[tuple[object, ...], int, int] | None:
        found = super()._line_key(y, x1, x2, base_style)
        return None if found is None else ((found[1], *found[0]), found[1], found[2])


async def moved_lines(table_type: type[FleetTable]) -> tuple[list[Any], list[Any], int]:
    """Every line on screen after the rows moved, as the table's cache gives it and as
    DataTable draws it (its row's meta taken off); and the lines built for the move."""
    app = TableApp(table_type)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        table.move_cursor(row=3)
        await pilot.pause()
        await pilot.pause()
        screen_of(app)
        built = table.lines_built
        table.hosts = moved()
        await pilot.pause()
        await pilot.pause()
        screen_of(app)
        built = table.lines_built - built
        base, width = table.rich_style, table.size.width
        ours, theirs = [], []
        for y in range(1, table.size.height):
            for x1, x2 in ((0, width), (3, width - 5)):
                ours.append(list(table._render_line(y, x1, x2, base)))
                theirs.append(rowless(DataTable._render_line(table, y, x1, x2, base)))
        return ours, theirs, built


async def test_a_moved_line_is_kept_as_datatable_draws_it() -> None:
    """A sort or a filter moves rows: a line already drawn for a row of the same look (its
    cells, stripe, cursor) is taken as it was wherever the row lands, not built, and equals
    what DataTable draws there, segment by segment (its row's meta taken off: the mouse
    reads the place from the pointer).  Negative control: a line kept by its place too is
    built for each moved row."""
    ours, theirs, built = await moved_lines(FleetTable)
    assert ours == theirs
    # rows 0..5 moved within the screen and kept their stripe (less the two that the hover,
    # on row 0, left or reached); 6 and 7 swapped stripes
    _, _, built_by_place = await moved_lines(PlaceKept)
    assert built <= SIZE[1] - 1 - 4
    assert built_by_place >= built + 4


class OneByOne(FleetTable):
    """DataTable's own way: each row added by ``add_row``."""

    def _add_rows(self, rows: list[tuple[str, list[Any]]]) -> None:
        for key, cells in rows:
            self.add_row(*cells, key=key)


class AutoHeight(FleetTable):
    """The negative control: rows added as auto-height rows (height 0 until measured)."""

    def _add_rows(self, rows: list[tuple[str, list[Any]]]) -> None:
        for key, cells in rows:
            self.add_row(*cells, key=key, height=None)


async def table_after_a_filter(table_type: type[FleetTable]) -> list[Any]:
    """What DataTable holds after a filter hid two rows in three and was cleared: rows in
    order with their cells, heights, labels; the cursor and its highlighted row."""
    app = TableApp(table_type)
    highlighted: list[int] = []
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        app.on_data_table_row_highlighted = (  # type: ignore[attr-defined]
            lambda event: highlighted.append(event.cursor_row))
        table.hosts = fleet()
        table.move_cursor(row=6)
        await pilot.pause()
        table.hosts = fleet()[::3]
        await pilot.pause()
        table.hosts = fleet({2: 6123.0})
        await pilot.pause()
        await pilot.pause()
        keys = table._ordered_keys()
        return [[(k, [t.markup for t in table._data[RowKey(k)].values()],
                  table.rows[RowKey(k)].height, table.rows[RowKey(k)].label) for k in keys],
                table.cursor_coordinate, highlighted[:1], table.virtual_size]


async def test_rows_back_after_a_filter_are_as_datatable_adds_them() -> None:
    """Rows a cleared filter brings back are added at once (``_add_rows``), as DataTable's
    ``add_row`` one by one leaves them: same order, cells, heights, cursor, first highlight
    and size.  Negative control: rows added with another height differ."""
    ours = await table_after_a_filter(FleetTable)
    assert ours == await table_after_a_filter(OneByOne)
    assert len(ours[0]) == ROWS
    assert ours != await table_after_a_filter(AutoHeight)


async def test_a_line_joined_from_kept_runs_is_datatables_own() -> None:
    """A line joined from its cells' kept runs (``_joined_line``: the unchanged cells as
    they were, the changed power figure new) equals DataTable's own ``_render_line``
    segment by segment (its row's meta taken off), on every line on screen (cursor and
    hover rows of both stripes).  Negative control: runs kept for the other stripe differ."""
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        await pilot.pause()
        table.move_cursor(row=4)
        table.hover_coordinate = table.cursor_coordinate._replace(row=7)
        table._show_hover_cursor = True
        await pilot.pause()
        await pilot.pause()
        assert table._runs  # the screen's lines were joined from runs
        table.hosts = fleet({i: 6000.0 + 13 * i for i in range(0, ROWS, 2)})
        base = table.rich_style
        width = table.size.width
        compared = 0
        for y in range(table.size.height):
            key, row, line_no = table._line_key(y, 0, width, base) or (None, -1, 0)
            if key is None:
                continue
            assert table._joined_line(row, table._row_style(row, base), table.ordered_columns,
                                      [c.get_render_width(table) for c in
                                       table.ordered_columns], row == 4, row == 7)
            ours = table._build_line(row, line_no, 0, width, base)
            theirs = DataTable._render_line(table, y, 0, width, base)
            assert list(ours) == rowless(theirs), y
            assert ours.cell_length == theirs.cell_length == width
            compared += 1
        assert compared >= SIZE[1] - 2
        header = table.header_height if table.show_header else 0
        for row in range(SIZE[1], ROWS):  # rows never drawn: stamped for the first time
            ours = table._build_line(row, 0, 0, width, base)
            assert list(ours) == rowless(DataTable._render_line(table, row + header, 0,
                                                                  width, base)), row
        # the negative control: the power figure's runs of the other stripe used for this
        # one (runs are kept by the row's look, not its place)
        even, odd = table._row_style(10, base), table._row_style(11, base)
        looks = {look[0]: runs for look, runs in table._runs.items()
                 if look[1:] == (False, False, table._show_hover_cursor,
                                 table._pseudo_class_state)}
        looks[even].clear()
        looks[even].update(looks[odd])
        table.hosts = fleet()  # rows 8 and 10 show the same cells again
        wrong = table._build_line(10, 0, 0, width, base)
        right = DataTable._render_line(table, 10 + header, 0, width, base)
        assert list(wrong) != rowless(right)
