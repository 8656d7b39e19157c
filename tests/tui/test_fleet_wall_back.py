"""The table shown again after the wall draws what a full sync draws (session 10).

``FleetScreen._table_back`` keeps the old lines of off-screen rows whose "why" text is
unchanged until the screen has been refreshed, then draws every row afresh.  Here sixty
hosts' numbers all move while the wall is shown (its tick refreshes every row), then ``w``
brings the table back, with the table scrolled to its middle and the cursor there: the
first settled screen with the table, and every row's cells once the loop is quiet, equal
those of the same steps through the full sync (``_redraw``).  Negative controls: old lines
kept for the rows on screen too show stale numbers on the first screen; no catch-up leaves
stale cells off screen.  The console's 1 Hz redraw is stopped before ``w`` (a tick would draw
every row afresh itself), so what is compared is the catch-up's work, not a tick's timing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.screen import Screen

from tests.support.tui_fakes import T0, TALL, sample, tall_fleet, tall_fleet_shown, wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.views import fleet_rows
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall


def _moved(host: str, step: int) -> object:
    s = sample(host, step)
    return replace(s, gpus=tuple(replace(g, power_w=200.0 + 10 * i + step)
                                 for i, g in enumerate(s.gpus)))


def _frame(screen: Screen[Any]) -> list[str]:
    return [str([(seg.text, str(seg.style)) for seg in strip])
            for strip in screen._compositor.render_strips()]


async def _run(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, Any], int]:
    """The first settled screen after the table came back, its rows' cells after, and how
    many times the catch-up ran."""
    monkeypatch.setattr(fleet_rows, "_wait_s", lambda _host: 0.1)
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    frames: list[list[str]] = []
    armed = [False]
    caught = [0]
    composite = Screen._compositor_refresh
    catch_up = FleetScreen._table_caught_up

    def refreshed(screen: Screen[Any]) -> None:
        composite(screen)
        if armed[0] and isinstance(screen, FleetScreen):
            table = screen.query_one(FleetTable)
            if (table.display and not table._layout_required
                    and not table._repaint_required and not screen._layout_required):
                frames.append(_frame(screen))
                armed[0] = False

    def counted(screen: FleetScreen) -> None:
        caught[0] += 1
        catch_up(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", refreshed)
    monkeypatch.setattr(FleetScreen, "_table_caught_up", counted)
    async with app.run_test(size=(120, 14)) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        table = screen.query_one(FleetTable)
        table.focus()
        for _ in range(20):  # the cursor and the view in the middle of the table
            await pilot.press("down")
        await pilot.pause()
        await pilot.press("w")
        await wait_until(pilot, lambda: screen.query_one(FleetWall).display)
        for step in (1, 2):
            for h in TALL:  # every host's power moves
                backend.push(h, _moved(h, step))  # type: ignore[arg-type]
            clock.now = T0 + step + 0.5
            await wait_until(pilot, lambda s=step: all(  # type: ignore[misc]
                app.fleet.hosts[h].last.seq == s for h in TALL))  # type: ignore[union-attr]
            app.refresh_view()  # the wall's tick: every row fresh
            await pilot.pause()
        # no 1 Hz redraw from here on: one landing after the key would draw every row
        # afresh itself, and the controls (no catch-up) would pass or fail by its timing
        monkeypatch.setattr(app, "refresh_view", lambda: None)
        armed[0] = True
        await pilot.press("w")
        await wait_until(pilot, lambda: not armed[0])
        await pilot.pause(0.2)
        cells = {key: [(c.plain, str(c.style)) for c in table.get_row(key)]
                 for key in TALL}
        return frames[0], cells, caught[0]


def _full_sync(screen: FleetScreen) -> None:
    screen._redraw()


async def test_the_table_back_is_drawn_as_a_full_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    frame, cells, caught = await _run(monkeypatch)
    assert caught == 1  # some rows kept their old lines until the screen was refreshed
    monkeypatch.setattr(FleetScreen, "_table_back", _full_sync)
    frame_full, cells_full, caught_full = await _run(monkeypatch)
    assert caught_full == 0
    assert frame == frame_full
    assert cells == cells_full
    assert any("2" in "".join(t for t, _ in row) for row in cells.values())


async def test_old_lines_on_screen_or_no_catch_up_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative controls: every row keeps its old line (on screen too); the old lines are
    never caught up."""
    with monkeypatch.context() as m:
        m.setattr(FleetScreen, "_table_back", _full_sync)
        frame_full, cells_full, _ = await _run(m)

    def all_old(screen: FleetScreen) -> None:
        table = screen.query_one(FleetTable)
        held = {line.row.name: line for line in table.hosts}
        screen._set_reads()
        from tui.views.fleet_view import filter_rows, sort_rows
        rows = sort_rows(filter_rows(screen._rows, screen.query_text, screen._words),
                         screen.sort_key)
        assert screen._fleet is not None
        fresh = screen._lines_of(screen._fleet, rows)
        table.hosts = tuple(held.get(line.row.name, line) for line in fresh)
        screen.call_after_refresh(screen._table_caught_up)

    with monkeypatch.context() as m:
        m.setattr(FleetScreen, "_table_back", all_old)
        frame, _cells, _ = await _run(m)
    assert frame != frame_full
    with monkeypatch.context() as m:
        m.setattr(FleetScreen, "_table_caught_up", lambda _screen: None)
        _frame_none, cells, _ = await _run(m)
    assert cells != cells_full
