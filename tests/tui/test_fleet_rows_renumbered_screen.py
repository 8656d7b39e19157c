"""Under a numeric order, off-screen rows take fresh numbers on their kept verdicts at their
slots (``FleetRows.only_numbers_read``, issue 38); such a row scrolled on screen is drawn
again at once (a redraw asked), not at the next tick.  (Checked to fail without the redraw
the scroll asks for.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.tui_fakes import (
    T0,
    TALL,
    sample,
    tall_fleet,
    tall_fleet_shown,
    wait_until,
)
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.views import fleet_rows
from widgets.fleet_table import FleetTable

NAMES = TALL
POWER = 7  # the Power column among a row's cells


def _warmer(host: str, step: int) -> object:
    s = sample(host, step)
    return replace(s, gpus=tuple(replace(g, power_w=300.0) for g in s.gpus))


async def test_renumbered_rows_scrolled_on_screen_are_drawn_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_rows, "_wait_s", lambda _host: 0.1)  # every slot passes
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        table = screen.query_one(FleetTable)
        for _ in range(2):  # inventory -> worst -> temp
            await pilot.press("s")
        await pilot.pause()
        rows = app.fleet_rows
        assert screen.sort_key == "temp" and rows.only_numbers_read
        app.refresh_view()
        await pilot.pause()
        for h in NAMES:  # every host's power moves; nothing else does
            backend.push(h, _warmer(h, 1))  # type: ignore[arg-type]
        clock.now = T0 + 1.5  # past every refresh slot (``_wait_s``), not stale
        await wait_until(pilot, lambda: all(app.fleet.hosts[h].last.seq == 1  # type: ignore[union-attr]
                                            for h in NAMES))
        built, renumbered = rows.row_builds, rows.row_renumbers
        app.refresh_view()
        await pilot.pause()
        off = frozenset(NAMES) - (rows.focus or frozenset())
        assert rows.row_renumbers - renumbered == len(off)  # none built in full
        assert rows.row_builds - built == 60 - len(off)
        assert all(r.power_w == 2400.0 for r in screen._rows)  # every number fresh
        assert rows.renumbered_among(off)

        due = [0]
        redraw_due = app._redraw_due

        def counted() -> None:
            due[0] += 1
            redraw_due()

        app._redraw_due = counted  # type: ignore[method-assign]
        await pilot.press("down")  # a row that was on screen: nothing renumbered there
        await pilot.pause(0.4)
        assert due[0] == 0
        last = table.visible_keys()
        await pilot.press("ctrl+end")  # the last rows come on screen: drawn again at once
        await wait_until(pilot, lambda: due[0] > 0)
        await pilot.pause()
        shown = rows.focus or frozenset()
        assert shown - last and not rows.renumbered_among(shown)
