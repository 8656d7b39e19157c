"""A row renewed from the kept one (``HostState.row_renewed``) is the row a full build gives.

Issue 38: on the wall every host's row is brought up to date each second, and a host whose
sample moved only numbers was built in full (its findings merged, counted and headed again).
``FleetRows.row`` now renews such a row from the kept one while the findings (the very
list), the hello and the shown status are those it was built from.  Here every kind of
sample the console folds (``test_fleet_rows_equivalent``'s fleet: v2, its checked path,
eager v1, the agent's v1 stream, recordings, Prometheus) with silences, outages, retries, a
watcher's fault, Xid lines and clock offsets is read each second with every host in focus
(the wall) and with a few on screen: each row handed out equals ``host.row(now)`` built
afresh, field by field (``repr``: the types of numbers too), and the totals equal those of
the fresh rows.  Negative controls: a renewal that keeps the jobs, or the ages, of the kept
row is caught.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from probes.analysis.fleet_counts import count_rows
from probes.errors import DisconnectKind, WatcherFault
from probes.fleet_state import FleetState, HostState
from probes.wire.events import ClockOffset, Connected, Disconnected, SourceHealth
from probes.wire.samples import LogEvent
from tests.analysis.test_fleet_rows_equivalent import LIMITS, XID, _feeds
from tests.support.tui_fakes import T0
from tui.views.fleet_rows import FleetRows

SECONDS = 120


def run(seed: int, seconds: int = SECONDS) -> tuple[Counter[str], Counter[str]]:
    """(reads that differ from a fresh build, by what; what the run reached)."""
    rng = random.Random(seed)
    feeds = _feeds()
    fleet = FleetState([spec for spec, _ in feeds.values()], LIMITS)
    view = FleetRows(fleet)
    names = list(feeds)
    wrong, seen = Counter[str](), Counter[str]()
    silent: dict[str, int] = {}
    watched_out: set[str] = set()
    for t in range(seconds):
        now = T0 + t
        for name, (_, feed) in feeds.items():
            roll = rng.random()
            if silent.get(name, 0) > t:
                continue
            if roll < 0.01:
                silent[name] = t + rng.randrange(6, 20)
                continue
            if roll < 0.02:
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
        if rng.random() < 0.1:  # the table for a while (a few on screen), then the wall
            view.focus = frozenset(rng.sample(names, 4)) if view.focus is None else None
        read_at = now + rng.choice([0.0, 0.5, 0.9])
        renewed = view.row_renewals
        rows = view.rows(read_at)
        seen["renewed"] += view.row_renewals - renewed
        fresh = [fleet.hosts[r.name].row(read_at) for r in rows]
        focus = view.focus
        for row, afresh in zip(rows, fresh, strict=True):
            if focus is None or row.name in focus:  # off screen a row may wait (as before)
                wrong["row"] += repr(row) != repr(afresh)
                seen["compared"] += 1
        if focus is None:
            wrong["totals"] += view.totals(read_at) != count_rows(fresh)
        for host in fleet.hosts.values():
            seen[host.shown_status_at(read_at).value] += 1
    return wrong, seen


@pytest.mark.parametrize("seed", [1, 2])
def test_renewed_rows_equal_a_fresh_build(seed: int) -> None:
    wrong, seen = run(seed)
    assert wrong == Counter(), (wrong, seen)
    assert seen["renewed"] > 100 and seen["compared"] > 500, seen
    for status in ("streaming", "stale", "down", "connecting"):
        assert seen[status] > 0, seen


def _keeps_jobs(self: HostState, row: Any, now: float, found: Any) -> Any:
    out = _renewed(self, row, now, found)
    values = dict(out.__dict__, jobs=row.jobs if row.jobs else ("48211",))
    object.__setattr__(out, "__dict__", values)
    return out


def _keeps_ages(self: HostState, row: Any, now: float, found: Any) -> Any:
    out = _renewed(self, row, now, found)
    values = dict(out.__dict__, last_seen_s=row.last_seen_s, next_retry_s=row.next_retry_s,
                  reason=row.reason, stale_s=row.stale_s)
    object.__setattr__(out, "__dict__", values)
    return out


_renewed = HostState.row_renewed


@pytest.mark.parametrize("mutant", [_keeps_jobs, _keeps_ages])
def test_a_wrong_renewal_is_caught(mutant: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HostState, "row_renewed", mutant)
    wrong, _ = run(1, 60)
    assert wrong["row"] > 0
