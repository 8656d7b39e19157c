"""The fleet wall as it was before session 13 (branch issue38-strips13), for
``test_wall_strips_equivalent``: every new view dropped every kept strip and repainted the
whole widget; each host's cells were one segment a cell.  A verbatim copy of
``widgets/fleet_wall.py`` at main ``31f101a``; only this docstring is new."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.theme import Theme

from widgets._wall_layout import (
    HOST_GLYPH,
    RAMP,
    STYLE_NAMES,
    WallGpu,
    WallHost,
    WallLayout,
    WallView,
    build_layout,
    cell,
    legend_lines,
    mark,
    status_parts,
)

_P = "fleet-wall--"


GPU_KEYS = Binding.Group("GPU", compact=True)
HOST_KEYS = Binding.Group("host", compact=True)
"""The footer shows a pair of moves as one entry (``←→ GPU``, ``HL host``)."""


class FleetWall(ScrollView, can_focus=True):
    """The whole fleet as a wall of GPU cells, grouped by tag, with a cursor."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {_P + n for n in STYLE_NAMES}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "cursor_step(-1)", "Prev GPU", show=False, group=GPU_KEYS),
        Binding("right,l", "cursor_step(1)", "Next GPU", show=False, group=GPU_KEYS),
        Binding("up,k", "cursor_row(-1)", "Up", show=False),
        Binding("down,j", "cursor_row(1)", "Down", show=False),
        Binding("H,shift+left", "cursor_host(-1)", "Prev host", show=False, group=HOST_KEYS),
        Binding("L,shift+right", "cursor_host(1)", "Next host", show=False, group=HOST_KEYS),
        Binding("pageup", "cursor_page(-1)", "Page up", show=False),
        Binding("pagedown", "cursor_page(1)", "Page down", show=False),
        Binding("home", "cursor_home", "First", show=False),
        Binding("end", "cursor_end", "Last", show=False),
        Binding("enter", "select", "Open", show=False, tooltip="open the host under the cursor"),
    ]

    view: reactive[WallView] = reactive(WallView, init=False)
    """The hosts and the metric; set a new one each refresh (an equal one redraws nothing)."""

    class Shown(Message):
        """Other hosts came on screen (a scroll, a resize, a new packing): the screen
        draws again at once those whose rows waited off screen (``visible_hosts``)."""

    class HostSelected(Message):
        """Enter on the cursor, or a click on the cell already under it."""

        def __init__(self, host: str, gpu: int | None, *, wall: FleetWall | None = None) -> None:
            super().__init__()
            self.host = host
            self.gpu = gpu
            """The GPU index, or None when the host itself (its mark column) was chosen."""
            self.wall = wall

        @property
        def control(self) -> FleetWall | None:
            """The wall that posted it."""
            return self.wall

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._layout = build_layout(WallView(), 0)
        self._width = -1
        self._shown_width = 0
        """The content width the wall last had on screen (0: never shown): a hidden wall
        has no size, and the view handed to it as it is shown is packed at this width
        (``_pack_width``)."""
        self._cursor = -1
        """Index into ``_layout.hosts``; -1 with no hosts."""
        self._cursor_gpu: int | None = None
        self._cursor_name: str | None = None
        self._styles: dict[str, Style] = {}
        self._host_cells: dict[WallHost, list[Segment]] = {}
        self._strips: dict[int, Strip] = {}
        self._legend: list[Strip] | None = None
        self._status: Strip | None = None
        self._ready = False
        """Mounted: component styles resolve only then, so a view set earlier waits."""
        self.layout_builds = 0
        """How many times the layout was recomputed (tests check an equal view adds none)."""

    # ---- public state -------------------------------------------------------------------

    @property
    def wall_layout(self) -> WallLayout:
        """The current placement of hosts (for the screen and tests)."""
        return self._layout

    @property
    def cursor(self) -> tuple[str, int | None] | None:
        """The selected host's name and GPU (None: the host as a whole)."""
        if self._cursor < 0:
            return None
        return self._layout.hosts[self._cursor].name, self._cursor_gpu

    def move_cursor(self, host: str, gpu: int | None = None) -> None:
        """Put the cursor on ``host`` (and ``gpu``), scrolling it into view."""
        for i, h in enumerate(self._layout.hosts):
            if h.name == host:
                self._set_cursor(i, gpu)
                return

    def text_lines(self) -> list[str]:
        """Every line as plain text, header and footer included, ignoring scrolling."""
        width = self._content_width()
        out = ["".join(t for t, _ in line) for line in legend_lines(self.view.metric, width,
                                                   self.view.temp_margins,
                                                   self.view.mem_high_pct)]
        out += [self._grid_strip(r).text for r in range(self._grid_height())]
        out.append(self._status_strip().text)
        return out

    # ---- lifecycle ----------------------------------------------------------------------

    def on_mount(self) -> None:
        """Follow theme switches: every cached style and strip depends on the theme."""
        self.app.theme_changed_signal.subscribe(self, self._on_theme)
        self._ready = True
        self._relayout()

    def _on_theme(self, _theme: Theme) -> None:
        self.notify_style_update()

    def notify_style_update(self) -> None:
        """The stylesheet or theme changed: drop everything rendered with the old colours."""
        super().notify_style_update()
        self._styles.clear()
        self._host_cells.clear()
        self._drop_strips()
        self.refresh()

    def on_resize(self, _event: events.Resize) -> None:
        """Re-pack rows when the width changes; a height change only moves the footer."""
        if not self._ready:
            return
        width = self._content_width()
        if width <= 0:
            return  # hidden: packed again when shown (``_pack_width``)
        if width != self._width:
            self._relayout()
        else:
            self._status = None
            self._update_virtual_size()
        self.post_message(self.Shown())

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Scrolled: other grid rows, other hosts on screen (``Shown``)."""
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Shown())

    def watch_view(self, old: WallView, new: WallView) -> None:
        """Only called for an unequal view (Reactive compares): re-pack and redraw."""
        if old.metric != new.metric:
            self._host_cells.clear()
        if self._ready:
            self._relayout()

    # ---- layout and cursor --------------------------------------------------------------

    def _content_width(self) -> int:
        return self.scrollable_content_region.width

    def _pack_width(self) -> int:
        """The width to pack rows at: the wall's content width, or while it has none (hidden,
        or shown and not yet laid out) the width it had when last on screen.

        The view is handed over as the wall is shown (``w``), before the screen's layout
        gives it a size: packed at width 0 (one host a row, a scrollbar) it was packed again
        at each resize that layout brought, and at 256 hosts the screen was laid out three
        times in the key (issue 38, the wall's toggle).  Packed at the width it will have,
        the resize finds nothing to re-pack; a terminal resized meanwhile re-packs as any
        resize does."""
        width = self._content_width()
        if width > 0:
            self._shown_width = width
            return width
        return self._shown_width

    def _relayout(self) -> None:
        self._width = self._pack_width()
        old_slots = self._layout.slots
        old_index = self._cursor
        self._layout = build_layout(self.view, self._width)
        self.layout_builds += 1
        if self._layout.slots != old_slots:
            self._host_cells.clear()
        if len(self._host_cells) > 4 * len(self._layout.hosts) + 64:
            self._host_cells.clear()
        self._drop_strips()
        hosts = self._layout.hosts
        if not hosts:
            self._cursor, self._cursor_gpu, self._cursor_name = -1, None, None
        else:
            index = next((i for i, h in enumerate(hosts) if h.name == self._cursor_name),
                         min(max(old_index, 0), len(hosts) - 1))
            self._cursor = index
            self._cursor_gpu = self._clamp_gpu(index, self._cursor_gpu)
            self._cursor_name = hosts[index].name
        self._update_virtual_size()
        self.refresh()

    def _drop_strips(self) -> None:
        self._strips.clear()
        self._legend = None
        self._status = None

    def _header_height(self) -> int:
        return len(self._legend_strips())

    def _grid_height(self) -> int:
        return max(1, len(self._layout.rows))

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self._width, self._grid_height() + self._header_height() + 1)

    def _visible_rows(self) -> int:
        return max(1, self.size.height - self._header_height() - 1)

    def _clamp_gpu(self, index: int, gpu: int | None) -> int | None:
        n = len(self._layout.hosts[index].gpus)
        return None if gpu is None or n == 0 else min(gpu, n - 1)

    def _set_cursor(self, index: int, gpu: int | None) -> None:
        lay = self._layout
        if not lay.hosts:
            return
        index = min(max(index, 0), len(lay.hosts) - 1)
        gpu = self._clamp_gpu(index, gpu)
        if (index, gpu) == (self._cursor, self._cursor_gpu):
            return
        if self._cursor >= 0:
            self._strips.pop(lay.host_row[self._cursor], None)
        self._strips.pop(lay.host_row[index], None)
        self._cursor, self._cursor_gpu = index, gpu
        self._cursor_name = lay.hosts[index].name
        self._status = None
        self._scroll_to_row(lay.host_row[index])
        self.refresh()

    def _scroll_to_row(self, row: int) -> None:
        top = round(self.scroll_y)
        visible = self._visible_rows()
        label_above = row > 0 and self._layout.rows[row - 1].label is not None
        if row - label_above < top:
            self.scroll_to(y=row - label_above, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def action_cursor_step(self, delta: int) -> None:
        """One cell left or right, through each host's mark column and on into the next host."""
        if self._cursor < 0:
            return
        hosts = self._layout.hosts
        index, pos = self._cursor, -1 if self._cursor_gpu is None else self._cursor_gpu
        pos += delta
        if pos < -1:
            if index == 0:
                return
            index -= 1
            pos = len(hosts[index].gpus) - 1
        elif pos >= len(hosts[index].gpus):
            if index == len(hosts) - 1:
                return
            index, pos = index + 1, -1
        self._set_cursor(index, None if pos < 0 else pos)

    def action_cursor_host(self, delta: int) -> None:
        """Previous or next host, staying on the same GPU index."""
        if self._cursor >= 0:
            self._set_cursor(self._cursor + delta, self._cursor_gpu)

    def action_cursor_row(self, delta: int) -> None:
        """The host above or below in the grid, skipping group labels."""
        if self._cursor < 0:
            return
        lay = self._layout
        row = lay.host_row[self._cursor]
        col = self._cursor - lay.rows[row].start
        target = row + delta
        while 0 <= target < len(lay.rows) and lay.rows[target].label is not None:
            target += delta
        if not 0 <= target < len(lay.rows):
            return
        r = lay.rows[target]
        self._set_cursor(min(r.start + col, r.stop - 1), self._cursor_gpu)

    def action_cursor_page(self, delta: int) -> None:
        """A screenful of rows up or down."""
        for _ in range(self._visible_rows()):
            self.action_cursor_row(delta)

    def action_cursor_home(self) -> None:
        """The first host."""
        self._set_cursor(0, self._cursor_gpu)

    def action_cursor_end(self) -> None:
        """The last host."""
        self._set_cursor(len(self._layout.hosts) - 1, self._cursor_gpu)

    def action_select(self) -> None:
        """Tell the screen which host (and GPU) the operator wants to open."""
        if self._cursor >= 0:
            host = self._layout.hosts[self._cursor].name
            self.post_message(self.HostSelected(host, self._cursor_gpu, wall=self))

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor; a click on the cell already selected opens it."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        header = self._header_height()
        if not header <= offset.y < self.size.height - 1:
            return
        hit = self._layout.host_at(round(self.scroll_y) + offset.y - header, offset.x)
        if hit is None:
            return
        if hit == (self._cursor, self._cursor_gpu):
            self.action_select()
        else:
            self._set_cursor(*hit)

    # ---- rendering ----------------------------------------------------------------------

    def _style(self, name: str) -> Style:
        """The rich style for a style name, resolved from the theme once per theme."""
        style = self._styles.get(name)
        if style is None:
            if name.startswith("level-"):
                low = self.get_component_rich_style(_P + "scale-low")
                lo = self.get_component_styles(_P + "scale-low").color
                hi = self.get_component_styles(_P + "scale-high").color
                step = int(name.removeprefix("level-")) / (len(RAMP) - 1)
                style = low + Style(color=lo.blend(hi, step).rich_color)
            else:
                style = self.get_component_rich_style(_P + name)
            self._styles[name] = style
        return style

    def _host_segments(self, index: int) -> list[Segment]:
        """A host's mark plus its slots; reused while the host's data is unchanged."""
        host = self._layout.hosts[index]
        on_cursor = index == self._cursor
        cached = None if on_cursor else self._host_cells.get(host)
        if cached is not None:
            return cached
        metric = self.view.metric
        glyph, name = mark(host)
        segs = [(glyph, name)]
        segs += [cell(metric, host.status, g) for g in host.gpus]
        if not host.gpus and host.status in HOST_GLYPH:
            segs += [cell(metric, host.status, WallGpu(None))] * self._layout.slots
        segs += [(" ", "blank")] * (self._layout.host_width - len(segs))
        if not on_cursor:
            out = [Segment(g, self._style(n)) for g, n in segs]
            self._host_cells[host] = out
            return out
        under = self._style("cursor-host")
        cursor_at = 0 if self._cursor_gpu is None else self._cursor_gpu + 1
        cursor = self._style("cursor")
        out = []
        for i, (g, n) in enumerate(segs):
            style = self._style(n)
            if i == cursor_at:
                style = style + Style(reverse=True) + cursor.without_color
            elif n != "blank":
                style = style + under.without_color
            out.append(Segment(g, style))
        return out

    def _grid_strip(self, row: int) -> Strip:
        strip = self._strips.get(row)
        if strip is not None:
            return strip
        lay, width = self._layout, self._width
        blank = self._style("blank")
        if not lay.rows:
            text = self.view.empty if row == 0 else ""
            strip = Strip([Segment(text, self._style("empty"))], len(text))
        elif row >= len(lay.rows):
            strip = Strip.blank(width, blank)
        elif (label := lay.rows[row].label) is not None:
            tag, _, counts = label.partition(" (")
            segs = [Segment(tag, self._style("label")), Segment(" (", self._style("legend"))]
            for i, part in enumerate(counts.rstrip(")").split(", ")):
                if i:
                    segs.append(Segment(", ", self._style("legend")))
                down = part.endswith((" down", " stale"))
                segs.append(Segment(part, self._style("label-down" if down else "legend")))
            segs.append(Segment(")", self._style("legend")))
            strip = Strip(segs)
        else:
            r = lay.rows[row]
            segs = []
            for i in range(r.start, r.stop):
                segs += self._host_segments(i)
            strip = Strip(segs, (r.stop - r.start) * lay.host_width)
        strip = strip.crop_extend(0, width, blank)
        self._strips[row] = strip
        return strip

    def _legend_strips(self) -> list[Strip]:
        if self._legend is None:
            width = max(1, self._width)
            blank = self._style("blank")
            self._legend = [
                Strip([Segment(t, self._style(n)) for t, n in line]).crop_extend(0, width, blank)
                for line in legend_lines(self.view.metric, width, self.view.temp_margins,
                                             self.view.mem_high_pct)]
        return self._legend

    def _status_strip(self) -> Strip:
        if self._status is None:
            host = self._layout.hosts[self._cursor] if self._cursor >= 0 else None
            position = f"host {self._cursor + 1}/{len(self._layout.hosts)}" if host else ""
            parts = status_parts(self.view.metric, host, self._cursor_gpu, position)
            line = self._style("status-line")
            segs = [Segment(t, line + self.get_component_rich_style(_P + n, partial=True))
                    for t, n in parts]
            self._status = Strip(segs).crop_extend(0, max(1, self._width), line)
        return self._status

    def render_line(self, y: int) -> Strip:
        """Legend at the top, status line at the bottom, the scrolled grid in between."""
        legend = self._legend_strips()
        height = self.size.height
        if y < len(legend):
            return legend[y]
        if y == height - 1:
            return self._status_strip()
        return self._grid_strip(round(self.scroll_y) + y - len(legend))


def visible_hosts(wall: FleetWall, margin: int = 1) -> frozenset[str] | None:
    """The hosts in ``wall``'s grid rows on screen now, ``margin`` rows either side, and the
    one under its cursor (the status line describes it); None while the wall has no size
    or no hosts (then every host counts as seen).

    The screen's rows are brought up to date for these each tick, the others when they
    come on screen: at 160x48 a thousand hosts' wall shows about half of them, and
    building every host's row each second was most of the wall's redraw (issue 38).  A
    function of the wall's layout, scroll and size, not a method: any wall of this layout
    answers (a test's reference copy of an older wall among them)."""
    lay = wall.wall_layout
    if not lay.hosts or wall.size.height <= 0 or wall.scrollable_content_region.width <= 0:
        return None
    top = round(wall.scroll_y)
    rows = lay.rows[max(0, top - margin):top + wall._visible_rows() + margin]
    hosts = lay.hosts
    names = {hosts[i].name for r in rows if r.label is None for i in range(r.start, r.stop)}
    cursor = wall.cursor
    if cursor is not None:
        names.add(cursor[0])
    return frozenset(names)
