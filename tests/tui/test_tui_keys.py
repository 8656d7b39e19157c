"""Keys and chrome at 80×24: help lists every binding (generated from them), the footer
fits, Esc leaves the wall, ``T`` and ``:window`` answer, the palette offers rigwatch's
themes only, and notices take a line of their own instead of covering the data."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.dom import DOMNode
from textual.selection import Selection
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast

from probes.analysis.alerts import AlertPolicy
from tests.support.screens import screen_lines
from tests.support.tui_fakes import fake_fleet, settled, wait_until
from themes import THEME_CYCLE
from tui.app import HELP_SCREENS, RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen, own_bindings
from tui.screens.host import HostScreen
from tui.screens.triage import TriageScreen
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall
from widgets.header_bar import StatusLine

REPORT = ("/home/oncall/.local/share/rigwatch/reports/20261203T211500Z-gpu-b02.md "
          "(and .json)")


@pytest.fixture
def app() -> RigwatchApp:
    backend, clock = fake_fleet()
    # alerts would put their own notice on the status line at the first tick: off here
    # (tests/tui/test_tui_alerts.py has them)
    return make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False)),
                    clock=clock)


def status(app: RigwatchApp) -> str:
    return " ".join(str(s.render()) for s in app.screen.query(StatusLine) if s.display)


def help_keys(help_screen: HelpScreen) -> set[str]:
    """Every key the help lists, ranges (``1–4``) expanded."""
    keys: set[str] = set()
    for section in help_screen.sections:
        for shown, _ in section.lines:
            for token in shown.split():
                if "–" in token and token.replace("–", "").isdigit():
                    first, last = token.split("–")
                    keys.update(str(i) for i in range(int(first), int(last) + 1))
                else:
                    keys.add(token)
    return keys


def every_binding() -> list[tuple[str, Binding]]:
    owners: list[tuple[str, type[DOMNode]]] = [("app", RigwatchApp), *HELP_SCREENS]
    return [(title, b) for title, cls in owners for b in own_bindings(cls) if not b.system]


async def test_help_lists_every_binding_of_the_app_and_every_screen(app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = help_keys(app.screen)
        missing = [(title, b.key) for title, b in every_binding()
                   if app.get_key_display(b) not in listed]
        assert missing == []
        # the keys a k9s or htop user looks for first, replay keys included
        for key in ("s", "/", "w", "m", "1", "6", "tab", ":", "R", "T", "?", "esc", "^p",
                    "space", "@", "[", "]", "<", ">", "+", "-"):
            assert key in listed, key
        # the screen it was opened from comes first, and the box fits 80×24
        assert app.screen.sections[0].title == "Fleet"
        box = app.screen.query_one("#help-box")
        assert box.region.right <= 80 and box.region.bottom <= 24
        await pilot.press("escape")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.sections[0].title == "Host"
        assert "Next panel" in app.screen.text() or "next panel" in app.screen.text()


@pytest.mark.parametrize("where", ["fleet", "wall", "host", "triage"])
async def test_footer_fits_80_columns(app: RigwatchApp, where: str) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        press = {"fleet": (), "wall": ("w",), "host": ("enter",), "triage": ("t",)}[where]
        await pilot.press(*press)
        # the footer composes its keys a frame after the screen: wait for them (a busy
        # machine once took longer than a fixed pause)
        want = {"host": HostScreen, "triage": TriageScreen}.get(where, FleetScreen)
        await wait_until(pilot, lambda: isinstance(app.screen, want) and any(
            k.display and not k.has_class("-command-palette")
            for k in app.screen.query_one(Footer).query(FooterKey)))
        await pilot.pause(0.1)
        footer = app.screen.query_one(Footer)
        keys = [k for k in footer.query(FooterKey) if k.display]
        palette = [k for k in keys if k.has_class("-command-palette")]
        shown = [k for k in keys if k not in palette]
        assert shown, where
        # every key ends before the palette hint at the right edge (if it has room): none
        # is cut off
        end = palette[0].region.x if palette else 80
        assert max(k.region.right for k in shown) <= end, \
            (where, [(k.key, k.region) for k in keys])
        assert "Help" in " ".join(k.description for k in shown)


async def test_esc_leaves_the_wall(app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await pilot.press("w")
        assert screen.wall and screen.query_one(FleetWall).display
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen) and not screen.wall
        assert screen.query_one(FleetTable).display and not screen.query_one(FleetWall).display
        assert screen.query_one(FleetTable).has_focus


async def test_t_says_which_theme_is_on_and_the_palette_offers_only_ours(
        app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        assert set(app.available_themes) == set(THEME_CYCLE)
        await pilot.press("T")
        await wait_until(pilot, lambda: "theme: light" in status(app))
        assert app.theme == "rigwatch-light"
        app.run_command("theme high-contrast")
        await wait_until(pilot, lambda: "theme: high-contrast" in status(app))


async def test_window_on_the_fleet_screen_answers(app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        await pilot.press("colon", *"window 6h", "enter")
        await wait_until(pilot, lambda: "chart window: the last 6h" in status(app))
        assert app.window_s == 6 * 3600
        assert isinstance(app.screen, FleetScreen)


async def test_a_report_path_is_on_one_line_and_errors_still_toast_small(
        app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        table = app.screen.query_one(FleetTable)
        rows_before = table.region.height
        # what the triage screen says after `r`
        app.notify(REPORT, title="Report written", timeout=10, markup=False)
        await wait_until(pilot, lambda: "Report written" in status(app))
        await pilot.pause()
        path = REPORT.split()[0]
        assert any(path in line for line in screen_lines(app)), screen_lines(app)
        assert not app.screen.query(Toast)
        line = app.screen.query_one(StatusLine)
        # selecting the line (mouse, then ^c) copies the path whole, not as wrapped
        selected = line.get_selection(Selection(None, None))
        assert selected is not None and path in selected[0]
        assert line.region.y >= table.region.bottom  # it took rows, it covers none
        assert table.region.height < rows_before
        app.notify("backend stopped", severity="error", markup=False)
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)))
        await pilot.pause()
        assert all(t.region.width <= 48 for t in app.screen.query(Toast))


async def test_notice_follows_to_the_next_screen(app: RigwatchApp) -> None:
    backend = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)  # type: ignore[arg-type]
        app.say("sorted by worst")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await wait_until(pilot, lambda: "sorted by worst" in status(app))
