"""The fleet state keeps each host's row until the host changes, and the kept rows are right.

A thousand hosts cannot be judged again on every redraw, key press and connect; but a row
that is kept must be the row that would be computed now, including what changes with the
clock alone (stale, last seen, next retry).
"""

from __future__ import annotations

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetRow, FleetState, HostStatus
from probes.triage import Severity
from probes.wire.events import Connected, Disconnected, SessionItem
from tests.support.builders import gpu, hello, sample
from tui.views.fleet_rows import FleetRows

NAMES = ("a", "b", "c", "d")


def eight(ts: float, hot: int | None = None) -> SessionItem:
    return sample(tuple(gpu(i, temp_c=91.0 if i == hot else 60.0 + i) for i in range(8)),
                  ts=ts)


def streaming(*names: str) -> FleetState:
    fleet = FleetState([HostSpec(n, interval_s=1.0, expect_gpus=8) for n in names])
    for n in names:
        fleet.apply(n, Connected(1.0), now=1.0)
        fleet.apply(n, hello(), now=1.0)
        fleet.apply(n, eight(2.0), now=2.0)
    return fleet


def afresh(fleet: FleetState, now: float) -> list[FleetRow]:
    """Every row computed from scratch, as before rows were kept."""
    return [h.row(now) for h in fleet.hosts.values()]


def test_rows_of_unchanged_hosts_are_not_recomputed() -> None:
    fleet = streaming(*NAMES)
    view = FleetRows(fleet)
    first = view.rows(3.0)
    assert view.row_builds == len(NAMES)
    fleet.apply("b", eight(3.5, hot=2), now=3.5)
    second = view.rows(3.6)
    assert view.row_builds == len(NAMES) + 1, "only the host that sent a sample"
    assert [r is s for r, s in zip(first, second, strict=True)] == [True, False, True, True]
    assert second[1].max_temp_c == 91.0
    # another redraw at the same moment (the totals, a key press) computes nothing
    view.totals(3.6)
    view.rows(3.6)
    assert view.row_builds == len(NAMES) + 1


def test_a_burst_of_connects_builds_each_row_once_per_draw() -> None:
    """1000 hosts saying hello, drawn every 100 hellos: each host's row is built at most
    twice (connecting, then streaming), not once per draw (O(N²))."""
    names = [f"h{i:04d}" for i in range(1000)]
    fleet = FleetState([HostSpec(n) for n in names])
    view = FleetRows(fleet)
    for i, n in enumerate(names):
        fleet.apply(n, Connected(1.0), now=1.0)
        fleet.apply(n, hello(), now=1.0)
        if i % 100 == 99:
            view.totals(1.0)
    assert view.totals(1.0)["streaming"] == 1000
    assert view.row_builds <= 2 * len(names)


def test_a_silent_host_turns_stale_and_ages_without_being_judged_again() -> None:
    fleet = streaming("a", "b")
    view = FleetRows(fleet)
    for t in (3.0, 4.0, 5.0, 6.0):
        fleet.apply("b", eight(t), now=t)
    builds = view.row_builds
    a = view.rows(8.0)[0]  # 6 s silent, the limit is 5 s
    assert a.status is HostStatus.STALE and a.stale_s == 6.0
    assert view.row_builds == builds + 2  # a turned stale, b sent samples
    later = view.rows(30.0)[0]
    assert view.row_builds == builds + 3  # b turned stale too; a's row was only re-stamped
    assert later.stale_s == 28.0 and later.last_seen_s == 28.0
    assert later.reason == "no data for 28 s (agent or link frozen?)"
    assert later.worst is Severity.WARNING
    assert view.rows(30.0) == afresh(fleet, 30.0)


def test_a_down_hosts_retry_counts_down_on_the_kept_row() -> None:
    fleet = streaming("a")
    view = FleetRows(fleet)
    fleet.apply("a", Disconnected(10.0, "connection refused", 30.0, None,
                                  DisconnectKind.UNREACHABLE), now=10.0)
    first = view.rows(11.0)[0]
    builds = view.row_builds
    later = view.rows(25.0)[0]
    assert view.row_builds == builds
    assert (first.next_retry_s, later.next_retry_s) == (29.0, 15.0)
    assert (first.last_seen_s, later.last_seen_s) == (9.0, 23.0)
    assert later.status is HostStatus.UNREACHABLE and later.reason == "connection refused"
    fleet.apply("a", Connected(40.0), now=40.0)
    retrying = view.rows(40.5)[0]
    assert retrying.status is HostStatus.CONNECTING and retrying.next_retry_s is None


def test_kept_rows_and_totals_equal_what_is_computed_afresh() -> None:
    """A day in the life of four hosts, checked at every step against rows from scratch."""
    fleet, twin = streaming(*NAMES), streaming(*NAMES)
    view = FleetRows(fleet)
    script: list[tuple[float, str, SessionItem]] = []
    for t in range(3, 60):
        ts = float(t)
        script.append((ts, "a", eight(ts, hot=3 if t > 20 else None)))
        if t < 15 or t > 40:
            script.append((ts + 0.3, "b", eight(ts + 0.3)))
        if t == 12:
            script.append((ts, "c", Disconnected(ts, "agent exited (status 1)", 5.0, None,
                                                 DisconnectKind.AGENT_FAILED)))
        if t == 17:
            script.append((ts, "c", Connected(ts)))
        if t == 18:
            script.append((ts, "c", hello(7)))
        if t > 18:
            script.append((ts + 0.5, "c", sample(tuple(gpu(i) for i in range(7)), ts=ts)))
        # d says nothing after its first sample: stale from t = 8 on
    checks = 0
    for now, host, item in script:
        fleet.apply(host, item, now=now)
        twin.apply(host, item, now=now)
        for at in (now, now + 0.7):
            assert view.rows(at) == afresh(twin, at), at
            totals = view.totals(at)
            want = brute_totals(afresh(twin, at))
            assert totals == want, at
            checks += 1
        for h in fleet.hosts.values():
            assert h.findings() == h._merged_findings(h.status)
    assert checks > 100
    assert view.row_builds < checks * len(NAMES) / 2


def brute_totals(rows: list[FleetRow]) -> dict[str, int]:
    out = {s.value: 0 for s in HostStatus}
    out.update({s.value: 0 for s in Severity})
    out["gpus"] = sum(r.gpus_ok for r in rows)
    for r in rows:
        out[r.status.value] += 1
        if r.status.is_down and r.status is not HostStatus.DOWN:
            out[HostStatus.DOWN.value] += 1
        for sev, n in zip((Severity.CRITICAL, Severity.WARNING, Severity.INFO), r.by_severity,
                          strict=True):
            out[sev.value] += n
    return out


def test_totals_handed_out_cannot_change_the_kept_ones() -> None:
    fleet = streaming("a")
    view = FleetRows(fleet)
    view.totals(3.0)["streaming"] = 99
    assert view.totals(3.0)["streaming"] == 1
