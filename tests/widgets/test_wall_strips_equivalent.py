"""The wall repaints only the lines whose look changed, and every screen is as before.

Issue 38 (session 13): each tick handed the wall a new view and the wall dropped every kept
strip and repainted the whole widget (at a thousand hosts, ~46 lines of ~150 segments
each through the compositor every second).  Now a view packed like the last one (the same
hosts in the same places) keeps the strips of the grid rows on screen whose look (glyphs,
style names, the cursor's place) is unchanged and repaints only the other lines
(``FleetWall._update_in_place``); a cursor move repaints its two rows and the status line;
a row's cells of one style are joined into one segment.

Textual keeps every line it drew until a region over it is refreshed, so a line this code
forgets to mark stays stale on the terminal while every strip the wall would draw is right.
Two checks, after every step of a random run (new views with a share of hosts' readings,
statuses, findings and GPU verdicts moved; hosts joining and leaving; the metric; cursor
keys; scrolls; resizes; the wall hidden and shown; a theme switch):

* the screen as the compositor shows it (kept lines included) equals the screen drawn
  afresh (every kept line and strip dropped), segment by segment, styles included;
* it equals the screen of the wall before this change (``fleet_wall_before_s13``) driven
  through the same steps.

Negative control: a wall that forgets to repaint one of the lines it found changed is
caught by both.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget

from probes.analysis.judge import GpuVerdict, TempLevel
from tests.widgets import fleet_wall_before_s13 as before
from tests.widgets.test_table_paint import screen_of
from tests.widgets.test_widget_fleet_wall import WallApp
from widgets._wall_layout import WallGpu, WallHost, WallView
from widgets.fleet_wall import FleetWall

STEPS = 70
SIZES = [(60, 16), (70, 18), (52, 14)]
KEYS = ["down", "up", "left", "right", "H", "L", "pagedown", "pageup", "home", "end",
        "down", "right"]
TAGS = ("rack-a", "rack-b", "rack-c")
STATUSES = ("streaming",) * 8 + ("down", "stale", "connecting")
VERDICTS = (GpuVerdict.OK,) * 12 + (GpuVerdict.HOT, GpuVerdict.THROTTLED, GpuVerdict.LOST,
                                    GpuVerdict.LEAKING)


class AnyWallApp(WallApp):
    """``WallApp`` with the wall class to test."""

    def __init__(self, wall: type[Any]) -> None:
        super().__init__()
        self.wall_class = wall

    def compose(self) -> ComposeResult:
        yield self.wall_class()


def _gpu(rng: random.Random) -> WallGpu:
    return WallGpu(float(rng.randrange(0, 100)), rng.choice(VERDICTS),
                   rng.choice((TempLevel.OK, TempLevel.OK, TempLevel.WARM, TempLevel.HOT)),
                   rng.random() < 0.1)


def _host(name: str, rng: random.Random) -> WallHost:
    return WallHost(name, rng.choice(TAGS), "streaming", tuple(_gpu(rng) for _ in range(8)),
                    rng.choice((None, None, "warning", "critical")), f"note {name}")


def _moved(h: WallHost, rng: random.Random) -> WallHost:
    """``h`` a second later: readings moved by a little (a glyph changes now and then),
    now and then its status, worst finding or a GPU's verdict."""
    gpus = tuple(g._replace(value=None if g.value is None else
                            max(0.0, min(100.0, g.value + rng.uniform(-4, 4))))
                 for g in h.gpus)
    roll = rng.random()
    if roll < 0.06:
        h = h._replace(status=rng.choice(STATUSES))
    elif roll < 0.1:
        h = h._replace(worst=rng.choice((None, "warning", "critical", "info")))
    elif roll < 0.14 and gpus:
        i = rng.randrange(len(gpus))
        gpus = (*gpus[:i], _gpu(rng), *gpus[i + 1:])
    elif roll < 0.16:
        gpus = gpus[:-1]  # a GPU stopped answering
    return h._replace(gpus=gpus, note=f"note {h.name} {rng.randrange(3)}")


def _kept_state(app: App[Any]) -> list[tuple[Any, ...]]:
    """Every widget's kept lines, and the wall's own strips: what a fresh draw drops."""
    out: list[tuple[Any, ...]] = []
    for w in app.screen.walk_children(Widget, with_self=True):
        cache = w._styles_cache
        out.append((cache, dict(cache._cache), set(cache._dirty_lines), cache._width))
    return out


def _fresh(app: App[Any], wall: Any) -> Any:
    """The screen drawn afresh (every kept line and strip dropped), then everything kept put
    back as it was, so that the next step starts from the wall's own state."""
    kept = _kept_state(app)
    own = {k: getattr(wall, k) for k in ("_strips", "_built", "_legend", "_status",
                                         "_status_parts") if hasattr(wall, k)}
    own = {k: (dict(v) if isinstance(v, dict) else v) for k, v in own.items()}
    for cache, *_ in kept:
        cache.clear()
    wall._drop_strips()
    picture = screen_of(app)
    for cache, lines, dirty, width in kept:
        cache._cache, cache._dirty_lines, cache._width = lines, dirty, width
    for k, v in own.items():
        setattr(wall, k, v)
    return picture


async def drive(wall_class: type[Any], seed: int, until_stale: bool = False
                ) -> tuple[list[Any], int, int]:
    """(each step's screen, steps whose screen was not what a fresh draw shows, lines the
    wall repainted one by one)."""
    rng = random.Random(seed)
    names = [f"node-{i:03d}" for i in range(80)]
    hosts = {n: _host(n, rng) for n in names}
    spare = iter(f"node-{i:03d}" for i in range(80, 200))
    metric = "mem"
    size = SIZES[0]
    app = AnyWallApp(wall_class)
    shots: list[Any] = []
    stale = 0
    async with app.run_test(size=size) as pilot:
        wall = app.query_one(wall_class)
        wall.view = WallView(metric, tuple(hosts.values()))
        await pilot.pause()
        for _ in range(STEPS):
            roll = rng.random()
            if roll < 0.45:  # a tick: a share of the hosts moved, some handed back equal
                share = rng.choice((0.05, 0.3, 1.0))
                for n in list(hosts):
                    if rng.random() < share:
                        hosts[n] = _moved(hosts[n], rng)
                    elif rng.random() < 0.1:
                        hosts[n] = hosts[n]._replace()  # equal, not the same object
            elif roll < 0.5:  # hosts join or leave (a new packing)
                if rng.random() < 0.5:
                    n = next(spare)
                    hosts[n] = _host(n, rng)
                else:
                    del hosts[rng.choice(list(hosts))]
            elif roll < 0.55:
                metric = rng.choice([m for m in ("mem", "temp", "util", "status") if m != metric])
            elif roll < 0.8:
                await pilot.press(rng.choice(KEYS))
            elif roll < 0.87:
                wall.scroll_to(y=rng.randrange(0, 12), animate=False)
            elif roll < 0.91:
                size = rng.choice([s for s in SIZES if s != size])
                await pilot.resize_terminal(*size)
            elif roll < 0.96:  # hidden, a tick while hidden, shown again
                wall.display = False
                await pilot.pause()
                for n in list(hosts)[::3]:
                    hosts[n] = _moved(hosts[n], rng)
                wall.view = WallView(metric, tuple(hosts.values()))
                await pilot.pause()
                wall.display = True
            else:
                app.theme = ("rigwatch-light" if app.theme != "rigwatch-light"
                             else "rigwatch-dark")
            wall.view = WallView(metric, tuple(hosts.values()))
            await pilot.pause()
            await pilot.pause()
            picture = screen_of(app)
            if picture != _fresh(app, wall):
                stale += 1
                if until_stale:
                    break
            shots.append((wall.cursor, picture))
    return shots, stale, getattr(wall, "lines_refreshed", 0)


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_screen_is_a_fresh_draw_and_the_wall_before(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    in_place = [0, 0]
    plain = FleetWall._update_in_place

    def counted(self: FleetWall, *args: Any) -> bool:
        done = plain(self, *args)
        in_place[done] += 1
        return done

    monkeypatch.setattr(FleetWall, "_update_in_place", counted)
    new, stale, lines = await drive(FleetWall, seed)
    old, stale_before, _ = await drive(before.FleetWall, seed)
    assert stale == 0 and stale_before == 0
    differ = [i for i, (a, b) in enumerate(zip(new, old, strict=True)) if a != b]
    assert differ == []
    # the run went through views of the same shape (some lines kept, some repainted) and
    # through views that re-packed the wall
    assert in_place[True] > 15 and in_place[False] > 5 and lines > 30, (in_place, lines)


class ForgetfulWall(FleetWall):
    """Negative control: the first of the lines found changed is not repainted."""

    def _refresh_lines(self, lines: list[int]) -> None:
        super()._refresh_lines(sorted(set(lines))[1:])


async def test_a_wall_that_forgets_a_changed_line_is_caught() -> None:
    ForgetfulWall.__name__ = "FleetWall"  # the stylesheet's rules name the class
    bad, stale, _ = await drive(ForgetfulWall, 1)
    old, _, _ = await drive(before.FleetWall, 1)
    assert stale > 0
    assert any(a != b for a, b in zip(bad, old, strict=False))
