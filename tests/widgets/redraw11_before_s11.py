"""``PaintedTable.refresh_rows`` as it was before session 11 (branch issue38-redraw11): a
refresh per line.  ``test_table_refresh_runs`` compares the lines the new one marks with
these."""

from __future__ import annotations

from textual.geometry import Region

from widgets._table_paint import PaintedTable


def refresh_rows_before(self: PaintedTable, keys: set[str]) -> None:
    """Repaint the lines of these rows that are on screen, and only those."""
    top = int(self.scroll_y)
    header = self.header_height if self.show_header else 0
    width = self.size.width
    ordered = self._row_locations
    for index in range(max(0, top - 1), min(len(ordered), top + self.size.height + 1)):
        row_key = ordered.get_key(index)
        if row_key is not None and str(row_key.value) in keys:
            self._refresh_region(Region(0, index + header, max(width, 1), 1))
