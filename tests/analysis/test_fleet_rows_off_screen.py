"""Off-screen fleet rows (``FleetState.focus``): numbers may wait a few seconds, nothing
else may.  At a thousand hosts rebuilding every row every second was most of the UI's tick;
these tests hold what the saving must never cost."""

from __future__ import annotations

from dataclasses import replace

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.wire.events import Connected, Disconnected
from tests.support.tui_fakes import T0, FakeBackend, FrozenClock, hello, sample, wait_until
from tests.support.tui_fakes import gpu as gpu_sample
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.views.fleet_rows import OFF_SCREEN_REFRESH_S, FleetRows
from widgets.fleet_table import FleetTable

HOSTS = ["h-on", "h-off"]


def _fleet() -> FleetState:
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for h in HOSTS:
        fleet.apply(h, Connected(T0), T0)
        fleet.apply(h, hello(h), T0)
        fleet.apply(h, sample(h, 0), T0)
    return fleet


def _view(fleet: FleetState) -> FleetRows:
    """The console's rows of ``fleet``, ``h-on`` on screen."""
    view = FleetRows(fleet)
    view.focus = frozenset({"h-on"})
    return view


def _row(view: FleetRows, host: str, now: float):  # type: ignore[no-untyped-def]
    return next(r for r in view.rows(now) if r.name == host)


def test_an_off_screen_hosts_numbers_wait_at_most_the_refresh() -> None:
    fleet = _fleet()
    view = _view(fleet)
    first_off, first_on = _row(view, "h-off", T0), _row(view, "h-on", T0)
    for h in HOSTS:  # power moves, nothing else
        warmer = sample(h, 1)
        fleet.apply(h, replace(warmer, gpus=tuple(replace(g, power_w=300.0)
                                                   for g in warmer.gpus)), T0 + 1)
    assert _row(view, "h-on", T0 + 1) is not first_on
    assert _row(view, "h-on", T0 + 1).power_w == 8 * 300.0
    assert _row(view, "h-off", T0 + 1) is first_off  # off screen: kept
    later = T0 + OFF_SCREEN_REFRESH_S + 0.1
    assert _row(view, "h-off", later).power_w == 8 * 300.0


def test_a_new_finding_or_status_reaches_an_off_screen_row_at_once() -> None:
    fleet = _fleet()
    view = _view(fleet)
    before = _row(view, "h-off", T0)
    assert before.findings == 0
    hot = sample("h-off", 1, trouble_gpu=3)
    fleet.apply("h-off", hot, T0 + 1)
    row = _row(view, "h-off", T0 + 1)
    assert row.findings > 0 and row.worst is not None and row.max_temp_c == 88.0
    fleet.apply("h-off", Disconnected(T0 + 2, "connection refused", 5.0,
                                      kind=DisconnectKind.UNREACHABLE), T0 + 2)
    down = _row(view, "h-off", T0 + 2)
    assert down.status.is_down and down.reason == "connection refused"
    assert view.totals(T0 + 2)["critical"] >= 1


def test_a_lost_gpu_is_counted_at_once_off_screen() -> None:
    fleet = _fleet()
    view = _view(fleet)
    assert _row(view, "h-off", T0).gpus_ok == 8
    s = sample("h-off", 1)
    fleet.apply("h-off", replace(s, gpus=s.gpus[:6] + s.gpus[7:]), T0 + 1)
    assert _row(view, "h-off", T0 + 1).gpus_ok == 7


def test_without_focus_every_change_rebuilds() -> None:
    fleet = _fleet()
    view = _view(fleet)
    view.focus = None
    first = _row(view, "h-off", T0)
    fleet.apply("h-off", replace(sample("h-off", 1), gpus=(gpu_sample(0, 1),) * 8), T0 + 1)
    assert _row(view, "h-off", T0 + 1) is not first


async def test_the_fleet_screen_focuses_the_rows_it_shows_and_the_wall_the_hosts_it_shows(
        ) -> None:
    names = [f"gpu-{i:03d}" for i in range(60)]
    items = []
    for h in names:
        items += [(h, Connected(T0)), (h, hello(h)), (h, sample(h, 0))]
    backend = FakeBackend([HostSpec(name=h, expect_gpus=8) for h in names], items)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(T0 + 1))
    async with app.run_test(size=(120, 30)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen)
                         and app.screen.query_one(FleetTable).row_count == 60)
        app.refresh_view()
        await pilot.pause()
        focus = app.fleet_rows.focus
        assert focus is not None and "gpu-000" in focus and "gpu-059" not in focus
        assert 10 <= len(focus) <= 40
        await pilot.press("w")
        await pilot.pause()
        app.refresh_view()
        # session 12: the wall's focus is the hosts in its grid rows on screen (here all
        # sixty fit), no longer None (``widgets.fleet_wall.visible_hosts``)
        assert app.fleet_rows.focus == frozenset(names)
