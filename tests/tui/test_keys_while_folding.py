"""A key pressed while the console folds a collector's long backlog is handled within a
few slices of the fold, not after all of it (#38: the loop, keys and the UI process).

The real console (Pilot) and the collector backend's own read and fold of one frame of
hundreds of agent samples; the collector process is left out (its pipe already holds the
frame).  Counted in the fold's slices (each one turn of the loop), never timed.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from textual import events

from probes.sources.collectors import FoldSlices
from tests.support.collector_backlog import BacklogBackend, backlog
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.views.fleet_view import SORT_KEYS

HOSTS, SAMPLES = 8, 150
MOST_SLICES = 12
"""The most slices of the fold a key may wait: the key's few hops between the app's
message pumps, each one turn of the loop (it took 5 here, of ~300 in all)."""


async def _key_during_fold(budget_s: float) -> tuple[int, int, int]:
    """Press ``s`` as the fold starts: the items folded when the sort changed, the fold's
    slices until then, and the items in all."""
    t0 = time.time()
    backend = BacklogBackend(HOSTS, [backlog(HOSTS, SAMPLES, t0 - SAMPLES)], gated=True,
                             slices=lambda: FoldSlices(budget_s))
    total = HOSTS * (SAMPLES + 2)  # Connected, hello, samples
    app = make_app(backend, ConsoleOptions(demo=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        before = screen.sort_key
        assert app._driver is not None
        app._driver.send_message(events.Key("s", "s"))
        backend.go.set()  # the key's first hop and the fold's first slice share a turn
        while screen.sort_key == before:
            await asyncio.sleep(0)
        handled, waited = backend.folded, backend.slices_made()
        await asyncio.wait_for(backend.done.wait(), 60)
        assert screen.sort_key == SORT_KEYS[(SORT_KEYS.index(before) + 1) % len(SORT_KEYS)]
        assert backend.folded == total
    return handled, waited, total


async def test_a_key_waits_a_few_slices_of_a_long_fold_not_all_of_it() -> None:
    handled, waited, total = await _key_during_fold(0.004)
    assert waited <= MOST_SLICES, waited
    # handled while most of the backlog was still to fold
    assert handled < total // 2, (handled, total)


@pytest.mark.parametrize("budget", [math.inf])
async def test_the_negative_control_a_fold_in_one_go_keeps_the_key_to_its_end(
        budget: float) -> None:
    """The measure can fail: folded in one callback (the old fold), the key is handled
    only once every item is in."""
    handled, waited, total = await _key_during_fold(budget)
    assert handled == total and waited == 0, (handled, total)


KEY_FIRST_SLICES = 2
"""With the fold giving way while a key is on its way, the key waits the slice it arrived
in and at most one more (the turn that saw it pending), not one per hop."""


async def test_the_fold_gives_way_while_a_key_is_on_its_way() -> None:
    handled, waited, total = await _key_during_fold(0.004)
    assert waited <= KEY_FIRST_SLICES, waited
    assert handled < total // 4, (handled, total)


async def test_the_negative_control_a_fold_blind_to_keys_makes_it_wait_per_hop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The measure can fail: a fold that never sees the key pending takes a slice per hop."""
    monkeypatch.setattr("tui.app_feed.keys_in_flight", lambda app: False)
    _, waited, _ = await _key_during_fold(0.004)
    assert waited > KEY_FIRST_SLICES, waited
