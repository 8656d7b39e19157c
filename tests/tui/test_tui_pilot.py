"""Pilot tests of the console against a fake backend (and, where it exists, the real agents)."""

from __future__ import annotations

import pytest
from textual.message import Message
from textual.widgets import Label, Static
from textual.widgets._toast import Toast

from probes.config.fleet import demo_fleet
from probes.errors import TransportError
from probes.fleet_state import HostStatus
from probes.sources.agents import AgentFleetBackend
from probes.sources.base import BackendBase
from probes.wire.events import Disconnected
from tests.support.tui_fakes import (
    HOSTS,
    NOW,
    SAMPLES,
    FakeBackend,
    FrozenClock,
    fake_fleet,
    fleet_items,
    sample,
    settled,
    wait_until,
)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.host import HostScreen
from widgets.fleet_table import FleetTable
from widgets.gpu_table import GpuTable
from widgets.memory_growth import GpuGrowthRow, MemoryGrowth

# ---- helpers ---------------------------------------------------------------------------


def fleet_table(app: RigwatchApp) -> FleetTable:
    return app.screen.query_one(FleetTable)


def cell(app: RigwatchApp, host: str, column: str) -> str:
    """The plain text of one fleet-table cell."""
    return fleet_table(app).get_cell(host, column).plain


def totals_text(app: RigwatchApp) -> str:
    return str(app.screen.query_one("#totals", Label).render())


@pytest.fixture
def fake() -> tuple[FakeBackend, FrozenClock, RigwatchApp]:
    backend, clock = fake_fleet()
    return backend, clock, make_app(backend, ConsoleOptions(demo=True), clock=clock)


# ---- fleet screen ------------------------------------------------------------------------


async def test_fleet_screen_lists_every_host(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, _, app = fake
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await settled(pilot, backend)
        assert isinstance(app.screen, FleetScreen)
        table = fleet_table(app)
        assert [str(k.value) for k in table.rows] == list(HOSTS)
        assert [cell(app, h, "status") for h in HOSTS] == ["streaming"] * 3
        assert cell(app, "gpu-t02", "temp") == "88 °C"
        assert cell(app, "gpu-t02", "gpus") == "8/8"
        assert cell(app, "gpu-t02", "worst") == "GPU3 LOST · Xid 79"  # the verdict leads
        assert cell(app, "gpu-t01", "findings") == "0"
        header = totals_text(app)
        assert "3/3 streaming" in header
        assert "24 GPUs" in header
        assert "1 critical" in header
    # every item was folded, in order, and none of them cost a Textual message
    assert sum(h.changes for h in app.fleet.hosts.values()) == len(fleet_items())
    assert not [m for m in messages if getattr(m, "item", None) is not None]


async def test_cursor_stays_on_host_without_rebuilding(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp], monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, clock, app = fake
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("down", "down")
        table = fleet_table(app)
        assert table.cursor_row == 2
        clears: list[object] = []
        monkeypatch.setattr(table, "clear", lambda *a, **k: clears.append(a))
        clock.now += 1
        for host in HOSTS:
            backend.push(host, sample(host, SAMPLES, trouble_gpu=0 if host == "gpu-t01" else None))
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == SAMPLES
                                            for h in app.fleet.hosts.values()))
        app.refresh_view()
        await pilot.pause()
        assert cell(app, "gpu-t01", "temp") == "88 °C"
        assert table.cursor_row == 2
        assert clears == []


async def test_silent_host_turns_stale(fake: tuple[FakeBackend, FrozenClock, RigwatchApp]) -> None:
    backend, clock, app = fake
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        clock.now = NOW + 10
        backend.push("gpu-t01", sample("gpu-t01", SAMPLES))
        backend.push("gpu-t02", sample("gpu-t02", SAMPLES))
        await wait_until(pilot, lambda: app.fleet.hosts["gpu-t02"].reach.last_seen == NOW + 10)
        app.refresh_view()
        await pilot.pause()
        assert cell(app, "gpu-t03", "status") == "stale 10 s"
        assert cell(app, "gpu-t01", "status") == "streaming"
        assert "1 stale" in totals_text(app)


async def test_disconnect_shows_down_at_once(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, clock, app = fake
    tick = app._tick
    held = False

    def held_tick() -> None:  # the 1 Hz tick, skipped while held
        if not held:
            tick()

    app._tick = held_tick  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        held = True
        backend.push("gpu-t02", Disconnected(clock.now, "agent exited (status 1)", retry_in_s=5))
        # No tick: a status change must be drawn without waiting for it (the tick is held
        # rather than raced with a short timeout, which a loaded machine lost)
        await wait_until(pilot, lambda: cell(app, "gpu-t02", "status") == "down")
        held = False
        assert cell(app, "gpu-t02", "worst") == "agent exited (status 1)"
        assert app.fleet.hosts["gpu-t02"].status is HostStatus.DOWN
        assert "1 down" in totals_text(app)


# ---- navigation --------------------------------------------------------------------------


async def test_enter_opens_host_and_escape_returns(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, _, app = fake
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await settled(pilot, backend)
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        screen = app.screen
        assert isinstance(screen, HostScreen)
        assert screen.host == "gpu-t02"
        gpus = screen.query_one(GpuTable)
        await wait_until(pilot, lambda: gpus.row_count == 8)
        assert gpus.get_cell("3", "temp").plain == "88 °C"
        assert gpus.get_cell("3", "pcie").plain == "Gen5 x8 < Gen5 x16"
        await wait_until(pilot, lambda: len(screen.query(GpuGrowthRow)) == 8)
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        assert fleet_table(app).cursor_row == 1
    # The hook sees a bubbling message once per hop (screen, then app): count distinct ones.
    chosen = {id(m): m.host for m in messages if isinstance(m, HostChosen)}
    assert list(chosen.values()) == ["gpu-t02"]


async def test_host_screen_shows_memory_slope(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, _, app = fake
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("down", "down", "enter")
        await wait_until(pilot, lambda: len(app.screen.query(GpuGrowthRow)) == 8)
        panel = app.screen.query_one(MemoryGrowth)
        # gpu-t03's GPU 5 gains 40 MiB per sample at 1 Hz: 144,000 MiB/h.
        await wait_until(pilot, lambda: panel.view.gpus[5].slope_mib_h is not None)
        assert panel.view.gpus[5].slope_mib_h == pytest.approx(144_000, rel=0.01)
        rows = list(app.screen.query(GpuGrowthRow))
        assert "144,000" in str(rows[5].query_one(Static).render())
        assert "144,000" not in str(rows[0].query_one(Static).render())


async def test_help_opens_and_closes(fake: tuple[FakeBackend, FrozenClock, RigwatchApp]) -> None:
    backend, _, app = fake
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)


async def test_q_quits(fake: tuple[FakeBackend, FrozenClock, RigwatchApp]) -> None:
    backend, _, app = fake
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


async def test_shift_t_cycles_themes_and_restyles_cells(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, _, app = fake
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        assert app.theme == "rigwatch-dark"
        dark_style = fleet_table(app).get_cell("gpu-t02", "temp").style
        await pilot.press("T")
        await pilot.pause()
        assert app.theme == "rigwatch-light"
        await wait_until(pilot, lambda: fleet_table(app).get_cell("gpu-t02", "temp").style
                         != dark_style)
        seen = [app.theme]
        for _ in range(3):
            await pilot.press("T")
            await pilot.pause()
            seen.append(app.theme)
        assert seen == ["rigwatch-light", "rigwatch-high-contrast", "rigwatch-colour-safe",
                        "rigwatch-dark"]


# ---- layouts -----------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "has_tags"), [((80, 24), False), ((200, 50), True)])
async def test_layouts_at_small_and_large_sizes(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp], size: tuple[int, int], has_tags: bool,
) -> None:
    backend, _, app = fake
    async with app.run_test(size=size) as pilot:
        await settled(pilot, backend)
        keys = [str(k.value) for k in fleet_table(app).columns]
        assert ("tags" in keys) is has_tags
        assert "worst" in keys
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        gpus = app.screen.query_one(GpuTable)
        await wait_until(pilot, lambda: gpus.row_count == 8)
        assert gpus.region.width <= size[0]


async def test_resize_drops_columns_and_keeps_cursor(
    fake: tuple[FakeBackend, FrozenClock, RigwatchApp],
) -> None:
    backend, _, app = fake
    async with app.run_test(size=(200, 50)) as pilot:
        await settled(pilot, backend)
        await pilot.press("down", "down")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        table = fleet_table(app)
        assert "tags" not in [str(k.value) for k in table.columns]
        assert table.row_count == len(HOSTS)
        assert table.cursor_row == 2
        assert cell(app, "gpu-t02", "temp") == "88 °C"


# ---- real agents -------------------------------------------------------------------------

async def test_demo_fleet_streams_through_real_agents() -> None:
    app = make_app(AgentFleetBackend(demo_fleet()), ConsoleOptions(demo=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: all(h.status is HostStatus.STREAMING
                                            for h in app.fleet.hosts.values()), timeout_s=8.0)
        app.refresh_view()
        await wait_until(pilot, lambda: fleet_table(app).row_count == 8)
        assert "demo fleet" in str(app.screen.query_one("#subtitle", Label).render())
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        await wait_until(pilot, lambda: app.screen.query_one(GpuTable).row_count == 8)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


class BrokenBackend(BackendBase):
    """A backend that fails at once, as a misconfigured transport would."""

    def __init__(self) -> None:
        self.specs = fake_fleet()[0].specs

    async def run(self, emit: object) -> None:
        raise TransportError("ssh: no route to host gpu-t01")


async def test_backend_failure_is_notified_not_fatal() -> None:
    app = make_app(BrokenBackend(), ConsoleOptions(demo=False, title="lab"), clock=FrozenClock())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)))
        text = " ".join(str(t.render()) for t in app.screen.query(Toast))
        assert "no route to host" in text
        assert app.is_running
        assert str(app.screen.query_one("#subtitle", Label).render()) == "lab"
