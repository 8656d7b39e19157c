"""The fold's tick reads a host's shown status off the status it just judged (issue 38).

``FleetState.tick`` runs before every redraw and visits every host that folded an item
since: at a thousand busy hosts, all of them each second.  It used to judge each host's
status as of ``now`` twice (``tick``, then ``shown_status_at``); it now reads the status
``tick`` left.  Here a fleet of every kind of sample, with silences (stale), outages and
retries, a watcher's fault (unknown), Xid lines and clock offsets, is folded twice in
lockstep, one fold ticking as before (``redraw11_before_s11``) and one as now, at ticks
on and off the second: what each tick returns, which hosts it marked changed, each host's
stale time, status and row are equal every second.  Negative control: a tick that forgets
the watcher's fault (an unknown host read as streaming) differs.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from probes.errors import DisconnectKind, WatcherFault
from probes.fleet_state import FleetState, HostStatus
from probes.wire.events import ClockOffset, Connected, Disconnected, SourceHealth
from probes.wire.samples import LogEvent
from tests.analysis.redraw11_before_s11 import FleetStateTickBefore
from tests.analysis.test_fleet_rows_equivalent import LIMITS, XID, _feeds
from tests.support.tui_fakes import T0

SECONDS = 70


class _ForgetsTheWatcher(FleetState):
    """A perturbed tick: a host the watcher cannot see is armed to turn stale."""

    def tick(self, now: float) -> bool:
        moved = self.take_scans()
        due = self._unticked
        due.update(n for n, t in self._stale_at.items() if t < now)
        self._unticked = set()
        for name in due:
            state = self.hosts[name]
            if state.tick(now):
                self._log.changed(name)
                moved = True
            reach = state.reach
            if reach.status is HostStatus.STREAMING and reach.last_seen is not None:
                self._stale_at[name] = reach.last_seen + reach.stale_limit_s()
            else:
                self._stale_at.pop(name, None)
        return moved


def run(seed: int, new_of: Any = FleetState) -> Counter[str]:
    rng = random.Random(seed)
    feeds_new, feeds_old = _feeds(), _feeds()
    new = new_of([spec for spec, _ in feeds_new.values()], LIMITS)
    old = FleetStateTickBefore([spec for spec, _ in feeds_old.values()], LIMITS)
    names = list(feeds_new)
    out = Counter[str]()
    silent: dict[str, int] = {}
    watched_out: set[str] = set()
    seen_new, seen_old = new.version, old.version
    for t in range(SECONDS):
        now = T0 + t
        for name in names:
            roll = rng.random()
            items: list[Any] = []
            if silent.get(name, 0) > t:
                continue
            if roll < 0.02:
                silent[name] = t + rng.randrange(6, 20)
                continue
            if roll < 0.035:
                items = [Disconnected(now, "connection reset", 3.0,
                                      kind=rng.choice(list(DisconnectKind)))]
                silent[name] = t + rng.randrange(2, 8)
            elif roll < 0.04:
                items = [Connected(now)]
            else:
                if roll < 0.045:
                    items.append(LogEvent(now, "kernel", XID))
                elif roll < 0.05:
                    items.append(ClockOffset(now, rng.choice([0.5, 400.0]), 0.0))
                elif roll < 0.08:
                    fault = None if name in watched_out else WatcherFault.COLLECTOR_STALLED
                    watched_out.symmetric_difference_update({name})
                    items.append(SourceHealth(now, "collector-0", fault, "stalled"))
                items_new = items + list(next(feeds_new[name][1], []))
                items_old = items + list(next(feeds_old[name][1], []))
                for item in items_new:
                    new.apply(name, item, now)
                for item in items_old:
                    old.apply(name, item, now)
                continue
            for item in items:
                new.apply(name, item, now)
                old.apply(name, item, now)
        for at in (now + rng.choice([0.0, 0.3, 0.9]), now + 0.95):
            out["ticks differ"] += new.tick(at) != old.tick(at)
            out["stale times differ"] += new._stale_at != old._stale_at
            out["changed differ"] += (sorted(new.changed_since(seen_new))
                                      != sorted(old.changed_since(seen_old)))
            seen_new, seen_old = new.version, old.version
            for name in names:
                a, b = new.hosts[name], old.hosts[name]
                out["status differ"] += a.status_at(at) is not b.status_at(at)
                out["rows differ"] += repr(a.row(at)) != repr(b.row(at))
                out["unknown"] += a.shown_status_at(at) is HostStatus.UNKNOWN
                out["stale"] += a.status_at(at) is HostStatus.STALE
                out["down"] += a.status_at(at).is_down
    return out


def test_the_folds_tick_equals_the_tick_before() -> None:
    for seed in (1, 2, 3):
        out = run(seed)
        assert (out["ticks differ"], out["stale times differ"], out["changed differ"],
                out["status differ"], out["rows differ"]) == (0, 0, 0, 0, 0), (seed, out)
        # the cases the shortcut reads: hosts stale, down and unseen by the watcher
        assert out["unknown"] > 0 and out["stale"] > 0 and out["down"] > 0, (seed, out)


def test_the_comparison_sees_a_tick_that_forgets_the_watcher() -> None:
    out = run(1, _ForgetsTheWatcher)
    assert out["stale times differ"] > 0, out
