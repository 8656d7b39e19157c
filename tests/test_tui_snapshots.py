"""SVG snapshots of the console at 80×24 with fixed fake data and a frozen clock.

Regenerate with ``pytest tests/test_tui_snapshots.py --snapshot-update`` after a
deliberate visual change, and look at ``snapshot_report.html`` before committing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

import pytest
from textual.pilot import Pilot

from probes.alerts import AlertPolicy
from tests.tui_fakes import FakeBackend, fake_fleet, settled, wait_until
from tui.app import RigwatchApp, make_app
from tui.screens.host import HostScreen
from widgets.gpu_table import GpuTable
from widgets.memory_growth import GpuGrowthRow

SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Event timestamps render in local time: pin it so snapshots match on any machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _app() -> tuple[RigwatchApp, FakeBackend]:
    backend, clock = fake_fleet()
    # alerts pop up on the 1 s tick: a toast in one run and not the next would make the
    # comparison a race
    quiet = AlertPolicy(notify=False, bell=False)
    return make_app(backend, demo=True, clock=clock, alerts=quiet), backend


def _until_settled(backend: FakeBackend) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settled(pilot, backend)
        await pilot.pause()

    return run_before


def _until_host_drawn(backend: FakeBackend) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settled(pilot, backend)
        await pilot.press("down", "enter")
        app = pilot.app
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.query_one(GpuTable).row_count == 8
                         and len(app.screen.query(GpuGrowthRow)) == 8)
        await pilot.pause()

    return run_before


class TestFleetScreen:
    def test_fleet_80x24(self, snap_compare: SnapCompare) -> None:
        """Three hosts at 80×24: narrow columns, hot GPU and Xid finding coloured."""
        app, backend = _app()
        assert snap_compare(app, terminal_size=(80, 24), run_before=_until_settled(backend))


class TestHostScreen:
    def test_host_80x24(self, snap_compare: SnapCompare) -> None:
        """gpu-t02 at 80×24: GPU table with a throttled, narrowed GPU 3, chart, findings."""
        app, backend = _app()
        assert snap_compare(app, terminal_size=(80, 24), run_before=_until_host_drawn(backend))
