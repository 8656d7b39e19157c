"""A fleet table wider than the screen joins its lines from kept runs too (issue 38, keys).

At 160 columns the fleet's columns are 166 cells wide, and every line was built cell by cell
(``_build_line``'s slow path: only a table that fits was joined from its cells' kept runs),
which was most of a key's paint.  Here, on a screen narrower than the table, each line on
screen, scrolled to the left edge, a few cells in and to the right edge, with the cursor and
hover rows of both stripes, equals DataTable's own ``_render_line`` segment by segment (the row's
meta taken off), and came from the joined path.  Negative control: a crop that keeps the cells past
the screen's right edge differs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import DataTable

from tests.widgets.test_table_paint import ROWS, TableApp, line, rowless
from widgets import _table_paint
from widgets.fleet_table import FleetLine, FleetTable

SIZE = (90, 16)


def fleet(changed: dict[int, float] | None = None) -> tuple[FleetLine, ...]:
    """``test_table_paint``'s lines, with findings that say more than the screen holds."""
    out = []
    for i in range(ROWS):
        kept = line(i, (changed or {}).get(i, 5600.0))
        words = f"GPU{i % 8} throttled: SM clock held at {900 + i} MHz by power brake " * 2
        out.append(FleetLine(replace(kept.row, worst_summary=words), kept.down_reason))
    return tuple(out)


async def _compare(crop_all: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """(lines compared, lines that differ, lines joined from runs)."""
    if crop_all:
        real = _table_paint.line_crop
        monkeypatch.setattr(_table_paint, "line_crop",
                            lambda segments, x1, x2, total: real(segments, x1, 10 ** 6, 10 ** 6))
    joined = [0]
    join = FleetTable._joined_line

    def counted(self: FleetTable, *args: object) -> object:
        out = join(self, *args)  # type: ignore[arg-type]
        joined[0] += out is not None
        return out

    monkeypatch.setattr(FleetTable, "_joined_line", counted)
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = fleet()
        await pilot.pause()
        table.move_cursor(row=4)
        table.hover_coordinate = table.cursor_coordinate._replace(row=7)
        table._show_hover_cursor = True
        await pilot.pause()
        table.hosts = fleet({i: 6000.0 + 13 * i for i in range(0, ROWS, 2)})
        base, width = table.rich_style, table.size.width
        total = sum(c.get_render_width(table) for c in table.ordered_columns)
        assert total > width  # the case: a table wider than the screen
        compared = differ = 0
        joined[0] = 0
        for x1 in (0, 3, total - width):
            x2 = x1 + width
            for y in range(table.size.height):
                found = table._line_key(y, x1, x2, base)
                if found is None:
                    continue
                _, row, line_no = found
                ours = table._build_line(row, line_no, x1, x2, base)
                theirs = DataTable._render_line(table, y, x1, x2, base)
                compared += 1
                differ += list(ours) != rowless(theirs) or ours.cell_length != width
    return compared, differ, joined[0]


async def test_a_wide_tables_joined_line_is_datatables_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compared, differ, joined = await _compare(False, monkeypatch)
    assert compared >= 3 * (SIZE[1] - 2) and differ == 0
    assert joined == compared  # every line came from the joined path


async def test_the_comparison_sees_cells_past_the_right_edge(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, differ, _ = await _compare(True, monkeypatch)
    assert differ > 0
