"""Off-screen rows are refreshed a share each second, not all at once every few seconds
(#38: a tick at a thousand hosts rebuilt every off-screen row every fifth second, 150-200
ms in one callback, which held a key press).  Counted in row builds, never timed."""

from __future__ import annotations

import math
from dataclasses import replace

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.events import Connected
from tests.support.tui_fakes import T0, hello, sample
from tui.views.fleet_rows import OFF_SCREEN_REFRESH_S, FleetRows

HOSTS = [f"h{i:03d}" for i in range(100)]
ON_SCREEN = frozenset(HOSTS[:10])
SECONDS = 16


def _power(i: int, sec: int) -> float:
    return 100.0 + sec + i / 1000


def test_off_screen_rows_refresh_a_share_each_tick_and_are_never_older_than_the_refresh(
) -> None:
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for h in HOSTS:
        fleet.apply(h, Connected(T0), T0)
        fleet.apply(h, hello(h), T0)
    view = FleetRows(fleet)
    view.focus = ON_SCREEN
    off = len(HOSTS) - len(ON_SCREEN)
    # the hosts' refresh slots are spread over the inventory: a second's share of all of
    # them, besides the rows on screen (built every tick)
    most = len(ON_SCREEN) + math.ceil(len(HOSTS) / OFF_SCREEN_REFRESH_S) + 1
    builds = []
    for sec in range(SECONDS):
        now = T0 + sec
        for i, h in enumerate(HOSTS):  # every host's power moves every second
            s = sample(h, sec)
            fleet.apply(h, replace(s, ts=now, gpus=tuple(replace(g, power_w=_power(i, sec))
                                                           for g in s.gpus)), now)
        before = view.row_builds
        rows = {r.name: r for r in view.rows(now)}
        builds.append(view.row_builds - before)
        for i, h in enumerate(HOSTS):
            assert rows[h].power_w is not None
            age = sec - round(rows[h].power_w / 8 - 100.0 - i / 1000)
            assert age == 0 if h in ON_SCREEN else 0 <= age <= OFF_SCREEN_REFRESH_S, (h, sec)
    # the first tick builds every row; after it each tick builds the rows on screen and
    # about a fifth of the others, evenly, never all of them at once
    assert builds[0] == len(HOSTS)
    assert max(builds[1:]) <= most, builds
    # and each off-screen row is still refreshed about once per refresh period
    assert sum(builds[1:]) >= (SECONDS - 1) * (len(ON_SCREEN) + off / OFF_SCREEN_REFRESH_S) - off
