"""The fleet overview: one line per host; Enter opens the host."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Footer

from probes.fleet_state import FleetState
from tui.messages import HostChosen
from tui.screens.base import DataScreen
from widgets.fleet_table import FleetLine, FleetTable


class FleetScreen(DataScreen):
    """All hosts at a glance; the app's default screen."""

    def compose(self) -> ComposeResult:
        """Header, the fleet table, key hints."""
        yield self.header()
        yield FleetTable(id="fleet-table")
        yield Footer()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Replace the table's rows."""
        self.query_one(FleetTable).hosts = tuple(
            FleetLine(row, fleet.hosts[row.name].down_reason) for row in fleet.rows(now)
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a host opens it."""
        event.stop()
        if event.row_key.value is not None:
            self.post_message(HostChosen(event.row_key.value))
