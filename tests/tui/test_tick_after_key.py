"""The 1 Hz tick waits for a key in flight to be drawn (#38: fleet keys).

A tick at a thousand hosts takes tens of milliseconds; when it came between a key's hops
(the focused widget, the screen, the app) the key's repaint waited for all of it.  Proved
in order of events, never timed: the tick fires inside a key's handler (the key is in
flight), and the redraw runs after the handler and after a screen refresh; negative
control: the old tick redraws at once, inside the key's handling.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual.screen import Screen

from tests.support.collector_backlog import BacklogBackend
from tui.app import RigwatchApp, make_app
from tui.app_tick import KeyFirstTick
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen


def redraw_at_once(app: RigwatchApp) -> None:
    """The tick before: redraw and check alerts, whatever is in flight."""
    app.refresh_view()
    app.check_alerts()


async def order_of(monkeypatch: pytest.MonkeyPatch, old_tick: bool) -> list[str]:
    events_seen: list[str] = []
    paints = [0]
    if old_tick:
        monkeypatch.setattr(KeyFirstTick, "_tick", redraw_at_once)
    plain_refresh = Screen._compositor_refresh

    def counted(screen: Screen[Any]) -> None:
        paints[0] += 1
        plain_refresh(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", counted)
    plain_sort = FleetScreen.action_cycle_sort

    def sort(screen: FleetScreen) -> None:
        events_seen.append("key")
        screen.app._tick()  # type: ignore[attr-defined]  # the timer fires mid-key
        plain_sort(screen)
        events_seen.append(f"key done, {paints[0]} paints")

    monkeypatch.setattr(FleetScreen, "action_cycle_sort", sort)
    app = make_app(BacklogBackend(2, [], gated=True), ConsoleOptions(demo=False))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        plain_redraw = app.refresh_view

        def redraw() -> None:
            events_seen.append(f"tick, {paints[0]} paints")
            plain_redraw()

        app.refresh_view = redraw  # type: ignore[method-assign]
        assert app._driver is not None
        app._driver.send_message(events.Key("s", "s"))
        for _ in range(20):
            await pilot.pause()
            if any(e.startswith("tick") for e in events_seen):
                break
    return events_seen


def paints_at(seen: list[str], what: str) -> tuple[int, int]:
    at = next(i for i, e in enumerate(seen) if e.startswith(what))
    return at, int(seen[at].split(", ")[1].split()[0])


async def test_a_tick_during_a_key_redraws_after_the_keys_repaint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = await order_of(monkeypatch, old_tick=False)
    key_at, key_paints = paints_at(seen, "key done")
    tick_at, tick_paints = paints_at(seen, "tick")
    assert tick_at > key_at, seen
    assert tick_paints > key_paints, seen  # the screen was refreshed in between


async def test_the_negative_control_the_old_tick_redraws_inside_the_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = await order_of(monkeypatch, old_tick=True)
    assert paints_at(seen, "tick")[0] < paints_at(seen, "key done")[0], seen
