"""The fleet screen reads off-screen numbers only when its order or filter needs them
(issue 38, item 3): rows that kept old numbers off screen are drawn afresh as soon as they
come on screen or a numeric order reads them.  (Checked to fail without the redraw a
scroll asks for, and with rows kept past their slots once a numeric order reads them.)"""

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


async def test_rows_come_on_screen_and_into_a_numeric_order_with_fresh_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_rows, "_wait_s", lambda _host: 0.1)  # every slot passes
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        table = screen.query_one(FleetTable)
        app.refresh_view()
        await pilot.pause()
        for h in NAMES:  # every host's power moves; nothing else does
            backend.push(h, _warmer(h, 1))  # type: ignore[arg-type]
        clock.now = T0 + 1.5  # past every refresh slot (``_wait_s``), not stale
        await wait_until(pilot, lambda: all(app.fleet.hosts[h].last.seq == 1  # type: ignore[union-attr]
                                            for h in NAMES))
        app.refresh_view()
        await pilot.pause()
        rows = app.fleet_rows
        assert not rows.numbers_read  # inventory order, no filter
        power = {k: c[POWER][0] for k, c in table.keyed_rows()}
        assert power["gpu-000"] == "2,400 W"  # on screen: drawn afresh
        assert power["gpu-059"] == "4,980 W"  # off screen: kept, past its slot (before: drawn)
        assert rows.waiting_among(frozenset({"gpu-059"}))

        due = [0]
        redraw_due = app._redraw_due

        def counted() -> None:
            due[0] += 1
            redraw_due()

        app._redraw_due = counted  # type: ignore[method-assign]
        await pilot.press("down")  # a row that was on screen: nothing waits there
        await pilot.pause(0.4)
        assert due[0] == 0
        await pilot.press("ctrl+end")  # the last rows come on screen: drawn again at once
        await wait_until(pilot, lambda: due[0] > 0)
        await pilot.pause()
        assert "gpu-059" in (rows.focus or ())
        assert {k: c[POWER][0] for k, c in table.keyed_rows()}["gpu-059"] == "2,400 W"

        assert rows.waiting_among(frozenset(NAMES[30:40]))  # never on screen: they wait
        for _ in range(2):  # inventory -> worst -> temp: an order that reads numbers
            await pilot.press("s")
        await pilot.pause()
        assert screen.sort_key == "temp" and rows.waiting_among(frozenset(NAMES[30:40]))
        clock.now += 0.5  # one refresh period on (``_wait_s``): every row's slot came
        app.refresh_view()
        await pilot.pause()
        assert all(r.power_w == 2400.0 for r in screen._rows), \
            [r.name for r in screen._rows if r.power_w != 2400.0]
        assert rows.numbers_read
