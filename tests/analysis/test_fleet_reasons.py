"""The fleet table tells why: a host that cannot be watched shows its reason in full, how
long ago it was last seen and when it is retried (counting down), its old values dimmed,
and ``R`` retries it now (or says why it cannot).  Checked on the screen's text at 80×24
and 160×48, as an operator would read it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from textual.pilot import Pilot

from probes.errors import DisconnectKind
from probes.wire.events import Disconnected
from tests.support.tui_fakes import (
    HOSTS,
    NOW,
    SAMPLES,
    FakeBackend,
    FrozenClock,
    fake_fleet,
    fleet_items,
    fleet_specs,
    sample,
    settled,
    wait_until,
)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from widgets.fleet_table import FleetDetail, FleetTable
from widgets.fleet_wall import FleetWall
from widgets.header_bar import StatusLine

REFUSED = "connection refused by 127.0.0.1:22209"


def screen_text(app: RigwatchApp) -> list[str]:
    """Every line of the screen as the terminal would show it."""
    strips = app.screen._compositor.render_strips()
    return ["".join(seg.text for seg in strip) for strip in strips]


def detail(app: RigwatchApp) -> str:
    return str(app.screen.query_one(FleetDetail).render())


def status(app: RigwatchApp) -> str:
    lines = app.screen.query(StatusLine)
    return " ".join(str(line.render()) for line in lines if line.display)


async def _down(pilot: Pilot[None], backend: FakeBackend, clock: FrozenClock,
                host: str = "gpu-t03") -> None:
    """``host`` refuses connections (as ssh reports it); the next try is in 30 s."""
    await settled(pilot, backend)
    backend.push(host, Disconnected(clock(), REFUSED, retry_in_s=30,
                                    kind=DisconnectKind.UNREACHABLE))
    table = pilot.app.screen.query_one(FleetTable)
    await wait_until(pilot, lambda: table.get_cell(host, "status").plain == "unreachable")


async def _redraw(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    app.refresh_view()
    await pilot.pause()


async def test_80x24_the_reason_age_and_retry_count_down_are_on_screen() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await _down(pilot, backend, clock)
        await pilot.press("down", "down")  # the cursor on gpu-t03
        clock.now = NOW + 10
        await _redraw(pilot)
        text = "\n".join(screen_text(app))
        assert "unreachable" in text
        # the reason column is cut at 80 columns; the detail line under the table is not
        lines = screen_text(app)
        assert any(line.strip() == "gpu-t03 · UNREACHABLE · last seen 10 s ago · next retry in "
                   "20 s" for line in lines), text
        assert any(line.strip() == REFUSED for line in lines), text
        clock.now = NOW + 25
        await _redraw(pilot)
        assert "next retry in 5 s" in "\n".join(screen_text(app))
        clock.now = NOW + 150
        await _redraw(pilot)
        text = "\n".join(screen_text(app))
        assert "last seen 2 m ago" in text and "retrying now" in text
        # nothing covers the table: the detail line is below its last row
        table = app.screen.query_one(FleetTable)
        assert app.screen.query_one(FleetDetail).region.y >= table.region.y + len(HOSTS) + 1


async def test_160x48_the_reason_is_whole_in_its_column() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _down(pilot, backend, clock)
        row = next(line for line in screen_text(app) if line.lstrip().startswith("gpu-t03"))
        assert "unreachable" in row and REFUSED in row
        table = app.screen.query_one(FleetTable)
        assert table.get_cell("gpu-t03", "worst").plain == REFUSED


async def test_old_values_are_dimmed_never_in_live_colours() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await _down(pilot, backend, clock, host="gpu-t02")  # gpu-t02 runs a GPU at 88 °C
        table = app.screen.query_one(FleetTable)
        old = table.get_component_rich_style("cell--old", partial=True)
        hot = table.get_component_rich_style("cell--hot", partial=True)
        for column in ("gpus", "temp", "mem", "util"):
            assert table.get_cell("gpu-t02", column).style == old, column
        assert table.get_cell("gpu-t02", "temp").plain == "88 °C"  # the value stays, dim
        assert old != hot and old.color != hot.color
        assert old.dim
        # a streaming host keeps its live colours
        assert table.get_cell("gpu-t01", "temp").style != old
        # and a host gone quiet (stale) is dimmed as well, with its age in the Status column
        clock.now = NOW + 10
        for host in ("gpu-t01", "gpu-t02"):
            backend.push(host, sample(host, SAMPLES))
        await wait_until(pilot, lambda: app.fleet.hosts["gpu-t01"].last is not None
                         and app.fleet.hosts["gpu-t01"].last.seq == SAMPLES)
        await _redraw(pilot)
        assert table.get_cell("gpu-t03", "status").plain == "stale 10 s"
        assert table.get_cell("gpu-t03", "temp").style == old
        assert table.get_cell("gpu-t01", "temp").style != old


class RetryingBackend(FakeBackend):
    """A live backend whose sessions can be woken: remembers whom it was asked to retry."""

    def __init__(self) -> None:
        super().__init__(fleet_specs(), fleet_items())
        self.retried: list[str] = []

    def retry_now(self, host: str) -> bool:
        self.retried.append(host)
        return True


async def test_r_retries_the_selected_host_and_says_so() -> None:
    backend = RetryingBackend()
    clock = FrozenClock()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await _down(pilot, backend, clock)
        await pilot.press("down", "down", "R")
        assert backend.retried == ["gpu-t03"]
        await wait_until(pilot, lambda: "retrying gpu-t03 now" in status(app))
        assert "retrying gpu-t03 now" in "\n".join(screen_text(app))
        # on the wall, R takes the host under the wall's cursor
        await pilot.press("w", "R")
        assert len(backend.retried) == 2


@pytest.mark.parametrize(("replay", "said"), [
    (False, "cannot retry gpu-t03 now"),
    (True, "cannot retry in a replay"),
])
async def test_r_where_nothing_can_be_retried_says_why(replay: bool, said: str) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await _down(pilot, backend, clock)
        if replay:  # as a recording's backend: it has replay controls
            backend.replay = SimpleNamespace()
        await pilot.press("down", "down", "R")
        await wait_until(pilot, lambda: said in status(app))


async def test_streaming_host_shows_its_worst_finding_led_by_the_verdict() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)
        await pilot.press("down")
        await _redraw(pilot)
        row = next(line for line in screen_text(app) if line.lstrip().startswith("gpu-t02"))
        assert "GPU3 LOST" in row  # the verdict survives the 80-column cut
        assert detail(app).startswith("gpu-t02 · GPU3 LOST · Xid 79")
        assert "more)" in detail(app)


async def test_the_wall_says_why_for_the_host_under_its_cursor() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _down(pilot, backend, clock)
        await pilot.press("w")
        wall = app.screen.query_one(FleetWall)
        wall.move_cursor("gpu-t02")
        await _redraw(pilot)
        assert "GPU3 LOST · Xid 79" in wall.text_lines()[-1]
        clock.now = NOW + 10
        wall.move_cursor("gpu-t03")
        await _redraw(pilot)
        status_line = wall.text_lines()[-1]
        assert "gpu-t03" in status_line and "down" in status_line
        assert f"{REFUSED} · last seen 10 s ago · next retry in 20 s" in status_line


async def test_the_filter_finds_hosts_by_their_reason() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await _down(pilot, backend, clock)
        await pilot.press("slash", *"refused", "enter")
        table = app.screen.query_one(FleetTable)
        await wait_until(pilot, lambda: table.row_count == 1)
        assert [str(k.value) for k in table.rows] == ["gpu-t03"]
        await pilot.press("escape")
        await wait_until(pilot, lambda: table.row_count == len(HOSTS))
        await pilot.press("slash", *"lost", "enter")  # the verdict in a headline
        await wait_until(pilot, lambda: [str(k.value) for k in table.rows] == ["gpu-t02"])
