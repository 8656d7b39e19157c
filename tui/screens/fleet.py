"""The fleet overview: one line per host (or the wall of GPUs); Enter opens the host.

``s`` steps through sort orders and ``/`` filters; both are the screen's own state, applied
to the rows the fleet state gives, so the widgets stay render-only.  Under the table, the
selected host in full: why it is down, when it was last seen, when it is retried (``R``
retries now).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.widgets import DataTable, Input, Static

from probes.fleet_state import FleetRow, FleetState, HostStatus
from tui.messages import HostChosen, ViewRequested
from tui.screens.base import DataScreen, row_key_text, shown
from tui.views.fleet_view import SORT_KEYS, RowWords, crumb, filter_rows, sort_rows
from tui.views.wall_view import KeptHosts, wall_view
from widgets._wall_layout import METRICS
from widgets.fleet_table import FleetDetail, FleetLine, FleetTable, why_text
from widgets.fleet_wall import FleetWall
from widgets.fleet_wall import visible_hosts as wall_visible_hosts
from widgets.footer import KeysFooter

NUMBER_SORTS = frozenset({"temp", "mem", "util", "power", "job"})
"""Sort orders that read what an off-screen row may keep until it comes on screen (its
numbers, its jobs: ``FleetRows.numbers_read``); the others read names, status and
findings, which never wait."""
NUMBER_ONLY_SORTS = frozenset({"temp", "mem", "util", "power"})
"""Of those, the orders that read one number and nothing else that may wait
(``FleetRows.only_numbers_read``)."""
WALL_KEYS = frozenset({"cycle_metric", "select", "cursor_step(-1)", "cursor_step(1)",
                       "cursor_host(-1)", "cursor_host(1)"})
"""The wall's keys its footer lists (``?`` has them all)."""


class FleetScreen(DataScreen):
    """All hosts at a glance; the app's default screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "cycle_sort", "Sort",
                tooltip="next sort order (inventory, worst, temp, mem, util …)"),
        Binding("slash", "filter", "Filter", key_display="/",
                tooltip="filter hosts by words (!word excludes); Esc clears"),
        Binding("w", "toggle_wall", "Wall", tooltip="the wall: one cell per GPU (Esc leaves)"),
        Binding("m", "cycle_metric", "Metric", show=False,
                tooltip="the wall's colour: memory, temperature, utilisation, status"),
        Binding("R", "retry_host", "Retry",
                tooltip="connect to the selected host now, not at its next retry"),
    ]

    def footer_keys(self, bindings: dict[str, ActiveBinding]) -> dict[str, ActiveBinding]:
        """On the wall the footer lists the wall's keys (colour, GPU and host moves, open)
        and ``w`` goes back to the table; on the table, the table's."""
        if not self.wall:
            return bindings
        return {key: shown(b) if b.binding.action in WALL_KEYS
                else shown(b, "Table") if b.binding.action == "toggle_wall" else b
                for key, b in bindings.items()}

    def __init__(self, subtitle: str) -> None:
        super().__init__(subtitle)
        self.sort_key = "inventory"
        self.query_text = ""
        self.wall = False
        self.metric = "mem"
        self._fleet: FleetState | None = None
        self._now = 0.0
        self._crumb: str | None = None
        self._lines: dict[str, FleetLine] = {}
        """Each host's table line as last handed over (``_lines_of``)."""
        self._rows: list[FleetRow] = []
        """The rows of the last ``show``: a key re-sorts or re-filters this view, and the
        next tick brings the hosts' news (judging them again on a key press cost most of
        its latency at a thousand hosts)."""
        self._words = RowWords()
        """What the filter searches in each row, kept while the row is (``filter_rows``)."""
        self._wall_hosts: KeptHosts = {}
        """Each host's wall cells, kept while its row is the same object (``wall_view``)."""
        self._drawn_at: tuple[int, str | None] | None = None
        """Where the last redraw (``show_state``) left the cursor: row and host."""

    def compose(self) -> ComposeResult:
        """Header, the fleet table, the filter line (hidden until ``/``), key hints."""
        yield self.header()
        crumb_line = Static(id="fleet-crumb", markup=False)
        crumb_line.display = False  # until a filter or a sort order is set
        yield crumb_line
        yield FleetTable(id="fleet-table")
        yield FleetDetail(id="fleet-detail")
        wall = FleetWall(id="fleet-wall")
        wall.display = False
        yield wall
        yield Input(placeholder="filter: words that must all appear (!word excludes); "
                                "Esc clears", id="fleet-filter", classes="-hidden")
        yield KeysFooter()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Replace the table's rows, sorted and filtered as chosen."""
        self._fleet, self._now, self._rows = fleet, now, self._fresh_rows(now)
        self._draw(fleet, now)
        table = self.query_one(FleetTable)
        self._drawn_at = (table.cursor_row, table._cursor_key())

    def _reads_numbers(self) -> bool:
        """Whether the order or the filter reads hosts' numbers or moving verdicts."""
        return bool(self.query_text) or self.sort_key in NUMBER_SORTS

    def _set_reads(self) -> None:
        rows = self.console.fleet_rows
        rows.numbers_read = self._reads_numbers()
        rows.only_numbers_read = not self.query_text and self.sort_key in NUMBER_ONLY_SORTS

    def _fresh_rows(self, now: float) -> list[FleetRow]:
        # the rows on screen get fresh numbers every tick; the others every few seconds
        # while the order or the filter reads them, else when they come on screen; on the
        # wall the hosts in its grid rows on screen (its status, counts and labels read
        # only what never waits: status, findings, GPUs answering)
        rows = self.console.fleet_rows
        rows.focus = wall_visible_hosts(self.query_one(FleetWall)) if self.wall \
            else self.query_one(FleetTable).visible_keys()
        self._set_reads()
        return rows.rows(now)

    def _draw(self, fleet: FleetState, now: float) -> None:
        rows = sort_rows(filter_rows(self._rows, self.query_text, self._words), self.sort_key)
        if self.wall:
            empty = "no hosts match the filter" if self._rows else "no hosts yet"
            wall = self.query_one(FleetWall)
            wall.view = wall_view(fleet, self.metric, now, rows=rows, empty=empty,
                                  kept=self._wall_hosts)
            self._wall_seen(wall)
        else:
            table = self.query_one(FleetTable)
            table.hosts = tuple(self._lines_of(fleet, rows))
            self.query_one(FleetDetail).line = table.line_at_cursor()
        self.show_crumb(len(rows))

    def _lines_of(self, fleet: FleetState, rows: list[FleetRow]) -> list[FleetLine]:
        """The table's lines, each kept while its row and reason are: a tick where nothing
        changed hands the table an equal tuple (not drawn again), and one where a few rows
        changed is compared line by line by identity."""
        kept, hosts, out = self._lines, fleet.hosts, []
        for row in rows:
            reason = hosts[row.name].reach.down_reason
            line = kept.get(row.name)
            if line is None or line.row is not row or line.down_reason != reason:
                line = kept[row.name] = FleetLine(row, reason)
            out.append(line)
        return out

    def show_crumb(self, shown: int) -> None:
        """Say above the rows how they are chosen: the filter (always, while one is set),
        how many hosts it leaves, and "no hosts match" when it leaves none."""
        text = crumb(self.query_text, self.sort_key, shown, len(self._rows))
        line = self.query_one("#fleet-crumb", Static)
        line.display = text is not None
        line.set_class(bool(self.query_text) and not shown, "-none")
        if text is not None and text != self._crumb:
            line.update(text)
        self._crumb = text

    def _redraw(self) -> None:
        self._drawn_at = None  # a key's redraw: where it leaves the cursor is the key's
        if self._fleet is not None:
            # a numeric order or a filter that now reads numbers that waited off screen
            # sorts the kept rows; the ticks bring them fresh over one refresh period
            # (``FleetRows._due``), as they did the rows' numbers before
            self._set_reads()
            self._draw(self._fleet, self._now)

    def action_toggle_wall(self) -> None:
        """Switch between the table and the wall (one cell per GPU)."""
        self.wall = not self.wall
        table, wall = self.query_one(FleetTable), self.query_one(FleetWall)
        # ``display`` rather than a class: a class change re-matches the stylesheet for the
        # widget's subtree, where display only changes the layout.
        table.display = not self.wall
        self.query_one(FleetDetail).display = not self.wall
        wall.display = self.wall
        (wall if self.wall else table).focus()
        if self.wall:
            self._redraw()
        else:
            self._table_back()

    def _table_back(self) -> None:
        """The table shown again after the wall: the rows that will be on screen first.

        The wall's ticks gave every host a fresh row, so every kept cell of the table is
        stale and syncing them all (formatting and writing 1024 rows, 15-35 ms) was the
        biggest part of the key at a thousand hosts.  An off-screen row whose "why" text
        (the one auto-width column: it sizes the columns) is unchanged keeps its old line
        until the screen has been refreshed, when every row is drawn afresh as before: the
        screen after the key is the one a full sync draws.  Off screen is judged from the
        new order, a screen's height around the scroll position and around the cursor's
        new place."""
        self._drawn_at = None
        if self._fleet is None:
            return
        self._set_reads()
        table = self.query_one(FleetTable)
        # the screen's height: the table's own is 0 while hidden, and the terminal may have
        # been resized meanwhile; no table is taller than its screen
        height = self.size.height
        rows = sort_rows(filter_rows(self._rows, self.query_text, self._words), self.sort_key)
        fresh = self._lines_of(self._fleet, rows)
        held = {line.row.name: line for line in table.hosts}
        if height <= 0 or not held:
            self._draw(self._fleet, self._now)
            return
        at_cursor = table.line_at_cursor()
        cursor = at_cursor.row.name if at_cursor is not None else None
        at = next((i for i, line in enumerate(fresh) if line.row.name == cursor), 0)
        top = int(table.scroll_y)
        near = {*range(max(0, top - 2), top + height + 2),
                *range(max(0, at - height - 2), at + height + 2)}
        lines, kept = [], False
        for i, line in enumerate(fresh):
            old = held.get(line.row.name)
            if (i not in near and old is not None and old is not line
                    and why_text(old) == why_text(line)):
                line, kept = old, True
            lines.append(line)
        table.hosts = tuple(lines)
        self.query_one(FleetDetail).line = table.line_at_cursor()
        self.show_crumb(len(rows))
        if kept:
            self.call_after_refresh(self._table_caught_up)

    def _table_caught_up(self) -> None:
        """Every row of the table drawn afresh (after ``_table_back``), unless the wall is
        back meanwhile (its own redraw, and the next ``w``, draw the table anew)."""
        if not self.wall:
            self._redraw()

    def action_cycle_metric(self) -> None:
        """The wall's colour: memory %, temperature, utilisation, status."""
        self.metric = METRICS[(METRICS.index(self.metric) + 1) % len(METRICS)]
        if not self.wall:
            self.action_toggle_wall()
        self._redraw()
        self.notify(f"wall shows {self.metric}", timeout=2, markup=False)

    def _wall_seen(self, wall: FleetWall) -> None:
        """Hosts on the wall whose rows waited off screen (a scroll, a resize, a new
        packing, a filter) are drawn again at once, after the paint in hand, as the table's
        rows are (``_highlighted``); a row renumbered off screen likewise."""
        names = wall_visible_hosts(wall)
        if names is None:
            return
        rows = self.console.fleet_rows
        if rows.waiting_among(names) or rows.renumbered_among(names):
            self.call_after_refresh(self.post_message, ViewRequested())

    @on(FleetWall.Shown)
    def _wall_shown(self, event: FleetWall.Shown) -> None:
        event.stop()
        if self.wall:
            self._wall_seen(self.query_one(FleetWall))

    @on(FleetWall.HostSelected)
    def _wall_pick(self, event: FleetWall.HostSelected) -> None:
        event.stop()
        self.post_message(HostChosen(event.host))

    def action_cycle_sort(self) -> None:
        """Next sort order."""
        self.set_sort(SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)])

    def set_sort(self, key: str) -> None:
        """Sort by ``key`` (one of ``SORT_KEYS``)."""
        self.sort_key = key
        self._redraw()
        self.notify(f"sorted by {key}", timeout=2, markup=False)

    def set_filter(self, text: str) -> None:
        """Show only hosts matching ``text`` (empty: all)."""
        self.query_text = text.strip()
        box = self.query_one("#fleet-filter", Input)
        box.value = self.query_text
        self._redraw()

    def action_filter(self) -> None:
        """Open the filter line."""
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("-hidden")
        box.focus()

    @on(Input.Changed, "#fleet-filter")
    def _typed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self._redraw()

    @on(Input.Submitted, "#fleet-filter")
    def _done(self, _event: Input.Submitted) -> None:
        box = self.query_one("#fleet-filter", Input)
        if not box.value.strip():
            box.add_class("-hidden")
        self.query_one(FleetTable).focus()

    def key_escape(self) -> None:
        """Esc clears and closes the filter; otherwise it leaves the wall (as in k9s)."""
        box = self.query_one("#fleet-filter", Input)
        if box.has_focus or self.query_text:
            self.set_filter("")
            box.add_class("-hidden")
            (self.query_one(FleetWall) if self.wall else self.query_one(FleetTable)).focus()
        elif self.wall:
            self.action_toggle_wall()

    def selected_host(self) -> str | None:
        """The host under the table's or the wall's cursor."""
        if self.wall:
            cursor = self.query_one(FleetWall).cursor
            return cursor[0] if cursor is not None else None
        line = self.query_one(FleetTable).line_at_cursor()
        return line.row.name if line is not None else None

    def action_retry_host(self) -> None:
        """``R``: connect to the selected host now instead of waiting out its back-off."""
        host = self.selected_host()
        if host is None or self._fleet is None:
            return
        state = self._fleet.hosts.get(host)
        if state is None:
            return
        if self.console.replaying:
            self.notify("cannot retry in a replay: it plays what was recorded", markup=False)
        elif self.console.retry_host(host):
            self.notify(f"retrying {host} now", markup=False)
        elif state.status is HostStatus.STREAMING:
            self.notify(f"{host} is streaming: nothing to retry", markup=False)
        elif state.status is HostStatus.CONNECTING:
            self.notify(f"{host} is connecting now", markup=False)
        elif state.status is HostStatus.STALE:
            self.notify(f"{host}'s session is open but silent: it reconnects on its own when "
                        "the link gives up", markup=False)
        else:
            self.notify(f"cannot retry {host} now: its session is not waiting for a retry",
                        markup=False, severity="warning")

    @on(DataTable.RowHighlighted, "#fleet-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The detail line follows the cursor; rows that came on screen with numbers that
        waited off screen are drawn again soon, not at the next tick."""
        table = self.query_one(FleetTable)
        self.query_one(FleetDetail).line = table.line_at_cursor()
        rows = self.console.fleet_rows
        shown_keys = table.visible_keys() | {event.row_key.value or ""}
        drawn, self._drawn_at = self._drawn_at, None  # one highlight a redraw, at most
        if (event.cursor_row, event.row_key.value) == drawn:
            # the cursor following its host through a redraw's new order (a numeric order
            # in a busy fleet: every tick), not a key: the rows that came on screen are the
            # next tick's work, as the rows the redraw itself re-sorted are.  Asking for
            # another redraw here re-sorted again and asked again: 4 redraws a second at a
            # thousand hosts, each re-handing and repainting the table (issue 38)
            return
        if not self.wall and (rows.renumbered_among(shown_keys) if rows.numbers_read
                              else rows.waiting_among(shown_keys)):
            # after the key's own repaint: the redraw is the next tick's work, brought on
            self.call_after_refresh(self.post_message, ViewRequested())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a host opens it."""
        event.stop()
        if (key := row_key_text(event.row_key)) is not None:
            self.post_message(HostChosen(key))
