"""The fleet table's cost of a pass grows with its rows, not with their square.

Textual's DataTable re-measures a cell's whole column whenever the cell's new value is
narrower than the column (``update_cell`` → ``_update_column_widths`` on idle): a pass in
which N hosts' reasons got shorter measured N × N cells, 16–20 s of CPU at 1024 hosts
(``../shared/reviews/2026-12-06/performance.md`` §1b), and ``remove_row`` renumbers every
remaining row for each row it removes, so a filter hiding most of a large fleet cost the
same.  Counted, never timed: each pass is run at N and at 2N rows in the same test, and
the work at 2N must stay near twice the work at N (a square makes it four times).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import textual.widgets._data_table as data_table
from textual._two_way_dict import TwoWayDict
from textual.app import App, ComposeResult

import widgets._styled_table as styled_table
from probes.fleet_state import FleetRow, HostStatus
from widgets.fleet_table import FleetLine, FleetTable

N = 100
LABEL = "Why / worst finding"


def line(i: int, why: str) -> FleetLine:
    return FleetLine(FleetRow(
        name=f"gpu{i:04d}", tags=("rack-00",), status=HostStatus.STREAMING, stale_s=None,
        gpus_ok=8, gpus_expected=8, max_temp_c=61.0, mem_used_pct=40.0, mean_util_pct=97.0,
        power_w=5600.0, findings=1, worst=None, worst_summary=why, simulated=False))


def long_reasons(n: int) -> tuple[FleetLine, ...]:
    return tuple(line(i, f"GPU{i % 8} XID 79 · fallen off the bus {'·' * (i % 7)}")
                 for i in range(n))


def short_reasons(n: int) -> tuple[FleetLine, ...]:
    """Every reason narrower than the column, and of many widths (as ``stale 42 s`` or a
    finding's numbers are), so each one is narrower than the widest seen so far."""
    return tuple(line(i, f"ok {'x' * (i % 23)}") for i in range(n))


class TableApp(App[None]):
    table_type: type[FleetTable] = FleetTable

    def compose(self) -> ComposeResult:
        yield self.table_type(id="fleet-table")


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch, owners: list[tuple[Any, str]]) -> Iterator[list[int]]:
    """Count calls of each ``(owner, name)`` while the block runs."""
    calls = [0]
    with monkeypatch.context() as patch:
        for owner, name in owners:
            plain: Callable[..., Any] | None = getattr(owner, name, None)
            if plain is None:
                continue

            def counting(*a: Any, _plain: Callable[..., Any] = plain, **k: Any) -> Any:
                calls[0] += 1
                return _plain(*a, **k)

            patch.setattr(owner, name, counting)
        yield calls


MEASURES = [(data_table, "measure"), (styled_table, "cell_width")]
"""Every cell width taken: DataTable's measure, and the table's own."""
RENUMBERING = [(TwoWayDict, "get"), (TwoWayDict, "get_key"), (TwoWayDict, "__setitem__")]
"""Every look-up or write of a row's (or column's) position."""


async def work_of_a_pass(n: int, before: Callable[[int], tuple[FleetLine, ...]],
                         after: Callable[[int], tuple[FleetLine, ...]],
                         monkeypatch: pytest.MonkeyPatch,
                         owners: list[tuple[Any, str]]) -> tuple[int, FleetTable]:
    """The calls counted while the table goes from ``before(n)`` to ``after(n)`` and has
    settled (its deferred work on idle included)."""
    app = TableApp()
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = before(n)
        await pilot.pause()
        await pilot.pause()
        assert table.row_count == n
        with counted(monkeypatch, owners) as calls:
            table.hosts = after(n)
            await pilot.pause()
            await pilot.pause()
        return calls[0], table


def worst_width(table: FleetTable) -> int:
    return table.columns[data_table.ColumnKey("worst")].content_width


async def test_narrower_reasons_are_measured_once_a_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at_n, table = await work_of_a_pass(N, long_reasons, short_reasons, monkeypatch, MEASURES)
    at_2n, _ = await work_of_a_pass(2 * N, long_reasons, short_reasons, monkeypatch, MEASURES)
    # at most a measure or two per row (here 101 and 201; main: 9,800 and 39,000)
    assert at_n <= 2 * N, at_n
    assert at_2n <= 2.5 * at_n + 10, (at_n, at_2n)
    # and the column fits its widest cell: "ok " and 22 x's, against the label's 19
    assert worst_width(table) == len("ok ") + 22


async def test_the_reason_column_fits_what_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wider when a wider reason comes, narrower when it goes (by filter or by change)."""
    _, table = await work_of_a_pass(N, short_reasons, long_reasons, monkeypatch, MEASURES)
    assert worst_width(table) == len(long_reasons(N)[6].row.worst_summary or "")
    app = TableApp()
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = (*short_reasons(3), line(3, "GPU3 XID 79 · fallen off the bus"))
        await pilot.pause()
        assert worst_width(table) == len("GPU3 XID 79 · fallen off the bus")
        table.hosts = short_reasons(3)  # the filter hides the wide one
        await pilot.pause()
        assert worst_width(table) == len(LABEL)
        header = "".join(seg.text for seg in table.render_line(0))
        assert header.rstrip().endswith(LABEL)


async def test_a_filter_hiding_most_rows_renumbers_them_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def few(n: int) -> tuple[FleetLine, ...]:
        return long_reasons(n)[::25]

    at_n, table = await work_of_a_pass(N, long_reasons, few, monkeypatch, RENUMBERING)
    at_2n, _ = await work_of_a_pass(2 * N, long_reasons, few, monkeypatch, RENUMBERING)
    # here 492 and 854 look-ups; main: 17,642 and 65,230 (each removal renumbered every row)
    assert at_2n <= 2.5 * at_n + 50, (at_n, at_2n)
    assert [str(k.value) for k in table.rows] == [f"gpu{i:04d}" for i in range(0, N, 25)]
    assert table.get_row_index("gpu0075") == 3
    assert table.get_cell("gpu0050", "host").plain == "gpu0050"


class NeverForgets(FleetTable):
    """The negative control: a cell's width counted when it comes, never when it goes."""

    def _keep_cells(self, key: str, cells: Any) -> None:
        if cells is None:
            self._cells.pop(key, None)
            return
        self._row_widths.pop(key, None)
        super()._keep_cells(key, cells)


async def widths_through_a_stream(table_type: type[FleetTable]) -> tuple[list[int], list[int]]:
    """The reason column's width after each pass of a random stream (reasons that grow and
    shrink, hosts that come and go, a theme change), counted, and as a pass over every
    row's cell sizes it (what ``_fit_auto_widths`` did before it counted)."""
    rng = random.Random(38)
    app = TableApp()
    app.table_type = table_type
    counted_widths: list[int] = []
    full_pass: list[int] = []
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.query_one(FleetTable)
        hosts = {i: f"GPU0 {'x' * rng.randrange(40)}" for i in range(60)}
        for step in range(40):
            for _ in range(rng.randrange(1, 12)):
                i = rng.randrange(80)
                if i in hosts and rng.random() < 0.3:
                    del hosts[i]
                else:
                    hosts[i] = f"GPU{i % 8} {'y' * rng.randrange(45 if step < 20 else 12)}"
            table.hosts = tuple(line(i, why) for i, why in sorted(hosts.items()))
            if step == 25:
                table._restyle(app.current_theme)
            await pilot.pause()
            column = table.columns[data_table.ColumnKey("worst")]
            counted_widths.append(column.content_width)
            full_pass.append(max(len(LABEL), max(
                (styled_table.cell_width(cells[-1][0]) for cells in table._cells.values()),
                default=0)))
    return counted_widths, full_pass


async def test_the_reason_column_is_as_wide_as_its_widest_cell_counted() -> None:
    """The auto-width column is sized from counted widths (no pass over every row per
    sync), and equals a pass over every row after every sync of a random stream.  Negative
    control: widths counted as they come and never as they go keep the column too wide
    once the widest reasons are gone."""
    ours, full = await widths_through_a_stream(FleetTable)
    assert ours == full
    assert len(set(full)) > 2  # the stream did widen and narrow the column
    ours, full = await widths_through_a_stream(NeverForgets)
    assert ours != full
