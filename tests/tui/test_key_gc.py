"""Young collections wait while a key is handled and drawn (#38: fleet keys, ``app_key_gc``).

Proved in order of events, never timed: inside a key's handler the collector is off; it is
on again only after a screen refresh that follows the handler; a key storm holds it off no
longer than ``KEY_GC_HOLD_S``; a collector someone else turned off stays off; without the
streaming settings nothing changes.  Negative controls: without the hold the handler runs
with the collector on; a hold released as the handler ends (before the refresh) is caught.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from textual import events
from textual.screen import Screen

from tests.support.collector_backlog import BacklogBackend
from tui import app_key_gc
from tui.app import make_app
from tui.app_key_gc import KeyFirstGc
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """Whatever a test does, the collector is on after it."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def run_keys(monkeypatch: pytest.MonkeyPatch, *, hold: bool | None, keys: str = "s",
                   at_once: bool = False, off_before: bool = False) -> dict[str, Any]:
    seen: list[str] = []
    paints = [0]
    plain_refresh = Screen._compositor_refresh

    def counted(screen: Screen[Any]) -> None:
        paints[0] += 1
        plain_refresh(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", counted)
    plain_sort = FleetScreen.action_cycle_sort

    def sort(screen: FleetScreen) -> None:
        seen.append(f"key gc={gc.isenabled()} paints={paints[0]}")
        plain_sort(screen)
        if at_once:  # the broken hold: the collector on as the handler ends
            app._resume_gc()

    monkeypatch.setattr(FleetScreen, "action_cycle_sort", sort)
    plain_resume = KeyFirstGc._resume_gc

    def resume(app: KeyFirstGc) -> None:
        if app._gc_held_since is not None:
            seen.append(f"resume paints={paints[0]}")
        plain_resume(app)

    monkeypatch.setattr(KeyFirstGc, "_resume_gc", resume)
    app = make_app(BacklogBackend(2, [], gated=True), ConsoleOptions(demo=False))
    app.gc_hold_enabled = hold
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        if off_before:
            gc.disable()
        assert app._driver is not None
        for key in keys:
            app._driver.send_message(events.Key(key, key))
        for _ in range(40):
            await pilot.pause()
            if len([e for e in seen if e.startswith("key")]) == len(keys) and \
                    app._gc_held_since is None:
                break
        enabled_after = gc.isenabled()
        holds = app.gc_holds
    gc.enable()
    return {"seen": seen, "enabled_after": enabled_after, "holds": holds}


def paints(entry: str) -> int:
    return int(entry.rsplit("paints=", 1)[1])


async def test_the_collector_is_off_in_a_key_and_on_after_its_repaint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run_keys(monkeypatch, hold=True)
    seen = out["seen"]
    assert seen[0].startswith("key gc=False"), seen
    assert seen[1].startswith("resume"), seen
    assert paints(seen[1]) > paints(seen[0]), seen  # a refresh came between
    assert out["enabled_after"] and out["holds"] == 1


async def test_negative_control_without_the_hold_the_key_meets_the_collector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run_keys(monkeypatch, hold=False)
    assert out["seen"][0].startswith("key gc=True"), out["seen"]
    assert out["holds"] == 0 and out["enabled_after"]


async def test_not_tuned_no_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``None`` follows ``gc_policy.tuned``, which a test runner never sets."""
    out = await run_keys(monkeypatch, hold=None)
    assert out["seen"][0].startswith("key gc=True") and out["holds"] == 0


async def test_negative_control_a_hold_released_as_the_handler_ends_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run_keys(monkeypatch, hold=True, at_once=True)
    seen = out["seen"]
    assert seen[0].startswith("key gc=False"), seen
    assert paints(seen[1]) == paints(seen[0]), seen  # what the first test rules out


async def test_a_collector_turned_off_elsewhere_stays_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run_keys(monkeypatch, hold=True, off_before=True)
    assert out["holds"] == 0 and not out["enabled_after"]
    assert not any(e.startswith("resume") for e in out["seen"])


async def test_keys_together_hold_once_and_the_collector_comes_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run_keys(monkeypatch, hold=True, keys="ssss")
    seen = out["seen"]
    keys = [e for e in seen if e.startswith("key")]
    assert len(keys) == 4 and all("gc=False" in e for e in keys), seen
    assert out["enabled_after"] and out["holds"] >= 1


async def test_a_storm_holds_the_collector_no_longer_than_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a bound of 0, every key after the first finds the hold spent and lets the
    collector run (the bound is measured from the first key held)."""
    monkeypatch.setattr(app_key_gc, "KEY_GC_HOLD_S", 0.0)
    out = await run_keys(monkeypatch, hold=True, keys="sss")
    keys = [e for e in out["seen"] if e.startswith("key")]
    assert len(keys) == 3 and any("gc=True" in e for e in keys[1:]), out["seen"]
    assert out["enabled_after"]
