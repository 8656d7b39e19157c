"""A DataTable that syncs keyed rows in place and colours cells through component classes.

Rich ``Text`` cells cannot name theme variables, so a cell is described as
``(text, class)`` and resolved against a component class declared here and
styled in ``themes/rigwatch.tcss``.  On a theme change the cells are re-resolved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.theme import Theme
from textual.widgets import DataTable

Cell = tuple[str, str | None]
"""Display text and the component class (``cell--…``) that colours it, if any."""
KeyedRow = tuple[str, tuple[Cell, ...]]

CELL_CLASSES = frozenset({
    "cell--muted", "cell--ok", "cell--connecting", "cell--stale", "cell--down",
    "cell--sev-critical", "cell--sev-warning", "cell--sev-info",
    "cell--hot", "cell--warm", "cell--mem-high", "cell--degraded", "cell--throttled",
})

MISSING: Cell = ("–", "cell--muted")
"""How a value the host did not report is shown."""


@dataclass(frozen=True)
class ColumnSpec:
    """One column: key, header label, fixed width (None sizes to content), alignment."""

    key: str
    label: str
    width: int | None = None
    right: bool = False
    narrow: bool = True
    """Whether the column stays when the table is narrower than ``NARROW_BELOW``."""


class StyledTable(DataTable[Text]):
    """Base for tables whose rows are identified by a key and updated cell by cell.

    Subclasses set ``COLUMNS``, implement ``keyed_rows`` and call ``sync_rows`` from
    their reactive's watcher (Textual runs every class's ``on_mount``, so subclasses
    must not define their own).  Only cells whose text or class changed are
    written, and the cursor stays on the same key when rows come and go.  Below
    ``NARROW_BELOW`` cells the columns marked ``narrow=False`` are dropped, so an
    80-column terminal still shows what matters most.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | CELL_CLASSES
    COLUMNS: ClassVar[tuple[ColumnSpec, ...]] = ()
    NARROW_BELOW: ClassVar[int] = 110

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._shown: list[tuple[int, ColumnSpec]] = []
        self._narrow: bool | None = None
        self._ready = False
        """Columns exist: data set before mount waits for ``on_mount``."""

    def on_mount(self) -> None:
        """Create the columns and follow theme changes."""
        self._ready = True
        self._layout_columns(self.app.size.width < self.NARROW_BELOW)
        self.app.theme_changed_signal.subscribe(self, self._restyle)

    def on_resize(self, event: events.Resize) -> None:
        """Drop or restore the optional columns when the width crosses the limit."""
        narrow = event.size.width < self.NARROW_BELOW
        if narrow != self._narrow:
            self._layout_columns(narrow)

    def keyed_rows(self) -> list[KeyedRow]:
        """The rows the subclass's reactive data describes, as ``(key, cells)``."""
        raise NotImplementedError

    def _layout_columns(self, narrow: bool) -> None:
        cursor = self._cursor_key()
        self._narrow = narrow
        self.clear(columns=True)
        self._cells.clear()
        self._shown = [(i, c) for i, c in enumerate(self.COLUMNS) if c.narrow or not narrow]
        for _, col in self._shown:
            self.add_column(col.label, width=col.width, key=col.key)
        self._sync(self.keyed_rows(), cursor)

    def _restyle(self, _theme: Theme) -> None:
        self._cells.clear()
        self._sync(self.keyed_rows(), self._cursor_key(), rewrite=True)

    def _cursor_key(self) -> str | None:
        keys = list(self.rows)
        if 0 <= self.cursor_row < len(keys):
            return str(keys[self.cursor_row].value)
        return None

    def _text(self, cell: Cell, col: ColumnSpec) -> Text:
        text, cls = cell
        style = self.get_component_rich_style(cls, partial=True) if cls else ""
        return Text(text, style=style, justify="right" if col.right else "left", no_wrap=True)

    def sync_rows(self, rows: Sequence[KeyedRow]) -> None:
        """Make the table show ``rows`` (in order), touching only what changed."""
        if self._ready:
            self._sync(rows, self._cursor_key())

    def _sync(self, rows: Sequence[KeyedRow], cursor: str | None, rewrite: bool = False) -> None:
        wanted = [key for key, _ in rows]
        current = [str(k.value) for k in self.rows]
        if current != wanted[: len(current)]:
            self.clear()
            self._cells.clear()
            current = []
        present = set(current)
        for key, cells in rows:
            old = self._cells.get(key)
            if old is None and rewrite and key in present:
                old = ()  # on the table but to be restyled: rewrite every cell
            if old is None:
                self.add_row(*(self._text(cells[i], col) for i, col in self._shown), key=key)
            elif old != cells:
                for i, col in self._shown:
                    if not old or cells[i] != old[i]:
                        self.update_cell(key, col.key, self._text(cells[i], col),
                                         update_width=col.width is None)
            self._cells[key] = cells
        if cursor in self._cells:
            index = self.get_row_index(cursor)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)
