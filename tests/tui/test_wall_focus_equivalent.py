"""The wall brings up to date only the hosts it shows, and every screen is as before.

Issue 38 (session 12): on the wall every host's row was built each tick (``FleetRows.focus``
None), ~1000 rows a second at a thousand hosts, where a 160x48 wall shows about half of
them.  Now the wall's focus is the hosts in its grid rows on screen
(``widgets.fleet_wall.visible_hosts``), the others' rows wait as the table's do, and its
cells are kept while a host's row is (``wall_view``'s ``kept``); hosts that come on screen
are drawn again at once (``FleetScreen._wall_seen``).  Here one console is driven twice
through the same fleet evolution (samples whose numbers move, GPUs turning hot and
throttled and back, on a random share of the hosts each second) and the same random keys
(table and wall moves, page and end keys, sort orders, the wall on and off, its metric, a
resize): once as now, once with the screen's redraw as before
(``tests.tui.wall_focus_before_s12``).  After each step and the tick that follows, the
screen (every segment and its style), the cursors, the sort order and the header's totals
are equal.  Negative control: a wall that counts only the host under its cursor as seen
leaves stale cells on screen (caught).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from probes.analysis.alerts import AlertPolicy
from probes.wire.samples import HostSample
from tests.support.tui_fakes import TALL, sample, tall_fleet, tall_fleet_shown, wait_until
from tests.tui import wall_focus_before_s12 as before
from tests.widgets.test_table_paint import screen_of
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens import fleet as fleet_screen
from tui.screens.fleet import FleetScreen
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall
from widgets.fleet_wall import visible_hosts as wall_visible_hosts

QUIET = AlertPolicy(notify=False, bell=False)
STEPS = 36
SIZES = [(60, 16), (70, 18), (52, 14)]
TABLE_KEYS = ["down", "pagedown", "end", "home", "s", "w", "w"]
WALL_KEYS = ["down", "up", "pagedown", "pageup", "end", "home", "L", "H", "m", "s", "w",
             "resize"]


def _sample(host: str, step: int, rng: random.Random) -> HostSample:
    trouble = 3 if rng.random() < 0.15 else None  # hot, throttled, a narrowed link
    s = sample(host, step, trouble_gpu=trouble)
    return replace(s, gpus=tuple(replace(g, power_w=float(rng.randrange(200, 700)),
                                         temp_c=g.temp_c + rng.randrange(0, 6))
                                 for g in s.gpus))


async def drive(seed: int) -> tuple[list[Any], int]:
    """(each step's picture, steps whose wall showed only some of the hosts)."""
    rng = random.Random(seed)
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True, alerts=QUIET), clock=clock)
    app.notify = lambda *_a, **_k: None  # type: ignore[method-assign]  # toasts: wall-clock timed
    shots: list[Any] = []
    partial = 0
    size = SIZES[0]
    async with app.run_test(size=size) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        assert isinstance(screen, FleetScreen)
        step = 0
        for _ in range(STEPS):
            if rng.random() < 0.5:  # a second: a share of the hosts send a sample
                step += 1
                share = rng.choice([0.2, 0.6, 1.0])
                sent = [h for h in TALL if rng.random() < share]
                for h in sent:
                    backend.push(h, _sample(h, step, rng))
                clock.now += 1.0
                await wait_until(pilot, lambda s=step, hs=sent: all(  # type: ignore[misc]
                    app.fleet.hosts[h].last.seq == s for h in hs))  # type: ignore[union-attr]
            else:
                key = rng.choice(WALL_KEYS if screen.wall else TABLE_KEYS)
                if key == "resize":
                    size = rng.choice([s for s in SIZES if s != size])
                    await pilot.resize_terminal(*size)
                else:
                    await pilot.press(key)
            await pilot.pause()
            app.refresh_view()  # the tick after the step
            picture = await _settled(pilot)
            wall = screen.query_one(FleetWall)
            table = screen.query_one(FleetTable)
            if screen.wall:
                seen = wall_visible_hosts(wall)
                partial += seen is not None and 0 < len(seen) < len(TALL)
            shots.append((screen.wall, screen.sort_key, screen.metric, wall.cursor, table.scroll_y,
                          table.cursor_row, table.line_at_cursor().row.name  # type: ignore[union-attr]
                          if table.line_at_cursor() is not None else None,
                          app.fleet_rows.totals(clock.now), picture))
    return shots, partial


async def _settled(pilot: Any) -> Any:
    """The screen once it stays the same over a few turns of the loop (the crumb's line,
    the table's size and scrollbar are laid out on idle: a loaded machine takes longer)."""
    picture = screen_of(pilot.app)
    same = 0
    for _ in range(100):
        await pilot.pause(0.02)
        now = screen_of(pilot.app)
        same = same + 1 if now == picture else 0
        picture = now
        if same >= 3:
            break
    return picture


def _as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FleetScreen, "_fresh_rows", before.fresh_rows_before)
    monkeypatch.setattr(FleetScreen, "_draw", before.draw_before)
    monkeypatch.setattr(FleetScreen, "_wall_seen", before.wall_seen_before)


def _differ(new: list[Any], old: list[Any]) -> list[int]:
    assert len(new) == len(old)
    return [i for i, (a, b) in enumerate(zip(new, old, strict=True)) if a != b]


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_screen_equals_the_redraw_before(seed: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    new, partial = await drive(seed)
    with monkeypatch.context() as m:
        _as_before(m)
        old, _ = await drive(seed)
    assert partial > 3, "the wall showed only some hosts in a few steps at least"
    assert sum(1 for s in new if s[0]) > 5, "steps on the wall"
    assert _differ(new, old) == []


async def test_a_wall_that_sees_only_its_cursor_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def cursor_only(wall: FleetWall, margin: int = 1) -> frozenset[str] | None:
        cursor = wall.cursor
        return frozenset({cursor[0]}) if cursor is not None else None

    with monkeypatch.context() as m:
        m.setattr(fleet_screen, "wall_visible_hosts", cursor_only)
        new, _ = await drive(1)
    with monkeypatch.context() as m:
        _as_before(m)
        old, _ = await drive(1)
    assert _differ(new, old)


async def _scrolled_asks() -> tuple[int, bool]:
    """(redraws asked after ``end`` on the wall, the last host waiting before it)."""
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True, alerts=QUIET), clock=clock)
    async with app.run_test(size=SIZES[2]) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        await pilot.press("w")
        await _settled(pilot)
        app.refresh_view()
        await _settled(pilot)
        rng = random.Random(5)
        for h in TALL:
            backend.push(h, _sample(h, 1, rng))
        clock.now += 1.0
        await wait_until(pilot, lambda: all(
            app.fleet.hosts[h].last.seq == 1 for h in TALL))  # type: ignore[union-attr]
        app.refresh_view()
        await _settled(pilot)
        waited = app.fleet_rows.waiting_among(frozenset({TALL[-1]}))
        due = [0]
        request_redraw = app._request_redraw

        def counted() -> None:  # the ask itself: its redraw may wait REDRAW_MIN_S
            due[0] += 1
            request_redraw()

        app._request_redraw = counted  # type: ignore[method-assign]
        await pilot.press("end")
        await _settled(pilot)
        for _ in range(25):  # the ask comes after the paint in hand: up to 0.5 s more
            if due[0]:
                break
            await pilot.pause(0.02)
        assert screen.wall
        return due[0], waited


async def test_hosts_scrolled_onto_the_wall_are_drawn_again_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked, waited = await _scrolled_asks()
    assert waited and asked > 0
    with monkeypatch.context() as m:  # control: a screen that does not look
        m.setattr(FleetScreen, "_wall_seen", before.wall_seen_before)
        asked, waited = await _scrolled_asks()
    assert waited and asked == 0
