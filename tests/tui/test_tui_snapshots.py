"""SVG snapshots of the console with fixed data and a frozen clock.

The fleet, the wall and each host panel are shot at 80×24 and 160×48 in the dark and
high-contrast themes, fed by the agent's simulator through the wire format
(``tests.support.tui_fakes.sim_fleet``); two older shots use hand-made fake hosts.

Regenerate with ``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` after a
deliberate visual change, and look at ``snapshot_report.html`` before committing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot

from probes.analysis.alerts import AlertPolicy
from tests.support.tui_fakes import FakeBackend, fake_fleet, settled, sim_fleet, wait_until
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import PANELS, SHOWN_AT_START, HostScreen
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall
from widgets.gpu_table import GpuTable
from widgets.host_stats import HostStatsPanel
from widgets.iostat_panel import IostatPanel
from widgets.memory_growth import GpuGrowthRow
from widgets.network_panel import NetworkPanel
from widgets.process_table import ProcessPanel
from widgets.thermal_panel import ThermalPanel
from widgets.topo_matrix import TopoPanel

SnapCompare = Callable[..., bool]


def _app() -> tuple[RigwatchApp, FakeBackend]:
    backend, clock = fake_fleet()
    # alerts pop up on the 1 s tick: a toast in one run and not the next would make the
    # comparison a race
    quiet = AlertPolicy(notify=False, bell=False)
    return make_app(backend, ConsoleOptions(demo=True, alerts=quiet), clock=clock), backend


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


# --- every screen and panel at two sizes in two themes, from a fixed simulated stream ---

SIM_HOSTS = [
    ("gpu-s01", "healthy"), ("gpu-s02", "leak:3"), ("gpu-s03", "throttle:5"),
    ("gpu-s04", "link-downgrade:2"), ("gpu-s05", "disk-saturated"), ("gpu-s06", "xid79:6@600"),
    # one host with every kind of trouble a panel shows: each panel has something to say
    ("gpu-s07", "leak:3,throttle:5,link-downgrade:2,disk-saturated"),
]
SIM_MINUTES = 45
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
SNAP_THEMES = {"dark": "rigwatch-dark", "hc": "rigwatch-high-contrast"}
PANEL_KEYS = dict(zip(PANELS, "1234567", strict=True))


def _sim_app() -> tuple[RigwatchApp, FakeBackend]:
    backend, clock = sim_fleet(SIM_HOSTS, minutes=SIM_MINUTES)
    quiet = AlertPolicy(notify=False, bell=False)
    return make_app(backend, ConsoleOptions(demo=True, alerts=quiet), clock=clock), backend


async def _sim_settled(pilot: Pilot[None], backend: FakeBackend, theme: str) -> None:
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    app.theme = theme
    await backend.started.wait()
    await wait_until(pilot, lambda: all(
        h.last is not None and h.last.seq == SIM_MINUTES for h in app.fleet.hosts.values()))
    app.refresh_view()
    await wait_until(pilot, lambda: app.screen.query_one(FleetTable).row_count == len(SIM_HOSTS))


def _panel_ready(screen: HostScreen, panel: str) -> bool:
    if panel == "memory":
        return len(screen.query(GpuGrowthRow)) == 8
    if panel == "thermal":
        return len(screen.query_one(ThermalPanel).view.gpus) == 8
    if panel == "topology":
        return screen.query_one(TopoPanel).topo is not None
    if panel == "iostat":
        return bool(screen.query_one(IostatPanel).iostat.disks)
    if panel == "processes":
        return len(screen.query_one(ProcessPanel).processes) == 8
    if panel == "network":
        net = screen.query_one(NetworkPanel).network
        return net is not None and len(net.ports) == 8
    return screen.query_one(HostStatsPanel).host is not None


class TestSimulatedFleet:
    @pytest.mark.parametrize("theme", SNAP_THEMES)
    @pytest.mark.parametrize("size", SIZES)
    def test_fleet(self, snap_compare: SnapCompare, size: str, theme: str) -> None:
        """Seven simulated hosts 45 min into their run: leak, throttle, x8 link, busy disk
        and a lost GPU each on the table with its worst finding."""
        app, backend = _sim_app()

        async def run_before(pilot: Pilot[None]) -> None:
            await _sim_settled(pilot, backend, SNAP_THEMES[theme])
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)

    @pytest.mark.parametrize("theme", SNAP_THEMES)
    def test_wall(self, snap_compare: SnapCompare, theme: str) -> None:
        """The wall at 160×48: one cell per GPU by status, the lost GPU and the troubled
        ones marked by glyph as well as colour."""
        app, backend = _sim_app()

        async def run_before(pilot: Pilot[None]) -> None:
            await _sim_settled(pilot, backend, SNAP_THEMES[theme])
            await pilot.press("w")
            wall = pilot.app.screen.query_one(FleetWall)
            await wait_until(pilot, lambda: wall.display
                             and len(wall.view.hosts) == len(SIM_HOSTS))
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZES["160x48"], run_before=run_before)


class TestHostPanels:
    @pytest.mark.parametrize("theme", SNAP_THEMES)
    @pytest.mark.parametrize("size", SIZES)
    @pytest.mark.parametrize("panel", PANELS)
    def test_panel(self, snap_compare: SnapCompare, panel: str, size: str, theme: str) -> None:
        """gpu-s07 with only one panel shown, scrolled into view by its number key."""
        app, backend = _sim_app()

        async def run_before(pilot: Pilot[None]) -> None:
            await _sim_settled(pilot, backend, SNAP_THEMES[theme])
            pilot.app.post_message(HostChosen("gpu-s07"))
            await wait_until(pilot, lambda: isinstance(pilot.app.screen, HostScreen)
                             and pilot.app.screen.query_one(GpuTable).row_count == 8)
            screen = pilot.app.screen
            assert isinstance(screen, HostScreen)
            # hide the panels shown at start, then show this one: its key scrolls to it
            for shown in sorted(SHOWN_AT_START - {panel}):
                await pilot.press(PANEL_KEYS[shown])
            if panel not in SHOWN_AT_START:
                await pilot.press(PANEL_KEYS[panel])
            await wait_until(pilot, lambda: screen.shown == {panel}
                             and _panel_ready(screen, panel))
            # the panel's height is known only once its data has been laid out: scroll then,
            # and wait until the scroll position holds still
            await pilot.pause()
            body = screen.query_one("#host-body", VerticalScroll)
            target = screen.query_one(f"#panel-{panel}")

            def at_panel() -> bool:
                want = min(target.virtual_region.y, body.max_scroll_y)
                if body.scroll_y != want:
                    body.scroll_to(y=want, animate=False)
                    return False
                return True

            await wait_until(pilot, at_panel)
            await pilot.pause()
            await wait_until(pilot, at_panel)

        assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)
