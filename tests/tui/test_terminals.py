"""Every screen opens under NO_COLOR, --ascii and TERM=linux at 80×24 (issue #19 item 5).

One app run per environment walks them all: the fleet, the wall, a host with each of its
six panels alone, triage, preflight and help; each must render (through the same line
filters a terminal gets: Textual's NO_COLOR monochrome filter, rigwatch's plain glyphs)
and show its own text.  ``NO_COLOR`` is read by Textual when the app is built, and
``TERM=linux`` turns on plain glyphs the way ``rigwatch`` does (``tui.glyphs.wants_ascii``).
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from probes.analysis.alerts import AlertPolicy
from tests.support.tui_fakes import sim_fleet, wait_until
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.glyphs import wants_ascii
from tui.messages import HostChosen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.host import PANELS, SHOWN_AT_START, HostScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen
from widgets.fleet_table import FleetTable
from widgets.gpu_table import GpuTable

HOSTS = [("gpu-a01", "healthy"), ("gpu-a02", "leak:3"), ("gpu-a03", "throttle:5"),
         ("gpu-b02", "xid79:6@600")]
MINUTES = 45
SIZE = (80, 24)
ENVIRONMENTS = {
    "no-color": ({"NO_COLOR": "1"}, False),
    "ascii": ({}, True),
    "term-linux": ({"TERM": "linux"}, False),
}
"""Name: (environment, ``--ascii``)."""
PANEL_TEXT = {"memory": "GPU memory growth", "thermal": "Thermals and power",
              "topology": "GPU0", "iostat": "%util", "processes": "python",
              "host": "Findings", "network": "mlx5_0/1"}


def screen_text(app: RigwatchApp) -> str:
    """What the terminal would show, rendered through the app's line filters."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def _shows(pilot: Pilot[None], needle: str) -> str:
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    for _ in range(100):
        await pilot.pause(0.02)
        text = screen_text(app)
        if needle in text:
            return text
    raise AssertionError(f"{needle!r} not shown on {type(app.screen).__name__}:\n{text}")


async def _on(pilot: Pilot[None], screen: type) -> None:
    """Wait until ``screen`` is on top: a key that opens a screen may push it a little later
    (a busy machine), and the next key must not reach the screen below."""
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, screen))


async def _walk(pilot: Pilot[None], plain: bool) -> list[str]:
    """Every screen and panel in turn; returns what each showed."""
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    seen = [await _shows(pilot, "gpu-b02")]
    await pilot.press("w")
    seen.append(await _shows(pilot, "rack-s (4 hosts)"))
    await pilot.press("w")
    app.post_message(HostChosen("gpu-b02"))
    await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                     and app.screen.query_one(GpuTable).row_count == 8)
    seen.append(await _shows(pilot, "LOST"))
    await pilot.press("escape")
    await _on(pilot, FleetScreen)
    # the leaking host: its memory chart is drawn (the NO_COLOR crash was in its canvas)
    app.post_message(HostChosen("gpu-a02"))
    await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                     and app.screen.host == "gpu-a02")
    seen.append(await _shows(pilot, "leaking"))
    keys = dict(zip(PANELS, "1234567", strict=True))
    for shown in sorted(SHOWN_AT_START):
        await pilot.press(keys[shown])
    for panel in PANELS:
        await pilot.press(keys[panel])  # shows it and scrolls to it
        seen.append(await _shows(pilot, PANEL_TEXT[panel]))
        await pilot.press(keys[panel])
    await pilot.press("escape")
    await _on(pilot, FleetScreen)
    await pilot.press("t")
    await _on(pilot, TriageScreen)
    seen.append(await _shows(pilot, "First failure"))
    await pilot.press("escape")
    await _on(pilot, FleetScreen)
    await pilot.press("p")
    await _on(pilot, PreflightScreen)
    seen.append(await _shows(pilot, "gpu-b02"))
    await pilot.press("escape")
    await _on(pilot, FleetScreen)
    await pilot.press("question_mark")
    await _on(pilot, HelpScreen)
    seen.append(await _shows(pilot, "keys"))
    await pilot.press("escape")
    if plain:
        for text in seen:
            assert not set(text) & set("⣿⠉⣀█▁▂▃▄▅▆▇┃━°"), text
    return seen


@pytest.mark.parametrize("name", ENVIRONMENTS)
async def test_every_screen_opens(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env, ascii_flag = ENVIRONMENTS[name]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    backend, clock = sim_fleet(HOSTS, minutes=MINUTES)
    app = make_app(backend, ConsoleOptions(  # ascii as ``rigwatch --ascii`` sets it
        demo=True, alerts=AlertPolicy(notify=False, bell=False),
        ascii_glyphs=ascii_flag or wants_ascii()), clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        assert app.no_color is (name == "no-color")
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                            for h in app.fleet.hosts.values()))
        app.refresh_view()
        await wait_until(pilot, lambda: app.screen.query_one(FleetTable).row_count == len(HOSTS))
        seen = await _walk(pilot, app.ascii_glyphs)
        assert len(seen) == 4 + len(PANELS) + 3
    assert app.return_code in (None, 0)
