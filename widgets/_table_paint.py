"""How a keyed table paints: lines and cells cached by what they show, not by table version.

Textual's ``DataTable`` keys its line, row and cell caches on a counter that every write
bumps, and a write refreshes the whole widget: at 1024 hosts a 1 Hz tick that changed one
row re-rendered every line on screen (~0.5–1 ms each, 46 lines), and a re-sort re-rendered
every cell.  Here a data row's line is kept by what decides its look (its cells, stripe,
cursor and hover state, the columns' widths, crop, style and pseudo-classes), a cell by its
content, a plain cell is filled into the rendering of another of its shape (``_shape``)
rather than rendered by Rich, and a sync repaints only the lines whose look changed
(``refresh_rows``, ``refresh_changed``).

A data line carries no row: DataTable stamps every cell's style with its ``row`` and
``column`` for the mouse, so a row drawn at another place (a re-sort moves most rows each
tick under a numeric order) was a line to build and stamp again, and equal cells on two
rows were two renderings.  A cell keeps its ``column`` meta (the same on every row: it also
keeps the segments' boundaries, what a screenshot shows, as they were); the row is worked
out from the pointer when the event reaches the table (``_forward_event``), so DataTable's
click and hover handlers read the meta they read before.  The header, and any row not
described by ``Cell``s or not under a plain row cursor, go through ``DataTable`` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual._segment_tools import line_crop
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import Column, RowKey

Cell = tuple[str, str | None]
"""Display text and the component class (``cell--…``) that colours it, if any."""
RENDER_CACHE_CELLS = 16384
"""Rendered cells kept by content; a full fleet table with its zebra and cursor variants
fits, and the cache starts over beyond it."""
STAMPED_CACHE_CELLS = 8192
"""Styles stamped with a place's meta, for DataTable's own paths (``_render_cell``)."""
RUN_CACHE_CELLS = 16384
"""Cells' joined runs kept per row look (``_joined_line``); the look's runs start over
beyond it."""
LINE_CACHE_LINES = 4096
"""Rendered table lines kept by what they show (a screen of rows with their cursor and
zebra variants fits many times over); the cache starts over beyond it."""
PAINTED_LINES = 4096
"""Lines' records of what was painted on them (``_painted``) kept before starting over."""
_Lines = list[list[Segment]]
_Template = tuple[Style | None, Style | None, Style | None, bool, int, int]
"""A plain cell's styles (left padding, text, right padding), whether it is justified
right, its padding and the width of its text."""


class PaintedTable(DataTable[Text]):
    """A ``DataTable`` whose rows are also held as ``Cell`` tuples (``_cells``, by row key,
    one per entry of the subclass's columns, ``_column_at`` giving a column key's place),
    so that what a line shows can key its cache."""

    def __init__(self, **kwargs: object) -> None:
        # before DataTable's own: its reactives' watchers clear these caches
        self._rendered: dict[tuple[object, ...], _Lines] = {}
        """Rendered cells by what decides their look, not by row, without a place's meta:
        see ``_cell_lines``."""
        self._stamped: dict[tuple[object, ...], _Lines] = {}
        """The same, with the ``row``/``column`` meta of one place on the table, for
        DataTable's own paths (``_render_cell``)."""
        self._lines: dict[tuple[object, ...], Strip] = {}
        """Rendered lines by what they show, wherever they are: see ``_render_line``."""
        self._painted: dict[int, tuple[int, tuple[object, ...]]] = {}
        """What was last painted on each table line (by its line in the table, header
        included): the scroll it was painted at and its look's key (``_line_key``).  A sync
        that moved rows repaints the lines whose look is not that (``refresh_changed``)."""
        self._row_styles: dict[tuple[object, ...], Style] = {}
        self._rowless: dict[Style, Style] = {}
        """A style DataTable stamped with a place, less the place's row (``_rowless``)."""
        self._ends: dict[Style, Style] = {}
        """The style of a line's end past its last column, by its style (``_end_style``)."""
        self._stamps: dict[tuple[Style | None, int, int], Style] = {}
        """A cell's style with a place's meta added (``_stamp``)."""
        self._runs: dict[tuple[object, ...], dict[tuple[object, ...], list[Segment]]] = {}
        """A row look's cells (``_joined_line``), each as one run of joined segments, by
        its ``Cell``, column, width and column index."""
        self._templates: dict[tuple[object, ...], _Template | None] = {}
        """A plain cell's rendering by its shape (``_shape``), None where it has no form a
        template can fill."""
        self.templates_filled = 0
        """Cells rendered by filling a template (tests count them)."""
        self.lines_built = 0
        """Table lines rendered anew rather than taken from ``_lines`` (tests count them)."""
        self.lines_changed = 0
        """Lines a sync that moved rows found changed and repainted (``refresh_changed``)."""
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._column_at: dict[str, int] = {}
        self._shown_key: tuple[int, ...] | None = None
        self._ready = False
        """Columns exist: data set before mount waits for ``on_mount``."""
        self._looks: dict[object, tuple[object, ...]] = {}
        """What decided the look under each pseudo-class state the kept renderings were
        drawn in (``_check_look``)."""
        self._look_checked = False
        self._paint_style: Style | None = None
        """The table's ``rich_style`` while ``render_lines`` runs (``render_line``)."""
        self._paint_look: tuple[object, ...] | None = None
        """What decides every line's look alike, read once while ``render_lines`` runs
        (``_table_look``)."""
        self._paint_columns: tuple[list[Column], list[int]] | None = None
        """The columns in order and their widths, read once while ``render_lines`` runs
        (``_columns_now``)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]

    def forget_paint(self) -> None:
        """Drop every kept rendering (the columns, the theme or a style changed)."""
        self._rendered.clear()
        self._stamped.clear()
        self._lines.clear()
        self._painted.clear()
        self._row_styles.clear()
        self._runs.clear()
        self._stamps.clear()
        self._rowless.clear()
        self._ends.clear()
        self._templates.clear()
        self._looks.clear()

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self.forget_paint()

    def notify_style_update(self) -> None:
        """A style changed: the theme's, a class's, or only a pseudo-class's (the table
        focused or blurred: the filter line opened or closed, a screen left and back).

        Every kept rendering is keyed by the pseudo-classes and the base style it was drawn
        under, so a focus change need not drop them (that drop, and drawing every cell again
        through Rich, was most of ``/`` and ``escape``'s paint at 1024 hosts; issue 38).  The
        styles are checked at the next paint instead (``_check_look``: they are resolved
        after this call), and the renderings dropped only where the styles under these
        pseudo-classes are not those they were drawn with."""
        self._look_checked = False
        super().notify_style_update()

    def render_lines(self, crop: Region) -> list[Strip]:
        """DataTable's, after the look check a restyle asked for, with the base style read
        once for all the lines (``render_line``)."""
        if not self._look_checked:
            self._check_look()
        self._paint_style = self.rich_style
        self._paint_look = self._paint_columns = None
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None
            self._paint_look = self._paint_columns = None

    def _table_look(self) -> tuple[object, ...]:
        """What decides the look of every line alike (``_line_key``): the width, the
        cursor's and hover's places and kinds, the pseudo-classes, the columns shown and
        their widths.  Nothing of it changes while ``render_lines`` runs: read once a paint
        there (46 lines at a thousand busy hosts, each second), afresh elsewhere."""
        look = self._paint_look
        if look is None:
            look = (self.size.width, self.cursor_coordinate, self.hover_coordinate,
                    self._show_hover_cursor, self.show_cursor, self.cursor_type,
                    self._pseudo_class_state, self._shown_key,
                    tuple(c.content_width for c in self.columns.values()))
            if self._paint_style is not None:
                self._paint_look = look
        return look

    def _columns_now(self) -> tuple[list[Column], list[int]]:
        """``ordered_columns`` and each one's render width (``Column.get_render_width``),
        read once a paint like ``_table_look``."""
        found = self._paint_columns
        if found is None:
            columns = self.ordered_columns
            padding = 2 * self.cell_padding
            found = (columns, [padding + (column.content_width if column.auto_width
                                          else column.width) for column in columns])
            if self._paint_style is not None:
                self._paint_columns = found
        return found

    def render_line(self, y: int) -> Strip:
        """DataTable's ``render_line``, with the table's base style read once a paint
        (``render_lines``): ``rich_style`` walks every ancestor's styles, and DataTable
        read it for every line (46 a full repaint: a page, a sort, a filter, a tick)."""
        base_style = self._paint_style
        if base_style is None or self.fixed_rows:
            return super().render_line(y)
        width, _height = self.size
        scroll_x, scroll_y = self.scroll_offset
        fixed_rows_height = self.get_row_height(self._header_row_key) if self.show_header else 0
        if y >= fixed_rows_height:
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + width, base_style)

    def _check_look(self) -> None:
        """Drop the kept renderings if what decides the look under the present
        pseudo-classes (the base style, the theme, every component class's styles) is not
        what it was when last seen under them."""
        self._look_checked = True
        state = self.get_pseudo_class_state()
        rich = self.get_component_rich_style
        look = (self.rich_style, self.app.theme,
                tuple((rich(name), rich(name, partial=True))
                      for name in sorted(self.COMPONENT_CLASSES)))
        seen = self._looks.get(state)
        if seen is not None and seen != look:
            self.forget_paint()
        self._looks[state] = look

    def _plain(self) -> bool:
        """Whether data lines are drawn here without a place's meta (``_build_line``): a
        row cursor, no fixed rows or columns, no row labels; else DataTable draws them."""
        return (self.cursor_type == "row" and not self.fixed_columns and not self.fixed_rows
                and not (self._labelled_row_exists and self.show_row_labels))

    def _cell_key(self, row_index: int, column_index: int, base_style: Style, width: int,
                  cursor: bool, hover: bool) -> tuple[object, ...] | None:
        """What decides a data cell's look (its ``Cell``, column, width, row style, cursor
        and hover state and the table's pseudo-classes), or None where the cell is not one
        of ``Cell``s (DataTable renders it)."""
        if row_index < 0 or column_index < 0 or not self._ready:
            return None
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        cells = self._cells.get(str(row_key.value)) if row_key is not None else None
        at = self._column_at.get(str(column_key.value)) if column_key is not None else None
        if cells is None or at is None or at >= len(cells):
            return None
        return (cells[at], at, base_style, width, cursor, hover, self._show_hover_cursor,
                self._pseudo_class_state)

    def _cell_lines(self, key: tuple[object, ...], row_index: int, column_index: int,
                    base_style: Style, width: int, cursor: bool, hover: bool) -> _Lines:
        """A data cell's rendering without its row's meta, kept by ``key`` (``_cell_key``):
        equal cells on other rows (``8/8``, ``streaming``, ``62 °C``) and rows that moved
        are not rendered again; a plain cell is filled into a template of its shape."""
        lines = self._rendered.get(key)
        if lines is None:
            lines = self._from_template(key, width)
        if lines is None:
            lines = self._drawn_rowless(row_index, column_index, base_style, width, cursor,
                                        hover)
            self._keep_template(key, width, lines)
            if len(self._rendered) >= RENDER_CACHE_CELLS:
                self._rendered.clear()
            self._rendered[key] = lines
        return lines

    def _drawn_rowless(self, row_index: int, column_index: int, base_style: Style,
                       width: int, cursor: bool, hover: bool) -> _Lines:
        """DataTable's own rendering of a cell, less its row's meta (``_rowless_style``)."""
        drawn = DataTable._render_cell(self, row_index, column_index, base_style, width,
                                       cursor, hover)
        return [[Segment(seg.text, self._rowless_style(seg.style), seg.control)
                 for seg in line] for line in drawn]

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> _Lines:
        """DataTable's cell render (its own paths: the header, a row that is not plain),
        cached by the cell's content instead of by table version, stamped with the
        ``row``/``column`` meta of its place as DataTable stamps it."""
        key = self._cell_key(row_index, column_index, base_style, width, cursor, hover)
        if key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor,
                                        hover)
        place = (*key, row_index, column_index)
        lines = self._stamped.get(place)
        if lines is not None:
            return lines
        lines = self._stamp(self._cell_lines(key, row_index, column_index, base_style, width,
                                             cursor, hover), row_index, column_index)
        if len(self._stamped) >= STAMPED_CACHE_CELLS:
            self._stamped.clear()
        self._stamped[place] = lines
        return lines

    def _get_offsets(self, y: int) -> tuple[RowKey, int]:
        """The row at line ``y`` and the line within it.

        Every row here is one line high (rows are added with the default height), so row
        ``i`` is line ``i`` below the header; DataTable builds a list of every row's offsets
        (and of the rows in order) once per write to find it: O(rows) per changed row.
        """
        if self.show_header:
            if y < self.header_height:
                return self._header_row_key, y
            y -= self.header_height
        row_key = self._row_locations.get_key(y) if y >= 0 else None
        if row_key is None:
            raise LookupError(f"Y coord {y!r} is greater than total height")
        return row_key, 0

    def _shape(self, key: tuple[object, ...], width: int) -> tuple[object, ...] | None:
        """What a cell's rendering depends on besides its characters, for a plain cell.

        A cell of single-width characters (no tab, newline, control or wide character, no
        space at either end) that fits its column renders as its padding, the text
        justified, and its padding, in styles that do not depend on the characters: cells
        of the same length, class and column (a power figure, a temperature) share one.
        """
        cell = key[0]
        assert isinstance(cell, tuple)
        text = cell[0]
        if (not text or text != text.strip() or len(text) > width - 2 * self.cell_padding
                or cell_len(text) != len(text)):
            return None
        return (len(text), cell[1], *key[1:])

    def _keep_template(self, key: tuple[object, ...], width: int, lines: _Lines) -> None:
        """Keep what DataTable rendered for a plain cell (its row's meta taken off) as
        the template of its shape, if it has the form a template fills: padding, the
        justified text, padding."""
        shape = self._shape(key, width)
        if shape is None or shape in self._templates:
            return
        text = str(key[0][0])  # type: ignore[index]
        pad, inner = self.cell_padding, width - 2 * self.cell_padding
        template: _Template | None = None
        if len(lines) == 1 and len(lines[0]) == 3 and all(s.control is None for s in lines[0]):
            left, middle, right = lines[0]
            if left.text == right.text == " " * pad and middle.text in (
                    text.rjust(inner), text.ljust(inner)):
                template = (left.style, middle.style, right.style,
                            middle.text == text.rjust(inner), pad, inner)
        if len(self._templates) >= RENDER_CACHE_CELLS:
            self._templates.clear()
        self._templates[shape] = template

    def _from_template(self, key: tuple[object, ...], width: int) -> _Lines | None:
        """A plain cell filled into the template of its shape (see ``_shape``), kept like a
        rendered one; None where there is no template (DataTable renders it)."""
        shape = self._shape(key, width)
        template = self._templates.get(shape) if shape is not None else None
        if template is None:
            return None
        left, middle, right, justify_right, pad, inner = template
        text = str(key[0][0])  # type: ignore[index]
        lines = [[Segment(" " * pad, left),
                  Segment(text.rjust(inner) if justify_right else text.ljust(inner), middle),
                  Segment(" " * pad, right)]]
        self.templates_filled += 1
        if len(self._rendered) >= RENDER_CACHE_CELLS:
            self._rendered.clear()
        self._rendered[key] = lines
        return lines

    def _stamp(self, lines: _Lines, row: int, column: int) -> _Lines:
        """``lines`` (no row meta) with the ``row``/``column`` meta of this place in every
        style, as DataTable stamps a cell it renders.

        Adding meta to a Rich style merges two marshalled dicts, and Rich keeps only the
        last 1,024 sums, so each sum is kept here by style and place.
        """
        stamps = self._stamps
        out: _Lines = []
        for line in lines:
            stamped_line = []
            for seg in line:
                style = stamps.get((seg.style, row, column))
                if style is None:
                    meta = Style.from_meta({"row": row, "column": column})
                    style = seg.style.clear_meta_and_links() + meta if seg.style else meta
                    if len(stamps) >= STAMPED_CACHE_CELLS:
                        stamps.clear()
                    stamps[(seg.style, row, column)] = style
                stamped_line.append(Segment(seg.text, style, seg.control))
            out.append(stamped_line)
        return out

    def _line_key(self, y: int, x1: int, x2: int,
                  base_style: Style) -> tuple[tuple[object, ...], int, int] | None:
        """What a data row's line looks like (with the row's index and line), or None
        where DataTable's own render must do.

        A row's line is its ``Cell``s drawn at the columns' widths, in its zebra stripe with
        its cursor and hover state, cropped to the scroll, in the table's style and
        pseudo-classes: the same wherever the row is (a plain line carries no row,
        ``_plain``).  A line DataTable draws carries its place's meta: its key is its row.
        """
        if not self._ready:
            return None
        try:
            row_key, line_no = self._get_offsets(y)
        except LookupError:
            return None
        if row_key is self._header_row_key:
            return None
        cells = self._cells.get(str(row_key.value))
        row = self._row_locations.get(row_key)
        if cells is None or row is None:
            return None
        look = self._table_look()
        cursor, hover = look[1], look[2]
        assert isinstance(cursor, Coordinate) and isinstance(hover, Coordinate)
        cursor_on: object = cursor.row == row
        hover_on: object = hover.row == row
        if look[5] != "row":  # a cell or column cursor: its column matters too
            cursor_on, hover_on = (cursor_on, cursor.column), (hover_on, hover.column)
            place: object = ("at", row)
        elif self._plain():
            place = row % 2 if self.zebra_stripes else 0
        else:
            place = ("at", row)
        key = (place, line_no, cells, x1, x2, base_style, cursor_on, hover_on, look[0],
               *look[3:])
        return key, row, line_no

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """DataTable's line render, cached by what the line shows (``_line_key``).

        A line whose key is unchanged is not rendered again, whatever else on the table
        changed and wherever the row now is; one that is, is built by ``_build_line``
        (DataTable's own steps for a row cursor, no fixed columns or labels) or else by
        DataTable.  What is painted on each line is noted (``_painted``).
        """
        found = self._line_key(y, x1, x2, base_style)
        if found is None:
            self._painted.pop(y, None)
            return super()._render_line(y, x1, x2, base_style)
        key, row, line_no = found
        strip = self._lines.get(key)
        if strip is None:
            if self._plain():
                strip = self._build_line(row, line_no, x1, x2, base_style)
            else:
                strip = super()._render_line(y, x1, x2, base_style)
            self.lines_built += 1
            if len(self._lines) >= LINE_CACHE_LINES:
                self._lines.clear()
            self._lines[key] = strip
        painted = self._painted
        if len(painted) >= PAINTED_LINES:
            painted.clear()
        painted[y] = (self.scroll_offset.y, key)
        return strip

    def _row_style(self, row: int, base_style: Style) -> Style:
        """``_get_row_style``, kept per stripe until a style changes (it resolves the
        component's CSS into a Rich style: a quarter of a line's render)."""
        key = (row % 2 if self.zebra_stripes else None, base_style, self._pseudo_class_state)
        style = self._row_styles.get(key)
        if style is None:
            style = self._row_styles[key] = self._get_row_style(row, base_style)
        return style

    def _build_line(self, row: int, line_no: int, x1: int, x2: int,
                    base_style: Style) -> Strip:
        """DataTable's ``_render_line`` and ``_render_line_in_row`` for a data row under a
        row cursor with no fixed rows or columns and no row labels, without the per-line
        work those do for other cases (the header's style, fixed styles, two passes over
        the columns) and without its row's meta (the mouse's row: ``_forward_event``).
        An uncropped line is joined from its cells' kept runs (``_runs``)."""
        width = self.size.width
        row_style = self._row_style(row, base_style)
        cursor_on = row == self.cursor_coordinate.row
        hover_on = row == self.hover_coordinate.row
        columns, widths = self._columns_now()
        remaining = max(0, width - (sum(widths) + self._row_label_column_width))
        extend_style, _ = self._get_styles_to_render_cell(
            False, False, False, hover_on, cursor_on, self.show_cursor,
            self._show_hover_cursor, False, False)
        end = Segment(" " * remaining, self._end_style(row_style + extend_style))
        total = remaining + sum(widths)
        if line_no == 0 and ((x1 == 0 and x2 >= width and total == width)
                             or (x1 >= 0 and x2 - x1 == width and total >= x2)):
            # the whole line, or ``width`` cells of a table wider than the screen (at 160
            # columns the fleet's are 166: every line took the path below; issue 38, keys)
            joined = self._joined_line(row, row_style, columns, widths, cursor_on, hover_on)
            if joined is not None:
                return Strip(line_crop(_join(joined, [end]), x1, x2, total), width)
        cells = []
        for index, cell_width in enumerate(widths):
            key = self._cell_key(row, index, row_style, cell_width, cursor_on, hover_on)
            lines = (self._cell_lines(key, row, index, row_style, cell_width, cursor_on,
                                      hover_on) if key is not None else
                     self._drawn_rowless(row, index, row_style, cell_width, cursor_on,
                                         hover_on))
            cells.append(lines[line_no])
        cells.append([end])
        segments = line_crop(list(chain.from_iterable(cells)), x1, x2, width)
        return Strip(segments).adjust_cell_length(width, base_style).simplify()

    def _joined_line(self, row: int, row_style: Style, columns: list[Column],
                     widths: list[int], cursor_on: bool,
                     hover_on: bool) -> list[Segment] | None:
        """A row's cells as one run of segments, equal neighbours joined (what
        ``Segment.simplify`` makes of them), each cell's run kept by its content, width and
        column for the row's look (``_runs``: its stripe, cursor and hover, not its place):
        a line whose power figure changed joins its other cells' runs as they were, and
        equal cells on other rows share theirs.  None where the row is not one of
        ``Cell``s."""
        row_key = self._row_locations.get_key(row)
        cells = self._cells.get(str(row_key.value)) if row_key is not None else None
        if cells is None:
            return None
        look = (row_style, cursor_on, hover_on, self._show_hover_cursor,
                self._pseudo_class_state)
        runs = self._runs.get(look)
        if runs is None or len(runs) >= RUN_CACHE_CELLS:
            if len(self._runs) >= LINE_CACHE_LINES:
                self._runs.clear()
            runs = self._runs[look] = {}
        column_at = self._column_at
        out: list[Segment] = []
        for index, column in enumerate(columns):
            at = column_at.get(str(column.key.value))
            if at is None or at >= len(cells):
                return None
            key = (cells[at], at, widths[index], index)
            run = runs.get(key)
            if run is None:
                cell_key = (cells[at], at, row_style, widths[index], cursor_on, hover_on,
                            self._show_hover_cursor, self._pseudo_class_state)
                lines = self._cell_lines(cell_key, row, index, row_style, widths[index],
                                         cursor_on, hover_on)
                run = runs[key] = list(Segment.simplify(lines[0]))
            _join(out, run)
        return out

    def _rowless_style(self, style: Style | None) -> Style | None:
        """``style`` as DataTable stamped it for a place, less the place's row: its
        ``column`` (and ``out_of_bounds``) kept.  Kept (Rich keeps only 1,024 sums)."""
        if style is None or not style._meta or style._link:
            return style
        found = self._rowless.get(style)
        if found is None:
            meta = style.meta
            found = style
            if "row" in meta and set(meta) <= {"row", "column", "out_of_bounds"}:
                del meta["row"]
                found = style.clear_meta_and_links() + Style.from_meta(meta)
            if len(self._rowless) >= STAMPED_CACHE_CELLS:
                self._rowless.clear()
            self._rowless[style] = found
        return found

    def _end_style(self, style: Style) -> Style:
        """The style of a line's end past its last column: ``style`` with the meta
        DataTable gives it less the row (``column`` 0, ``out_of_bounds``), kept."""
        end = self._ends.get(style)
        if end is None:
            if len(self._ends) >= STAMPED_CACHE_CELLS:
                self._ends.clear()
            end = self._ends[style] = style + Style.from_meta({"column": 0,
                                                               "out_of_bounds": True})
        return end

    def _forward_event(self, event: events.Event) -> None:
        """Give a mouse event over a data line the row DataTable would have stamped under
        the pointer, beside the ``column`` the line carries, so that its click and hover
        handlers read what they read before: a plain line carries no row
        (``_build_line``).  Done here, where the screen hands the event over just after
        reading the style under the pointer, as DataTable's meta was read."""
        if isinstance(event, events.MouseEvent) and event.style._meta:
            meta = event.style.meta
            if "column" in meta and "row" not in meta:
                row = self._row_at(event)
                if row is not None:
                    event.style = event.style + Style.from_meta({"row": row})
        super()._forward_event(event)

    def _row_at(self, event: events.MouseEvent) -> int | None:
        """The row of the data line under the pointer, in the present order and scroll;
        None off a data line drawn here (``_line_key``)."""
        if not self._ready or not self._plain():
            return None
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        header = self.get_row_height(self._header_row_key) if self.show_header else 0
        y = offset.y + self.scroll_offset.y if offset.y >= header else offset.y
        try:
            row_key, _line_no = self._get_offsets(y)
        except LookupError:
            return None
        if row_key is self._header_row_key or str(row_key.value) not in self._cells:
            return None
        return self._row_locations.get(row_key)

    def refresh_rows(self, keys: set[str]) -> None:
        """Repaint the lines of these rows that are on screen, and only those.

        Neighbouring lines go as one region (the same cells of the screen): in a busy
        fleet every line on screen changes each second, and a refresh per line was ~30 µs
        each, with as many dirty regions for the compositor to cut."""
        ordered = self._row_locations

        def wanted(index: int) -> bool:
            row_key = ordered.get_key(index)
            return row_key is not None and str(row_key.value) in keys

        self._refresh_runs(wanted)

    def refresh_changed(self) -> None:
        """Repaint the lines on screen whose look is not what was painted on them
        (``_painted``): after rows moved, a row that looks as the one painted there (the
        same cells in the same stripe, cursor and hover) keeps its line.

        The header is repainted too, as the whole widget was: DataTable repaints only the
        hovered cell of a header under the pointer (``refresh_row(-1)`` does nothing), and
        the repaint a move brought drew the rest of its hover.  One line, kept by DataTable
        while nothing changed."""
        header = self.header_height if self.show_header else 0
        scroll_x, scroll_y = self.scroll_offset
        x2 = scroll_x + self.size.width
        if header:
            self.refresh(Region(0, 0, max(self.size.width, 1), header))
        painted = self._paint_look, self._paint_columns, self._paint_style
        self._paint_style = base = self.rich_style  # the look read once for every line
        self._paint_look = self._paint_columns = None
        try:
            def changed(index: int) -> bool:
                y = index + header
                found = self._line_key(y, scroll_x, x2, base)
                if found is None or self._painted.get(y) != (scroll_y, found[0]):
                    self.lines_changed += 1
                    return True
                return False

            self._refresh_runs(changed)
        finally:
            self._paint_look, self._paint_columns, self._paint_style = painted

    def _refresh_runs(self, wanted: Callable[[int], bool]) -> None:
        """Refresh the rows on screen (and one either side) that ``wanted`` picks,
        neighbours as one region.  A line off the window was not refreshed by DataTable's
        own per-line refresh either (``_refresh_region``)."""
        top = int(self.scroll_y)
        header = self.header_height if self.show_header else 0
        width = max(self.size.width, 1)
        window = self.window_region
        lo = max(0, top - 1, window.y - header)
        hi = min(len(self._row_locations), top + self.size.height + 1, window.bottom - header)
        start = -1
        for index in range(lo, hi):
            if wanted(index):
                if start < 0:
                    start = index
            elif start >= 0:
                self._refresh_region(Region(0, start + header, width, index - start))
                start = -1
        if start >= 0:
            self._refresh_region(Region(0, start + header, width, hi - start))


def _join(head: list[Segment], tail: list[Segment]) -> list[Segment]:
    """``tail`` added to ``head`` (in place), the segments where they meet joined as
    ``Segment.simplify`` joins them (same style, no control): both are already simplified
    and no run here starts with a control."""
    if head and tail:
        last, first = head[-1], tail[0]
        if last.style == first.style and not first.control:
            head[-1] = Segment(last.text + first.text, last.style)
            head.extend(tail[1:])
            return head
    head.extend(tail)
    return head
