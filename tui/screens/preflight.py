"""Preflight in the console: every host against the rules of thumb, and the odd one out.

The checks read what the live sessions already hold (each host's hello, newest sample and
findings: a GPU lost since the start fails, a GPU in thermal slowdown fails), so opening
this screen costs no extra connection.  They are recomputed at most every few
seconds: facts change rarely, and 1000 topology matrices per tick would be waste.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from probes.analysis.limits import PreflightLimits
from probes.analysis.preflight import CheckResult
from probes.fleet_state import FleetState
from tui.screens.base import DataScreen, row_key_text
from tui.views.preflight_view import preflight_picture
from widgets.check_list import CheckList
from widgets.footer import KeysFooter
from widgets.preflight_table import PreflightTable

RECHECK_S = 5.0


class PreflightScreen(DataScreen):
    """Per-host verdicts, the selected host's checks, and the fleet's odd ones out."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, subtitle: str, limits: PreflightLimits | None = None) -> None:
        super().__init__(subtitle)
        self.limits = limits
        self._checked_at: float | None = None
        self._results: dict[str, list[CheckResult]] = {}
        self._selected: str | None = None

    def compose(self) -> ComposeResult:
        """Summary, then the host table beside the selected host's checks."""
        yield self.header()
        yield Static(id="preflight-summary")
        with Horizontal(id="preflight-body"):
            yield PreflightTable(id="preflight-table")
            with VerticalScroll(id="preflight-detail-scroll"):
                yield CheckList(id="preflight-checks")
        yield KeysFooter()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Re-run the checks when they are older than ``RECHECK_S``."""
        if self._checked_at is not None and now - self._checked_at < RECHECK_S:
            return
        self._checked_at = now
        picture = preflight_picture(fleet, self.limits)
        self._results = picture.results
        self.query_one("#preflight-summary", Static).update(picture.summary)
        self.query_one(PreflightTable).hosts = picture.lines
        if self._selected is None and self._results:
            self._selected = next(iter(self._results))
        self._show_selected()

    def _show_selected(self) -> None:
        checks = self._results.get(self._selected or "", [])
        self.query_one(CheckList).checks = tuple(checks)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor's host's checks are shown beside the table."""
        event.stop()
        if (key := row_key_text(event.row_key)) is not None:
            self._selected = key
            self._show_selected()
