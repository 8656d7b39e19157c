"""The fleet screen's redraw before session 12 (branch issue38-redraw12), for
``test_wall_focus_equivalent``: on the wall every host's row was brought up to date each
tick (``FleetRows.focus`` None) and every host's wall cells built afresh."""

from __future__ import annotations

from probes.fleet_state import FleetRow, FleetState
from tui.screens.fleet import FleetScreen
from tui.views.fleet_view import filter_rows, sort_rows
from tui.views.wall_view import wall_view
from widgets.fleet_table import FleetDetail, FleetTable
from widgets.fleet_wall import FleetWall


def fresh_rows_before(self: FleetScreen, now: float) -> list[FleetRow]:
    # the rows on screen get fresh numbers every tick; the others every few seconds
    # while the order or the filter reads them, else when they come on screen; the
    # wall shows every host
    rows = self.console.fleet_rows
    rows.focus = None if self.wall else self.query_one(FleetTable).visible_keys()
    self._set_reads()
    return rows.rows(now)


def draw_before(self: FleetScreen, fleet: FleetState, now: float) -> None:
    rows = sort_rows(filter_rows(self._rows, self.query_text, self._words), self.sort_key)
    if self.wall:
        empty = "no hosts match the filter" if self._rows else "no hosts yet"
        self.query_one(FleetWall).view = wall_view(fleet, self.metric, now, rows=rows,
                                                   empty=empty)
    else:
        table = self.query_one(FleetTable)
        table.hosts = tuple(self._lines_of(fleet, rows))
        self.query_one(FleetDetail).line = table.line_at_cursor()
    self.show_crumb(len(rows))


def wall_seen_before(self: FleetScreen, wall: FleetWall) -> None:
    """Before: nothing on the wall waited, so nothing was asked."""
