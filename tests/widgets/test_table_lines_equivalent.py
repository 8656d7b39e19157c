"""The fleet table keeps a line wherever its row lands, and every screen and click is as before.

Issue 38 (session 14): a table line carried its place's ``row``/``column`` meta in every
cell's style (DataTable's click and hover read it), so a re-sort (rows moving as numbers
change, every tick under a numeric order) built most lines on screen anew and repainted the
whole widget.  Now a data line carries no row (the mouse's row is worked out from the
pointer, ``PaintedTable._forward_event``), a line is kept by its look alone (cells, stripe,
cursor, hover, widths, crop) and a sync that moved rows repaints only the lines whose look
is not what was painted there (``PaintedTable.refresh_changed``).

Textual keeps every line it drew until a region over it is refreshed, so a line this code
forgets to mark stays stale on the terminal while every line the table would draw is right.
Checks after every step of random runs (ticks whose numbers re-sort the rows, hosts joining
and leaving, the sort changed, cursor keys, scrolls up, down and sideways, resizes across
the narrow layout, themes, the mouse moved over the table):

* the screen as the compositor shows it (kept lines included) equals the screen drawn
  afresh (every kept line and rendering dropped), segment by segment, styles and meta (the
  header's line left out while the pointer is over it: DataTable repaints only the hovered
  header cell, before as after);
* it equals the screen of the table before (``fleet_table_before_s14`` and its bases,
  verbatim copies) driven through the same steps, segment by segment with the row taken off
  the meta (a line of the table before carried it; the column is kept on both);
* a click at random places on the table (header, cells, past the last column, below the
  rows) lands where it landed before: the same cursor (row, column, host), the same hover,
  the same messages (header selected, row selected, row highlighted).

Negative controls: a table that forgets one line it found changed is caught by the first
two; a table whose mouse reads the row one line off is caught by the third.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest
from rich.segment import Segment
from textual.app import App
from textual.widget import Widget
from textual.widgets import DataTable

from probes.analysis.fleet_row import FleetRow, HostStatus
from probes.triage import Severity
from tests.widgets import fleet_table_before_s14 as before
from tests.widgets.test_table_paint import TableApp, rowless
from themes import THEMES
from widgets._table_paint import PaintedTable
from widgets.fleet_table import FleetLine, FleetTable

STEPS = 60
SIZES = [(120, 16), (100, 14), (150, 18), (76, 12)]
"""Wide enough for every column, narrow (columns given up), wider, and narrower than the
table's columns (scrolled sideways)."""
KEYS = ["down", "up", "pagedown", "pageup", "home", "end", "down", "down"]
ORDERS = ("inventory", "temp", "power", "findings")
DOWN = (HostStatus.DOWN, HostStatus.UNREACHABLE, HostStatus.AUTH_FAILED,
        HostStatus.HOST_KEY_REFUSED, HostStatus.AGENT_FAILED)
CACHES = ("_rendered", "_stamped", "_lines", "_painted", "_row_styles", "_rowless", "_ends",
          "_stamps", "_templates", "_looks", "_runs", "_moved", "_unstamped", "_bares",
          "_placeless_styles")


def _row(i: int, rng: random.Random) -> FleetRow:
    roll = rng.random()
    status = HostStatus.STREAMING
    reason = None
    if roll < 0.08:
        status = rng.choice(DOWN)
        reason = rng.choice(("connection refused", "no route to host: the rack switch is "
                             "down since the maintenance window", "timed out"))
    elif roll < 0.12:
        status = HostStatus.STALE
    elif roll < 0.14:
        status = HostStatus.CONNECTING
    findings = rng.choice((0, 0, 0, 1, 2, 5))
    worst = rng.choice((Severity.WARNING, Severity.CRITICAL, Severity.INFO)) if findings \
        else None
    summary = (f"GPU{i % 8} " + "throttled " * rng.randrange(0, 6)).strip() if findings \
        else None
    return FleetRow(
        name=f"node-{i:03d}", tags=(f"rack-{i % 4}",), status=status,
        stale_s=float(rng.randrange(10, 200)) if status is HostStatus.STALE else None,
        gpus_ok=rng.choice((8, 8, 8, 7)), gpus_expected=8,
        max_temp_c=float(rng.randrange(40, 90)), mem_used_pct=float(rng.randrange(0, 100)),
        mean_util_pct=float(rng.randrange(0, 100)), power_w=float(rng.randrange(800, 6000)),
        findings=findings, worst=worst, worst_summary=summary, simulated=False, reason=reason,
        last_seen_s=30.0 if reason else None)


def _ticked(row: FleetRow, rng: random.Random) -> FleetRow:
    """``row`` a second later: its numbers moved (the order with them), now and then its
    status or findings."""
    if rng.random() < 0.05:
        return _row(int(row.name[5:]), rng)
    return FleetRow(**{**row.__dict__,
                       "max_temp_c": float(rng.randrange(40, 90)),
                       "power_w": float(rng.randrange(800, 6000)),
                       "mem_used_pct": float(rng.randrange(0, 100))})


def _ordered(rows: dict[int, FleetRow], order: str) -> tuple[FleetLine, ...]:
    def key(i: int) -> Any:
        r = rows[i]
        if order == "temp":
            return (-(r.max_temp_c or 0.0), i)
        if order == "power":
            return (-(r.power_w or 0.0), i)
        if order == "findings":
            return (-r.findings, i)
        return i
    return tuple(FleetLine(rows[i], "session reason" if i % 7 == 0 else None)
                 for i in sorted(rows, key=key))


class ClickApp(TableApp):
    """The table alone; the messages its mouse and cursor post are noted."""

    def __init__(self, table: type[Any]) -> None:
        super().__init__(table)
        self.seen: list[tuple[str, str]] = []

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.seen.append(("header", str(event.column_key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.seen.append(("selected", str(event.row_key.value)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.seen.append(("highlighted", str(event.row_key.value)))


def _screen(app: App[Any]) -> list[list[tuple[str, Any, Any]]]:
    """Every line as the compositor shows it now (kept lines included), meta and all."""
    return [[(seg.text, seg.style, seg.control) for seg in strip]
            for strip in app.screen._compositor.render_strips()]


def _as_before(screen: list[list[tuple[str, Any, Any]]]) -> list[list[Segment]]:
    """A screen as both tables draw it: the row taken off the meta, neighbours joined."""
    return [rowless([Segment(*seg) for seg in line]) for line in screen]


def _fresh(app: App[Any], table: Any) -> list[list[tuple[str, Any, Any]]]:
    """The screen drawn afresh (every widget's kept lines and the table's renderings
    dropped), then all of it put back as it was: the next step starts from the table's
    own state."""
    kept = [(w._styles_cache, dict(w._styles_cache._cache), set(w._styles_cache._dirty_lines),
             w._styles_cache._width) for w in app.screen.walk_children(Widget, with_self=True)]
    own = {name: copy.copy(getattr(table, name)) for name in CACHES if hasattr(table, name)}
    if "_runs" in own:
        own["_runs"] = {look: dict(runs) for look, runs in own["_runs"].items()}
    for cache, *_ in kept:
        cache.clear()
    table.forget_paint()
    picture = _screen(app)
    for cache, lines, dirty, width in kept:
        cache._cache, cache._dirty_lines, cache._width = lines, dirty, width
    for name, value in own.items():
        setattr(table, name, value)
    return picture


def _unlike(shown: list[Any], fresh: list[Any], table: Any) -> bool:
    """Whether the screen as shown is not the screen drawn afresh.  The header's line is
    left out while the pointer is over it: DataTable repaints only the hovered header cell
    (``refresh_row(-1)`` does nothing) and the rest of the header's hover shows at the next
    repaint of the header, before this change as after (compared with the table before
    instead)."""
    if table.hover_coordinate.row < 0 and table._show_hover_cursor:
        shown, fresh = shown[1:], fresh[1:]
    return bool(shown != fresh)


async def drive(table_class: type[Any], seed: int, until_stale: bool = False
                ) -> tuple[list[Any], int, dict[str, int]]:
    """(each step's screen as both tables draw it and what its clicks did, steps whose
    screen was not what a fresh draw shows, counts)."""
    rng = random.Random(seed)
    rows = {i: _row(i, rng) for i in range(70)}
    spare = iter(range(70, 200))
    order = "temp"
    size = SIZES[0]
    app = ClickApp(table_class)
    shots: list[Any] = []
    stale = 0
    counts = {"moved": 0}
    async with app.run_test(size=size) as pilot:
        table = app.query_one(table_class)
        table.focus()
        table.hosts = _ordered(rows, order)
        await pilot.pause()
        await pilot.pause()
        for _ in range(STEPS):
            roll = rng.random()
            if roll < 0.4:  # a tick: a share of the hosts' numbers moved (the order too)
                share = rng.choice((0.05, 0.3, 1.0))
                for i in list(rows):
                    if rng.random() < share:
                        rows[i] = _ticked(rows[i], rng)
                counts["moved"] += 1
            elif roll < 0.47:  # hosts join or leave
                if rng.random() < 0.5:
                    for _ in range(rng.randrange(1, 4)):
                        i = next(spare)
                        rows[i] = _row(i, rng)
                else:
                    for _ in range(rng.randrange(1, 4)):
                        del rows[rng.choice(list(rows))]
            elif roll < 0.53:
                order = rng.choice([o for o in ORDERS if o != order])
            elif roll < 0.68:
                await pilot.press(rng.choice(KEYS))
            elif roll < 0.76:
                table.scroll_to(y=rng.randrange(0, 60), animate=False)
            elif roll < 0.8:
                table.scroll_to(x=rng.randrange(0, 40), animate=False)
            elif roll < 0.85:
                size = rng.choice([s for s in SIZES if s != size])
                await pilot.resize_terminal(*size)
            elif roll < 0.89:
                app.theme = rng.choice([t.name for t in THEMES if t.name != app.theme])
            else:  # the pointer over the table (the hover row)
                await pilot.hover(table_class, offset=(rng.randrange(0, size[0]),
                                                       rng.randrange(0, size[1])))
            table.hosts = _ordered(rows, order)
            await pilot.pause()
            await pilot.pause()
            shown = _screen(app)
            is_stale = isinstance(table, PaintedTable) and _unlike(shown, _fresh(app, table),
                                                                   table)
            stale += is_stale
            del app.seen[:]
            clicks = []
            for _ in range(2):  # a click somewhere on the table (sometimes twice: selected)
                at = (rng.randrange(0, size[0]), rng.randrange(0, size[1]))
                await pilot.click(table_class, offset=at, times=rng.choice((1, 1, 2)))
                await pilot.pause()
                clicks.append((at, table.cursor_coordinate, table._cursor_key(),
                               table.hover_coordinate, table._show_hover_cursor,
                               list(app.seen)))
                del app.seen[:]
            shots.append((_as_before(shown), clicks, int(table.scroll_y),
                          int(table.scroll_x)))
            if is_stale and until_stale:
                break
        counts["changed"] = getattr(table, "lines_changed", 0)
        counts["built"] = table.lines_built
    return shots, stale, counts


class ForgetfulTable(FleetTable):
    """Negative control: the first line a move found changed is not repainted."""

    forget = False

    def refresh_changed(self) -> None:
        self.forget = True
        try:
            super().refresh_changed()
        finally:
            self.forget = False

    def _refresh_runs(self, wanted: Callable[[int], bool]) -> None:
        if not self.forget:
            return super()._refresh_runs(wanted)
        skipped: list[int] = []

        def but_one(index: int) -> bool:
            if wanted(index):
                if skipped:
                    return True
                skipped.append(index)
            return False

        return super()._refresh_runs(but_one)


class RowOffByOne(FleetTable):
    """Negative control: the mouse's row read one line below the pointer."""

    def _row_at(self, event: Any) -> int | None:
        row = super()._row_at(event)
        return None if row is None else row + 1


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_screen_and_click_is_a_fresh_draw_and_the_table_before(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = [0]
    plain = PaintedTable.refresh_changed

    def counted(self: PaintedTable) -> None:
        runs = self._refresh_runs

        def looked_at(wanted: Callable[[int], bool]) -> None:
            def each(index: int) -> bool:
                checked[0] += 1
                return wanted(index)
            runs(each)

        self._refresh_runs = looked_at  # type: ignore[method-assign]
        try:
            plain(self)
        finally:
            del self._refresh_runs

    monkeypatch.setattr(PaintedTable, "refresh_changed", counted)
    new, stale, counts = await drive(FleetTable, seed)
    old, _, _ = await drive(before.FleetTable, seed)
    assert stale == 0
    screens = [i for i, (a, b) in enumerate(zip(new, old, strict=True)) if a[0] != b[0]]
    clicks = [(i, a[1], b[1]) for i, (a, b) in enumerate(zip(new, old, strict=True))
              if a[1:] != b[1:]]
    assert screens == [] and clicks == []
    # the run re-sorted the rows many times, and a move kept lines (repainted fewer than
    # every line on screen each time)
    assert counts["moved"] > 15 and 0 < counts["changed"] < checked[0], (counts, checked)


async def test_a_table_that_forgets_a_changed_line_is_caught() -> None:
    ForgetfulTable.__name__ = "FleetTable"  # the stylesheet's rules name the class
    bad, stale, _ = await drive(ForgetfulTable, 1, until_stale=True)
    old, _, _ = await drive(before.FleetTable, 1)
    assert stale > 0
    assert any(a[0] != b[0] for a, b in zip(bad, old, strict=False))


async def test_a_mouse_one_row_off_is_caught() -> None:
    RowOffByOne.__name__ = "FleetTable"
    bad, _, _ = await drive(RowOffByOne, 1)
    old, _, _ = await drive(before.FleetTable, 1)
    assert any(a[1] != b[1] for a, b in zip(bad, old, strict=True))
