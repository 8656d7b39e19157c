"""A DataTable that syncs keyed rows in place and colours cells through component classes.

Rich ``Text`` cells cannot name theme variables, so a cell is described as
``(text, class)`` and resolved against a component class declared here and
styled in ``themes/rigwatch.tcss``.  On a theme change the cells are re-resolved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual.theme import Theme
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, Row, RowKey

from widgets._table_paint import Cell, PaintedTable

KeyedRow = tuple[str, tuple[Cell, ...]]

CELL_CLASSES = frozenset({
    "cell--muted", "cell--ok", "cell--connecting", "cell--stale", "cell--down",
    "cell--sev-critical", "cell--sev-warning", "cell--sev-info",
    "cell--hot", "cell--warm", "cell--mem-high", "cell--degraded", "cell--throttled",
    "cell--leaking", "cell--spinning", "cell--old",
})

TEXT_CACHE_CELLS = 16384
"""Cells' ``Text``s kept by content (a fleet's worth of distinct cells several times)."""
MISSING: Cell = ("–", "cell--muted")
"""How a value the host did not report is shown."""


def cell_width(text: str) -> int:
    """The cells ``text`` takes on one line: what DataTable's measure gives a no-wrap cell."""
    return max(map(cell_len, text.splitlines()), default=0)


@dataclass(frozen=True)
class ColumnSpec:
    """One column: key, header label, fixed width (None sizes to content), alignment."""

    key: str
    label: str
    width: int | None = None
    right: bool = False
    narrow: bool = True
    """Whether the column stays when the table is narrower than ``NARROW_BELOW``."""


class StyledTable(PaintedTable):
    """Base for tables whose rows are identified by a key and updated cell by cell.

    Subclasses set ``COLUMNS``, implement ``keyed_rows`` and call ``sync_rows`` from
    their reactive's watcher (Textual runs every class's ``on_mount``, so subclasses
    must not define their own).  Only cells whose text or class changed are
    written, a column without a fixed width is sized once a sync from the cells (a pass
    costs what its rows cost, not their square), and the cursor stays on the same key
    when rows come and go.  Below ``NARROW_BELOW`` cells the columns marked
    ``narrow=False`` are dropped, so an 80-column terminal still shows what matters most.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | CELL_CLASSES
    COLUMNS: ClassVar[tuple[ColumnSpec, ...]] = ()
    NARROW_BELOW: ClassVar[int] = 110
    WIDE: ClassVar[str | None] = None
    """A column whose cells should be read whole (the fleet's reason): below
    ``NARROW_BELOW`` the columns in ``GIVE_UP`` go, in that order, while it lacks the room
    its longest cell needs (up to ``WIDE_MAX``)."""
    GIVE_UP: ClassVar[tuple[str, ...]] = ()
    WIDE_MAX: ClassVar[int] = 48

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._shown: list[tuple[int, ColumnSpec]] = []
        self._width = 0
        """The table's width at the last resize (the app's before the first)."""
        self._column_at = {c.key: i for i, c in enumerate(self.COLUMNS)}
        self._auto = [i for i, c in enumerate(self.COLUMNS) if c.width is None]
        self._auto_widths: dict[int, Counter[int]] = {i: Counter() for i in self._auto}
        """How many of the rows' cells have each width, per auto-width column: the column's
        width is the largest, found without a pass over every row."""
        self._row_widths: dict[str, tuple[int, ...]] = {}
        """Each row's cells' widths in the auto-width columns, as counted."""
        self._texts: dict[tuple[Cell, bool], Text] = {}
        """The ``Text`` written for a cell, by its content and alignment (equal cells on
        many rows: ``8/8``, ``streaming``); dropped with the styles."""
        self.table_writes = 0
        """Syncs that changed a cell (tests count them)."""
        self._order: list[str] | None = None
        """The rows' keys in display order as the last ``_sync`` left them (None once
        anything else moved a row): a sync in the same order skips the passes that find
        rows gone, new or moved."""

    def on_mount(self) -> None:
        """Create the columns and follow theme changes."""
        self._ready = True
        self._width = self.app.size.width
        rows = self.keyed_rows()
        self._layout_columns(self._columns_for(self._width, rows), rows)
        self.app.theme_changed_signal.subscribe(self, self._restyle)

    def on_resize(self, event: events.Resize) -> None:
        """Drop or restore the optional columns when the width calls for it.

        The screen was repainted at the new size before this event came, with DataTable's
        header (cached by version, not width) still drawn to the old width: draw it again.
        """
        self._width = event.size.width
        rows = self.keyed_rows()
        shown = self._columns_for(self._width, rows)
        if shown != self._shown_key:
            self._layout_columns(shown, rows)
        else:
            self.refresh()

    def keyed_rows(self) -> list[KeyedRow]:
        """The rows the subclass's reactive data describes, as ``(key, cells)``."""
        raise NotImplementedError

    def _columns_for(self, width: int, rows: Sequence[KeyedRow]) -> tuple[int, ...]:
        """The columns shown at ``width``: all of them, or below ``NARROW_BELOW`` those
        marked ``narrow``, less what ``WIDE`` needs given up."""
        narrow = width < self.NARROW_BELOW
        shown = [i for i, c in enumerate(self.COLUMNS) if c.narrow or not narrow]
        wide = self._column_at.get(self.WIDE) if self.WIDE and narrow else None
        if wide is None:
            return tuple(shown)
        need = min(self.WIDE_MAX, max([len(self.COLUMNS[wide].label),
                                       *(len(cells[wide][0]) for _, cells in rows)]))
        for key in self.GIVE_UP:
            # every column has a cell of padding either side; two more for the scrollbar
            room = width - sum((self.COLUMNS[i].width or 0) + 2 for i in shown) - 2
            if room >= need:
                break
            shown = [i for i in shown if self.COLUMNS[i].key != key]
        return tuple(shown)

    def _layout_columns(self, shown: tuple[int, ...], rows: Sequence[KeyedRow]) -> None:
        cursor = self._cursor_key()
        self._shown_key = shown
        self._order = None
        self.forget_paint()
        self.clear(columns=True)
        self._forget_cells()
        self._shown = [(i, self.COLUMNS[i]) for i in shown]
        for _, col in self._shown:
            self.add_column(col.label, width=col.width, key=col.key)
        self._sync(rows, cursor)

    def _restyle(self, _theme: Theme) -> None:
        self.forget_paint()
        self._forget_cells()
        self._sync(self.keyed_rows(), self._cursor_key())

    def _write_cell(self, key: str, col: ColumnSpec, text: Text) -> None:
        """``update_cell`` without its refresh and without its re-measure.

        A tick changes thousands of cells of a large fleet and a refresh each cost more than
        the write (``_sync`` refreshes once).  DataTable re-measures a cell's whole column
        whenever the new value is narrower than the column, so one pass over N changed cells
        of an auto-width column cost N × N measures (16–20 s at 1024 rows); ``_sync`` sizes
        such columns itself, once a pass, from its own cells (``_fit_auto_widths``).
        """
        self._data[RowKey(key)][ColumnKey(col.key)] = text

    def _forget_cells(self) -> None:
        self._cells.clear()
        self._texts.clear()
        self._row_widths.clear()
        for counts in self._auto_widths.values():
            counts.clear()

    def _keep_cells(self, key: str, cells: tuple[Cell, ...] | None) -> None:
        """``_cells[key] = cells`` (None: the row went), counting the auto-width columns'
        cells' widths."""
        if cells is None:
            self._cells.pop(key, None)
        else:
            before = self._cells.get(key)
            self._cells[key] = cells
            if before is not None and key in self._row_widths and all(
                    before[i][0] == cells[i][0] for i in self._auto):
                return  # the auto-width columns' texts did not change: nor their widths
        if not self._auto:
            return
        old = self._row_widths.pop(key, None)
        if old is not None:
            for i, width in zip(self._auto, old, strict=True):
                counts = self._auto_widths[i]
                counts[width] -= 1
                if counts[width] <= 0:
                    del counts[width]
        if cells is not None:
            new = self._row_widths[key] = tuple(cell_width(cells[i][0]) for i in self._auto)
            for i, width in zip(self._auto, new, strict=True):
                self._auto_widths[i][width] += 1

    def _fit_auto_widths(self, rows: Sequence[KeyedRow]) -> None:
        """Size each auto-width column to its widest cell (or its label), from the widths
        counted as cells were kept (``_keep_cells``); done by ``_sync`` when a row came,
        went or changed such a cell."""
        widths = self._content_widths()
        for i, col in self._shown:
            column = self.columns.get(ColumnKey(col.key))
            if col.width is None and column is not None:
                column.content_width = max(cell_width(column.label.plain),
                                           max(self._auto_widths[i], default=0))
        if self._content_widths() != widths:
            self._require_update_dimensions = True  # the virtual width, on idle
            self._new_generation(widths)
            self.check_idle()

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """The virtual size only.  DataTable also measures every cell of every row added
        since the last idle (0.3 s at 1024 rows) for widths that ``_fit_auto_widths`` has
        set and a fixed column does not use; rows here are one line with no label."""
        super()._update_dimensions(())

    def _content_widths(self) -> list[int]:
        return [c.content_width for c in self.columns.values()]

    def _new_generation(self, before: list[int]) -> None:
        """DataTable caches rendered header cells and rows by an update counter, not by width:
        once a column's width changed, a header drawn before kept its old width beside the
        cells under it (a flaky snapshot under load)."""
        if self._content_widths() != before:
            self._update_count += 1
            self.refresh()

    def visible_keys(self, margin: int = 2) -> frozenset[str]:
        """The keys of the rows on screen now, and ``margin`` rows either side."""
        top = int(self.scroll_y)
        keys = self._order if self._order is not None else self._ordered_keys()
        return frozenset(keys[max(0, top - margin):top + self.size.height + margin])

    def _ordered_keys(self) -> list[str]:
        """The rows' keys in display order (``self.rows`` is in insertion order)."""
        locations = self._row_locations
        return [str(k.value) for i in range(len(locations))
                if (k := locations.get_key(i)) is not None]

    def _reorder(self, wanted: list[str]) -> None:
        """Put the existing rows in ``wanted`` order in place, without re-adding them.

        Clearing and re-adding a 1000-row table re-measures every cell (~0.3 s), and
        DataTable's ``sort`` sorts every row's cells by a key.  The rows' places are set
        as ``sort`` sets them, from the keys' wanted order.  Nothing is repainted here: the
        caller repaints the lines whose look changed (``refresh_changed``).
        """
        self._order = None
        row_key = {str(k.value): k for k in self.rows}
        self._row_locations = TwoWayDict({row_key[k]: i for i, k in enumerate(wanted)})
        self._update_count += 1

    def _add_rows(self, rows: list[tuple[str, list[Text]]]) -> None:
        """``add_row`` for many rows at once, at the bottom in this order: it sorts the
        columns twice, re-validates the cursor and asks for an idle pass for each row, so
        a filter cleared at a thousand hosts spent most of its time there.  Rows here are
        one line high, with no label, and their keys are new."""
        self._order = None
        columns = [column.key for column in self.ordered_columns]
        locations, data, table_rows = self._row_locations, self._data, self.rows
        for key, cells in rows:
            row_key = RowKey(key)
            locations[row_key] = len(locations)
            data[row_key] = dict(zip(columns, cells, strict=True))
            table_rows[row_key] = Row(row_key, 1, None, False)
            self._new_rows.add(row_key)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if len(table_rows) == len(rows) and self.columns and self.show_cursor \
                and self.cursor_type != "none":
            self._highlight_cursor()  # a cell to highlight where there was none
        self._update_count += 1
        self.check_idle()

    def _remove_rows(self, keys: list[str]) -> None:
        """``remove_row`` for many rows at once: it renumbers every remaining row for each
        row removed, so a filter that hides a thousand hosts cost a million steps."""
        self._order = None
        gone = {RowKey(key) for key in keys}
        locations = self._row_locations
        left = [k for i in range(len(locations))
                if (k := locations.get_key(i)) is not None and k not in gone]
        self._row_locations = TwoWayDict({k: i for i, k in enumerate(left)})
        for row_key in gone:  # no cell is queued for DataTable's re-measure (_write_cell)
            self._data.pop(row_key, None)
            self.rows.pop(row_key, None)
            self._new_rows.discard(row_key)
            self._keep_cells(str(row_key.value), None)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate  # both clamped to what is left
        self.hover_coordinate = self.hover_coordinate
        self._update_count += 1
        self.refresh(layout=True)
        self.check_idle()

    def _cursor_key(self) -> str | None:
        key = self._row_locations.get_key(self.cursor_row)
        return str(key.value) if key is not None else None

    def _text(self, cell: Cell, col: ColumnSpec) -> Text:
        """The cell as DataTable holds it (kept: a ``Text`` is only read once written)."""
        key = (cell, col.right)
        found = self._texts.get(key)
        if found is not None:
            return found
        text, cls = cell
        style = self.get_component_rich_style(cls, partial=True) if cls else ""
        found = Text(text, style=style, justify="right" if col.right else "left", no_wrap=True)
        if len(self._texts) >= TEXT_CACHE_CELLS:
            self._texts.clear()
        self._texts[key] = found
        return found

    def sync_rows(self, rows: Sequence[KeyedRow]) -> None:
        """Make the table show ``rows`` (in order), touching only what changed."""
        if not self._ready:
            return
        if self.WIDE is not None:  # a longer reason may want a column's room
            shown = self._columns_for(self._width, rows)
            if shown != self._shown_key:
                self._layout_columns(shown, rows)
                return
        self._sync(rows, self._cursor_key())

    def _sync(self, rows: Sequence[KeyedRow], cursor: str | None) -> None:
        wanted = [key for key, _ in rows]
        same = wanted == self._order  # the same rows in the same order: none gone or new
        resized = False  # a row came or went, or a cell of an auto-width column changed
        if same:
            present: set[str] | frozenset[str] = frozenset()
        else:
            current = [str(k.value) for k in self.rows]
            keep = set(wanted)
            gone = [key for key in current if key not in keep]
            if gone:
                self._remove_rows(gone)
                resized = True
            present = {key for key in current if key in keep}
        written: list[str] = []
        added: list[tuple[str, list[Text]]] = []
        for key, cells in rows:
            old = self._cells.get(key)
            if old is None and (same or key in present):
                old = ()  # on the table but forgotten (a restyle): rewrite every cell
            if old is None:
                added.append((key, [self._text(cells[i], col) for i, col in self._shown]))
                resized = True
            elif old is not cells and old != cells:
                for i, col in self._shown:
                    if not old or cells[i] != old[i]:
                        self._write_cell(key, col, self._text(cells[i], col))
                        resized = resized or col.width is None
                written.append(key)
            if old is not cells:
                self._keep_cells(key, cells)
        if added:
            self._add_rows(added)
        if resized:
            self._fit_auto_widths(rows)
        if written:
            # DataTable's caches (by version) are stale; of the screen, only the lines of
            # the rows written (after a reorder, the lines whose look changed)
            self._update_count += 1
            self.table_writes += 1
        moved = not same and self._ordered_keys() != wanted
        if moved:
            self._reorder(wanted)
        self._order = wanted
        if moved:
            # a line is kept wherever its row lands: of the screen, only the lines whose
            # look is not what was painted there (rows moved in a numeric order each tick)
            self.refresh_changed()
        elif written:
            self.refresh_rows(set(written))
        if cursor in self._cells:
            index = self.get_row_index(cursor)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)
