"""The console's cost follows what changed, not the fleet's size.

Items are folded without a Textual message each; a storm of connects redraws the table a
few times, not once per host; a redraw formats only the rows whose host changed, and
repaints the table only when a changed row is on screen.  Counted with the app's and the
widgets' counters, never timed.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from probes.config.fleet import HostSpec
from probes.sources.base import BackendBase
from probes.wire.events import Connected, Emit
from tests.support.tui_fakes import T0, FrozenClock, hello, sample, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from widgets.fleet_table import FleetTable

HOSTS = 1000
NAMES = [f"gpu{i:04d}" for i in range(HOSTS)]


class ConnectStorm(BackendBase):
    """Every host connects and says hello, a few at a time, as the 32-wide connect gate
    lets real sessions through; the app's loop runs between each group."""

    def __init__(self, per_step: int = 8) -> None:
        self.specs = [HostSpec(name=n, tags=(f"rack-{i // 32:02d}",), expect_gpus=8)
                      for i, n in enumerate(NAMES)]
        self.per_step = per_step
        self.emit: Emit | None = None
        self.started = asyncio.Event()
        self.connected = asyncio.Event()

    async def run(self, emit: Emit) -> None:
        self.emit = emit
        self.started.set()
        for i, name in enumerate(NAMES):
            emit(name, Connected(T0))
            emit(name, hello(name))
            emit(name, sample(name, 0))
            if i % self.per_step == self.per_step - 1:
                await asyncio.sleep(0)
        self.connected.set()
        await asyncio.Event().wait()


def table(app: RigwatchApp) -> FleetTable:
    return app.screen.query_one(FleetTable)


async def test_a_storm_of_1000_connects_redraws_a_handful_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: with the redraw cap and the tick held longer than any storm, the
    storm draws once however long it takes (live, the cap is 4 redraws a second)."""
    monkeypatch.setattr("tui.app.REDRAW_MIN_S", 3600.0)
    monkeypatch.setattr("tui.app.REFRESH_S", 3600.0)
    backend = ConnectStorm()
    app = make_app(backend, ConsoleOptions(demo=False), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        before = app.redraws
        await asyncio.wait_for(backend.connected.wait(), 20)
        during = app.redraws - before
        app.refresh_view()
        await wait_until(pilot, lambda: table(app).row_count == HOSTS)
        # 125 turns of the loop, each with 8 hellos: the old console redrew on each
        assert during <= 2, during
        # each host's row was built for connecting and for streaming at most
        assert app.fleet_rows.row_builds <= 2 * HOSTS
        assert app.fleet.totals(app._clock())["streaming"] == HOSTS


async def test_a_redraw_formats_and_repaints_only_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = ConnectStorm(per_step=HOSTS)
    app = make_app(backend, ConsoleOptions(demo=False), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await asyncio.wait_for(backend.connected.wait(), 20)
        await wait_until(pilot, lambda: table(app).row_count == HOSTS)
        app.refresh_view()
        await pilot.pause()
        t = table(app)
        builds, formatted, writes = app.fleet_rows.row_builds, t.cells_formatted, t.table_writes
        repaints: list[None] = []
        plain = t.refresh

        def counted(*a: Any, **k: Any) -> FleetTable:
            repaints.append(None)
            return plain(*a, **k)

        monkeypatch.setattr(t, "refresh", counted)
        assert backend.emit is not None
        # a change on screen repaints (its reason also widens the last column)
        backend.emit(NAMES[0], sample(NAMES[0], 1, trouble_gpu=0))
        app.refresh_view()
        assert app.fleet_rows.row_builds == builds + 1
        assert t.cells_formatted == formatted + 1
        assert repaints
        repaints.clear()
        # the last host is far below the 48-line screen: its new values (a reason no wider
        # than the column now is) are written to the table's data, nothing is repainted
        backend.emit(NAMES[-1], sample(NAMES[-1], 1, trouble_gpu=2))
        app.refresh_view()
        assert app.fleet_rows.row_builds == builds + 2
        assert t.cells_formatted == formatted + 2
        assert t.table_writes == writes + 2
        assert repaints == []
        assert t.get_cell(NAMES[-1], "temp").plain == "88 °C"
        # a redraw with nothing new formats nothing and writes nothing
        app.refresh_view()
        assert (app.fleet_rows.row_builds, t.cells_formatted, t.table_writes) == \
            (builds + 2, formatted + 2, writes + 2)
        # the far host scrolled to shows its new value
        t.move_cursor(row=HOSTS - 1, animate=False)
        await pilot.pause()
        assert t.scroll_y > 0
        y = HOSTS - 1 - int(t.scroll_y) + 1  # one header line
        line = "".join(seg.text for seg in t.render_line(y))
        assert NAMES[-1] in line and "88 °C" in line


async def test_items_from_another_thread_are_folded_on_the_loop_in_order() -> None:
    backend = ConnectStorm(per_step=HOSTS)
    app = make_app(backend, ConsoleOptions(demo=False), clock=FrozenClock())
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(backend.connected.wait(), 20)
        emit = backend.emit
        assert emit is not None
        folded_on: list[int] = []
        plain = app.fleet.apply

        def spy(host: str, item: object, now: float) -> None:
            folded_on.append(threading.get_ident())
            plain(host, item, now)  # type: ignore[arg-type]

        app.fleet.apply = spy  # type: ignore[method-assign]

        def push() -> None:
            for step in range(1, 6):
                emit(NAMES[3], sample(NAMES[3], step))

        thread = threading.Thread(target=push)
        thread.start()
        thread.join()
        await wait_until(pilot, lambda: len(folded_on) == 5)
        assert set(folded_on) == {threading.get_ident()}
        last = app.fleet.hosts[NAMES[3]].last
        assert last is not None and last.seq == 5
