"""The fleet screen looks only at hosts whose status, findings or GPUs answering moved
(issue 38): off screen, in an order that reads no numbers, a sample that moved only a host's
numbers is not looked at (``FleetState.judged_since``), while a GPU lost, a trouble found or
a host gone down off screen shows at once in the header's totals and in the worst order.
(Checked to fail with a fold that calls every sample numbers only.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from probes.errors import DisconnectKind
from probes.wire.events import Disconnected
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
from tui.screens.fleet import FleetScreen
from tui.views.fleet_rows import FleetRows
from widgets.fleet_table import FleetTable
from widgets.header_bar import HeaderBar

NAMES = TALL


def _powered(host: str, step: int, **kw: Any) -> Any:
    s = sample(host, step, **kw)
    return replace(s, gpus=tuple(replace(g, power_w=300.0 + step) for g in s.gpus))


def _totals(screen: FleetScreen) -> str:
    return str(screen.query_one(HeaderBar).query_one("#totals").render())


async def test_off_screen_numbers_are_not_looked_at_but_troubles_show_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []
    row = FleetRows.row

    def counted(self: FleetRows, host: Any, now: float) -> Any:
        looked.append(host.name)
        return row(self, host, now)

    monkeypatch.setattr(FleetRows, "row", counted)
    backend, clock = tall_fleet(lambda h: _powered(h, 0))
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        app.refresh_view()
        await pilot.pause()
        on_screen = app.fleet_rows.focus or frozenset()
        assert 0 < len(on_screen) < 40 and "gpu-059" not in on_screen
        totals_before = _totals(screen)

        for step in (1, 2):  # every host's power moves; nothing else does
            for h in NAMES:
                backend.push(h, _powered(h, step))
            clock.now = T0 + 1 + step
            await wait_until(pilot, lambda s=step: all(
                app.fleet.hosts[h].last.seq == s for h in NAMES))  # type: ignore[union-attr]
            looked.clear()
            app.refresh_view()
            await pilot.pause()
            assert set(looked) <= on_screen, sorted(set(looked) - on_screen)
        assert _totals(screen) == totals_before

        # off screen: one host loses a GPU, one finds a trouble, one goes down
        lost = _powered("gpu-059", 3)
        backend.push("gpu-059", replace(lost, gpus=lost.gpus[:7]))
        backend.push("gpu-058", _powered("gpu-058", 3, trouble_gpu=2))
        backend.push("gpu-057", Disconnected(T0 + 3, "connection refused", 5.0,
                                             kind=DisconnectKind.UNREACHABLE))
        clock.now = T0 + 3.2
        await wait_until(pilot, lambda: app.fleet.hosts["gpu-057"].status.is_down)
        looked.clear()
        app.refresh_view()
        await pilot.pause()
        assert {"gpu-057", "gpu-058", "gpu-059"} <= set(looked)
        assert set(looked) - on_screen == {"gpu-057", "gpu-058", "gpu-059"}
        rows = {r.name: r for r in app.fleet_rows.rows(clock.now)}
        fresh = {h: app.fleet.hosts[h].row(clock.now) for h in ("gpu-057", "gpu-058",
                                                                  "gpu-059")}
        for h, r in fresh.items():
            assert (rows[h].status, rows[h].gpus_ok, rows[h].findings, rows[h].worst) == \
                (r.status, r.gpus_ok, r.findings, r.worst), h
        assert rows["gpu-059"].gpus_ok == 7 and rows["gpu-057"].status.is_down
        assert "480 GPUs" in totals_before and "no findings" in totals_before
        assert "1 down" in _totals(screen) and "479 GPUs" in _totals(screen)
        assert "critical" in _totals(screen)
        await pilot.press("s")  # worst first: the three come to the top
        await pilot.pause()
        assert screen.sort_key == "worst"
        top = [k for k, _ in screen.query_one(FleetTable).keyed_rows()][:3]
        assert set(top) == {"gpu-057", "gpu-058", "gpu-059"}, top
