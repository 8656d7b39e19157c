"""A host-screen panel key feeds the one panel it shows, not the whole screen (issue 38).

Before session 14 every panel key (``1``-``7``) and a GPU picked in the memory panel redrew
the whole host screen: each shown panel's view built from the history again and redrawn,
20-40 ms of the key's handler at 1024 hosts, and the repaint of all it changed.  Now the key
feeds only the panel it shows (``HostScreen._redraw_panel``); the tick brings the rest up to
date each second, as it did.

Equivalence with the screen as it was (``host_screen_before_s14``: the whole redraw where
``_redraw_panel`` is called), the same keys on the same simulated hosts in two consoles:

* data that has not moved since the last redraw: the screen is the same after every key;
* a sample arriving before each key (not yet redrawn): the screen is the same once the next
  redraw has run (the body scrolled to its top in both: a key that hides a panel clamps the
  scroll against the layout of that moment, which may differ by the lines a newer finding
  takes), and the panel the key showed was fed the same right after the key.

Negative control: a panel key that feeds nothing (``HostScreenFeedsNothing``) shows a
different screen, so the comparison can fail.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest
from textual.pilot import Pilot

from probes.analysis.alerts import AlertPolicy
from probes.config.fleet import HostSpec
from probes.wire.events import SessionItem
from probes.wire.samples import HostSample
from tests.support.tui_fakes import FakeBackend, FrozenClock, sim_items, wait_until
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tests.tui.host_screen_before_s14 import HostScreenBeforeS14, HostScreenFeedsNothing
from tui import app_screens
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import PANELS, HostScreen
from widgets.gpu_table import GpuTable
from widgets.memory_growth import MemoryGrowth

HOSTS = [("gpu-a01", "healthy"), ("gpu-a03", "throttle:5@600,leak:3@300")]
OPEN = "gpu-a03"
MINUTES = 30
LATER = 8
"""Samples held back per host, pushed one before each key in the moving case."""
SIZE = (160, 48)
SEED = 14
ScreenClass = type[HostScreen]


def _fleet() -> tuple[FakeBackend, FrozenClock, dict[str, list[list[SessionItem]]]]:
    """The sim fleet of ``MINUTES`` samples a host, and each host's next ``LATER`` samples
    (each with the events before it) held back."""
    played: list[tuple[str, SessionItem]] = []
    later: dict[str, list[list[SessionItem]]] = {}
    for i, (host, scen) in enumerate(HOSTS):
        items = sim_items(host, scen, seed=i + 1, minutes=MINUTES + LATER)
        cut = next(k for k, it in enumerate(items)
                   if isinstance(it, HostSample) and it.seq == MINUTES) + 1
        played += [(host, it) for it in items[:cut]]
        groups: list[list[SessionItem]] = [[]]
        for it in items[cut:]:
            groups[-1].append(it)
            if isinstance(it, HostSample):
                groups.append([])
        later[host] = [g for g in groups if g]
    specs = [HostSpec(name=h, tags=("rack-s",), expect_gpus=8) for h, _ in HOSTS]
    t_last = max(it.ts for _, it in played if isinstance(it, HostSample))
    return FakeBackend(specs, played), FrozenClock(t_last + 1.0), later


def _keys(rng: random.Random) -> list[str]:
    """Each panel key twice (on and off, or off and on), tabs and GPU picks in the memory
    panel, shuffled."""
    keys = [*(str(i + 1) for i in range(len(PANELS)))] * 2 + ["tab", "pick"] * 2
    rng.shuffle(keys)
    return keys


async def _settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause(0.05)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.05)


async def _press(pilot: Pilot[None], key: str, rng: random.Random) -> None:
    if key == "pick":
        pilot.app.screen.query_one(MemoryGrowth).post_message(
            MemoryGrowth.GpuPicked(rng.randrange(8)))
    else:
        await pilot.press(key)


FED = {"memory": "view", "thermal": "view", "topology": "topo", "iostat": "iostat",
       "processes": "processes", "host": "host", "network": "network"}
"""Each panel's reactive that ``HostPanel.show`` sets: what the panel was fed."""


def _folded(app: RigwatchApp, due: dict[str, int]) -> bool:
    """Each host's newest sample is the one of ``due``."""
    for name, seq in due.items():
        last = app.fleet.hosts[name].last
        if last is None or last.seq != seq:
            return False
    return True


def _fed(app: RigwatchApp, name: str) -> object:
    """What the panel was last fed (None when hidden)."""
    panel = app.screen.query_one(f"#panel-{name}")
    return getattr(panel, FED[name]) if panel.display else None


async def _run(monkeypatch: pytest.MonkeyPatch, screen: ScreenClass, keys: list[str],
               moving: bool) -> list[tuple[str, object]]:
    """The screen after each key (after the next redraw when ``moving``), and the panel the
    key toggled right after it."""
    monkeypatch.setattr(app_screens, "HostScreen", screen)
    backend, clock, later = _fleet()
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False,
                                                                          bell=False)),
                   clock=clock)
    app.theme = "rigwatch-dark"
    seen: list[tuple[str, object]] = []
    rng = random.Random(SEED)
    async with app.run_test(size=SIZE) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                            for h in app.fleet.hosts.values()))
        app.post_message(HostChosen(OPEN))
        await wait_until(pilot, lambda: isinstance(app.screen, screen)
                         and app.screen.query_one(GpuTable).row_count == 8)
        app.refresh_view()
        await _settle(pilot)
        for n, key in enumerate(keys[:LATER] if moving else keys):
            if moving:
                # the clock first, then the samples, folded before the key: a sample
                # folded before the clock moved would read stale (on a loaded machine the
                # fold raced the clock and the key)
                clock.now += 60.0
                due: dict[str, int] = {}
                for host, groups in later.items():
                    for item in groups[n]:
                        backend.push(host, item)
                        if isinstance(item, HostSample):
                            due[host] = item.seq
                await wait_until(pilot, partial(_folded, app, due))
            await _press(pilot, key, rng)
            await _settle(pilot)
            toggled = PANELS[int(key) - 1] if key.isdigit() else "memory"
            panel = _fed(app, toggled)
            if moving:
                app.refresh_view()
                # the body to its top in both: a key that hid a panel clamped the scroll
                # against the layout of the moment (the newest data's before, the last
                # redraw's now), which may differ by the lines a new finding took
                app.screen.query_one("#host-body").scroll_home(animate=False, immediate=True)
                await _settle(pilot)
            seen.append((app.export_screenshot(), panel))
        await app.action_quit()
    return seen


@pytest.mark.parametrize("moving", [False, True], ids=["still", "moving"])
async def test_panel_keys_show_what_the_whole_redraw_showed(
        monkeypatch: pytest.MonkeyPatch, moving: bool) -> None:
    keys = _keys(random.Random(SEED))
    before = await _run(monkeypatch, HostScreenBeforeS14, keys, moving)
    after = await _run(monkeypatch, HostScreen, keys, moving)
    assert len(before) == len(after) == (LATER if moving else len(keys))
    for key, (b_screen, b_panel), (a_screen, a_panel) in zip(keys[:len(after)], before,
                                                             after, strict=True):
        assert a_panel == b_panel, key
        assert a_screen == b_screen, key


async def test_a_key_that_feeds_nothing_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: panels shown by a key that feeds nothing stay empty."""
    keys = ["3", "5", "6"]
    before = await _run(monkeypatch, HostScreenBeforeS14, keys, False)
    nothing = await _run(monkeypatch, HostScreenFeedsNothing, keys, False)
    differ: Callable[[int], bool] = lambda i: before[i] != nothing[i]  # noqa: E731
    assert any(differ(i) for i in range(len(keys)))
