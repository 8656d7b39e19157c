"""A host going stale, down, and back while its host screen is open, through the panels."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from probes.fleet_state import HostStatus
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import HostSample
from tests.support.tui_fakes import SIM_STEP_S, sim_fleet, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from widgets.gpu_table import GpuTable
from widgets.host_facts import HostFactsBar
from widgets.memory_growth import GpuGrowthRow
from widgets.thermal_panel import ThermalPanel

MINUTES = 20
HOST = "gpu-s01"


def facts_text(app: RigwatchApp) -> str:
    bar = app.screen.query_one(HostFactsBar)
    return str(bar.render())


async def test_stale_down_and_back_on_the_host_screen() -> None:
    backend, clock = sim_fleet([(HOST, "throttle:5"), ("gpu-s02", "healthy")], minutes=MINUTES)
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                            for h in app.fleet.hosts.values()))
        app.post_message(HostChosen(HOST))
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and len(app.screen.query(GpuGrowthRow)) == 8)
        await wait_until(pilot, lambda: "streaming" in facts_text(app))
        state = app.fleet.hosts[HOST]
        last = state.last
        assert isinstance(last, HostSample)
        hot = max(g.temp_c or 0.0 for g in last.gpus)

        # silent for 30 s: stale, counted in the header, the panels keep the last picture
        clock.now += 30
        app.refresh_view()
        await wait_until(pilot, lambda: "stale 30 s" in facts_text(app))
        assert state.status is HostStatus.STALE
        thermal = app.screen.query_one(ThermalPanel)
        assert len(thermal.view.gpus) == 8
        assert max(g.temp_c or 0.0 for g in thermal.view.gpus) == hot
        assert len(app.screen.query(GpuGrowthRow)) == 8

        # the session drops: down with its reason, the charts still there to read
        backend.push(HOST, Disconnected(clock.now, "ssh: connection reset", retry_in_s=5))
        await wait_until(pilot, lambda: "down" in facts_text(app))
        # the reason, its age and the next try on their own line above the dimmed table
        stale = str(app.screen.query_one("#host-stale", Static).render())
        assert "connection reset" in stale and "last seen" in stale, stale
        assert app.screen.query_one(GpuTable).has_class("-stale")
        assert len(app.screen.query(GpuGrowthRow)) == 8

        # it comes back: streaming again, and the panels move on with the new samples
        assert state.hello is not None
        clock.now += 5
        backend.push(HOST, Connected(clock.now))
        backend.push(HOST, state.hello)
        cooler = tuple(replace(g, temp_c=55.0, clock_reasons=()) for g in last.gpus)
        backend.push(HOST, replace(last, seq=0, ts=last.ts + 2 * SIM_STEP_S, gpus=cooler))
        await wait_until(pilot, lambda: state.status is HostStatus.STREAMING)
        app.refresh_view()
        await wait_until(pilot, lambda: "streaming" in facts_text(app)
                         and "down" not in facts_text(app))
        await wait_until(pilot, lambda: max(g.temp_c or 0.0 for g in
                                            app.screen.query_one(ThermalPanel).view.gpus) == 55.0)
        assert len(app.screen.query(GpuGrowthRow)) == 8
        # live again: no "last seen" line, the table no longer dimmed
        assert not app.screen.query_one("#host-stale", Static).display
        assert not app.screen.query_one(GpuTable).has_class("-stale")
