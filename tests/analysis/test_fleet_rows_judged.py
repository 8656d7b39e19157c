"""The rows look only at the hosts whose status, findings or GPUs answering moved (issue 38).

The fold tells which hosts changed beyond their numbers (``FleetState.judged_since``:
``probes.fleet_changes.numbers_only``), and the console's rows skip, off screen, the hosts
whose samples moved only numbers (``FleetRows._moved``), and re-arm a streaming host's stale
time from its newest item instead of looking at it (``_stale_by``).  Here a fleet of every
kind of sample (``test_fleet_rows_equivalent``'s: wire v2, its checked path, v1, replays,
Prometheus) with outages, silences, a watcher's fault, Xid lines and clock offsets is read
each second through the console's ``FleetRows`` and through the code before (session 7's,
``fleet_rows_visit_all``, which looks at every changed host), with the rows on screen and
the order's reading of numbers switching: every row, the totals and the rows built equal
field by field (``repr``), and every row on screen equals the host's row built afresh.
Negative controls: a fold that calls a changed finding, a new outage or a lost GPU "numbers
only", and rows that forget that a row kept while numbers were read never compared its
GPUs answering: each caught.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from probes import fleet_state
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind, WatcherFault
from probes.fleet_state import FleetState
from probes.wire.events import ClockOffset, Connected, Disconnected, SourceHealth
from probes.wire.samples import LogEvent
from tests.analysis.fleet_rows_visit_all import FleetRowsVisitAll
from tests.analysis.test_fleet_rows_equivalent import LIMITS, XID, _feeds
from tests.analysis.test_fleet_rows_seen import HOSTS, _tick_items
from tests.support.tui_fakes import T0, hello
from tui.views.fleet_rows import FleetRows

SECONDS = 80


def run(seed: int, view_of: Any = FleetRows) -> Counter[str]:
    """Fold the fleet, reading it each second both ways; what differed and what happened."""
    rng = random.Random(seed)
    feeds = _feeds()
    fleet = FleetState([spec for spec, _ in feeds.values()], LIMITS)
    new, old = view_of(fleet), FleetRowsVisitAll(fleet)
    names = list(feeds)
    out = Counter[str]()
    silent: dict[str, int] = {}
    watched_out: set[str] = set()
    focus: frozenset[str] | None = frozenset(names[:4])
    read = False
    for t in range(SECONDS):
        now = T0 + t
        for name, (_, feed) in feeds.items():
            roll = rng.random()
            if silent.get(name, 0) > t:
                continue
            if roll < 0.01:  # silent for a while: stale
                silent[name] = t + rng.randrange(6, 20)
                continue
            if roll < 0.02:  # an outage, then a retry
                fleet.apply(name, Disconnected(now, "connection reset", 3.0,
                                               kind=rng.choice(list(DisconnectKind))), now)
                silent[name] = t + rng.randrange(2, 8)
                continue
            if roll < 0.025:
                fleet.apply(name, Connected(now), now)
                continue
            if roll < 0.03:
                fleet.apply(name, LogEvent(now, "kernel", XID), now)
            elif roll < 0.035:
                fleet.apply(name, ClockOffset(now, rng.choice([0.5, 400.0]), 0.0), now)
            elif roll < 0.04:
                fault = None if name in watched_out else WatcherFault.COLLECTOR_STALLED
                watched_out.symmetric_difference_update({name})
                fleet.apply(name, SourceHealth(now, "collector-0", fault, "stalled"), now)
            for item in next(feed, []):
                fleet.apply(name, item, now)
        fleet.tick(now + rng.choice([0.0, 0.3]))
        if rng.random() < 0.2:  # the operator scrolls
            focus = None if rng.random() < 0.1 else frozenset(rng.sample(names, 4))
        if rng.random() < 0.15:  # a sort or filter that reads numbers, or one that does not
            read = not read
        new.focus = old.focus = focus
        new.numbers_read = old.numbers_read = read
        read_at = now + rng.choice([0.0, 0.5, 0.9, 7.0 if rng.random() < 0.05 else 0.0])
        version = old._seen
        rows = new.rows(read_at)
        out["changed"] += len(fleet.changed_since(version))
        out["judged"] += len(fleet.judged_since(version))
        out["rows differ"] += [repr(r) for r in rows] != [repr(r) for r in old.rows(read_at)]
        out["totals differ"] += new.totals(read_at) != old.totals(read_at)
        for row in rows:
            fresh = repr(row) != repr(fleet.hosts[row.name].row(read_at))
            if focus is None or row.name in focus:
                out["on screen differ"] += fresh
            out["waited"] += fresh
    out["builds differ"] = new.row_builds != old.row_builds
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_rows_that_skip_numbers_only_hosts_equal_the_rows_that_look_at_all(seed: int) -> None:
    out = run(seed)
    assert (out["rows differ"], out["totals differ"], out["on screen differ"],
            out["builds differ"]) == (0, 0, 0, 0), out
    # most changes were numbers only (skipped off screen), and some were not
    assert out["judged"] > 200 and out["changed"] - out["judged"] > 100, out
    assert out["waited"] > 0, out  # off-screen numbers did wait


def test_the_comparison_sees_a_fold_that_calls_a_judged_change_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_state, "numbers_only", lambda host, mark: mark[4] is not None)
    out = run(1)
    assert out["rows differ"] > 0 and out["totals differ"] > 0, out


def run_simple(seed: int, view_of: Any = FleetRows) -> Counter[str]:
    """``test_fleet_rows_seen``'s fleet (GPUs hot or missing, hosts down, back, silent), both
    ways, the order's reading of numbers switching often."""
    rng = random.Random(seed)
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for name in HOSTS:
        fleet.apply(name, Connected(T0), T0)
        fleet.apply(name, hello(name), T0)
    new, old = view_of(fleet), FleetRowsVisitAll(fleet)
    out = Counter[str]()
    top, read = 0, True
    for step in range(1, 70):
        _tick_items(rng, fleet, step)
        now = T0 + step + rng.random() * 0.5
        fleet.tick(now)
        if rng.random() < 0.3:
            top = rng.randrange(len(HOSTS) - 4)
        if rng.random() < 0.3:
            read = not read
        new.focus = old.focus = frozenset(HOSTS[top:top + 5])
        new.numbers_read = old.numbers_read = read
        out["rows differ"] += [repr(r) for r in new.rows(now)] != \
            [repr(r) for r in old.rows(now)]
    return out


def test_rows_of_a_fleet_losing_gpus_equal_the_rows_that_look_at_all() -> None:
    for seed in (3, 5):  # seeds where a row kept while numbers were read is then skipped
        assert run_simple(seed)["rows differ"] == 0


class _ForgetsLoose(FleetRows):
    """Negative control: a row kept while numbers were read skipped once they are not."""

    def _moved(self, now: float) -> set[str]:
        self._loose.clear()
        return super()._moved(now)


def test_the_comparison_sees_rows_kept_past_their_gpus_answering() -> None:
    out = Counter[str]()
    for seed in (3, 5):
        out.update(run_simple(seed, _ForgetsLoose))
    assert out["rows differ"] > 0, out
