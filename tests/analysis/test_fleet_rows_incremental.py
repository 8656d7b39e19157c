"""``FleetState.rows`` looks only at the hosts that may have moved, yet every row it hands
out is the row a full rebuild would give (``afresh``): a host that turns stale with the
clock alone, a waiting off-screen host that scrolls on screen, a clock that goes back."""

from __future__ import annotations

from dataclasses import replace

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostStatus
from probes.history import DEFAULT_TIERS, Tier, tiers_for
from probes.wire.events import Connected
from tests.analysis.test_fleet_state_cache import afresh, eight
from tests.support.builders import gpu, hello, sample
from tui.views.fleet_rows import FleetRows

NAMES = tuple(f"h{i}" for i in range(6))


def _fleet(interval_s: float = 15.0) -> FleetState:
    fleet = FleetState([HostSpec(n, interval_s=interval_s, expect_gpus=8) for n in NAMES])
    for n in NAMES:
        fleet.apply(n, Connected(1.0), now=1.0)
        fleet.apply(n, hello(), now=1.0)
        fleet.apply(n, eight(2.0), now=2.0)
    return fleet


def test_a_host_turns_stale_with_the_clock_alone() -> None:
    fleet = _fleet()
    view = FleetRows(fleet)
    assert {r.status for r in view.rows(3.0)} == {HostStatus.STREAMING}
    for n in NAMES[1:]:  # all but h0 keep streaming
        fleet.apply(n, eight(40.0), now=40.0)
    view.rows(41.0)
    later = 2.0 + 3 * 15.0 + 1.0  # past three of h0's intervals, no item since
    rows = view.rows(later)
    assert rows[0].status is HostStatus.STALE and rows[0].stale_s is not None
    assert [r.status for r in rows[1:]] == [HostStatus.STREAMING] * 5
    assert rows == afresh(fleet, later)
    # its age keeps counting on the kept row
    assert view.rows(later + 10.0)[0].stale_s == rows[0].stale_s + 10.0


def test_a_waiting_off_screen_host_is_built_when_it_scrolls_on_screen() -> None:
    fleet = _fleet()
    view = FleetRows(fleet)
    view.focus = frozenset({"h0"})
    view.rows(3.0)
    warm = eight(4.0)
    fleet.apply("h3", replace(warm, gpus=tuple(replace(g, power_w=333.0) for g in warm.gpus)),
                now=4.0)
    assert view.rows(5.0)[3].power_w != 8 * 333.0  # off screen: its numbers wait
    view.focus = frozenset({"h3"})
    assert view.rows(6.0)[3].power_w == 8 * 333.0  # on screen: at once, not at the deadline
    view.focus = None
    assert view.rows(7.0) == afresh(fleet, 7.0)


def test_rows_after_the_clock_goes_back_are_built_afresh() -> None:
    fleet = _fleet()
    view = FleetRows(fleet)
    view.rows(100.0)  # every host stale by now
    assert {r.status for r in view.rows(100.0)} == {HostStatus.STALE}
    assert view.rows(3.0) == afresh(fleet, 3.0)
    assert {r.status for r in view.rows(3.0)} == {HostStatus.STREAMING}


def test_a_new_finding_off_screen_is_never_late() -> None:
    fleet = _fleet()
    view = FleetRows(fleet)
    view.focus = frozenset({"h0"})
    view.rows(3.0)
    fleet.apply("h5", sample(tuple(gpu(i) for i in range(7)), ts=4.0), now=4.0)  # one fell off
    row = view.rows(4.1)[5]
    assert row.findings > 0 and row.gpus_ok == 7 and row.worst is not None


def test_a_slow_source_keeps_its_samples_as_the_15_s_tier() -> None:
    slow = tiers_for(15.0)
    assert slow == (Tier(DEFAULT_TIERS[0].resolution_s, DEFAULT_TIERS[1].span_s),
                    *DEFAULT_TIERS[2:])
    assert tiers_for(1.0) == DEFAULT_TIERS
    assert tiers_for(60.0) == (Tier(DEFAULT_TIERS[0].resolution_s, DEFAULT_TIERS[2].span_s),
                               DEFAULT_TIERS[3])
    # a Prometheus host's hour of 15 s samples is all there, each as it came
    fleet = _fleet()
    host = fleet.hosts["h0"]
    t0 = 10_000.0
    for k in range(240):
        s = sample(tuple(gpu(i, temp_c=50.0 + (k % 7)) for i in range(8)), ts=t0 + 15.0 * k)
        fleet.apply("h0", s, now=t0 + 15.0 * k)
    assert host.history.tiers == slow
    col = host.history.series("gpu/0/temp_c").columns(since=t0)
    assert len(col.t) == 240
    assert [v for v in col.mean[:14]] == [50.0 + (k % 7) for k in range(14)]
