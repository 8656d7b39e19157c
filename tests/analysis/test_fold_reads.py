"""The fold as reads and writes (issue #37 item 5): a query never changes the fleet state.

``apply``, ``scan_logs`` and ``tick`` are the writes, called by the owner; ``findings()``,
``row()``, ``rows()``, ``totals()``, ``all_findings()`` and ``diagnosis()`` read.  Before,
``findings()`` scanned the queued log lines and ``row()`` judged staleness: reading twice
could answer differently, and reading changed what the next reader saw.
"""

from __future__ import annotations

import pickle
from typing import Any

from probes.analysis.host_findings import HostFindings
from probes.analysis.host_logs import HostLogs
from probes.analysis.reach_tracker import ReachTracker
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState, HostStatus
from probes.triage import Code
from probes.wire.samples import LogEvent
from tests.support.tui_fakes import T0, sim_items

MEMOS = {"_memo", "_ranks", "_map", "scan_worker", "worker", "row_judge"}
"""Remembered answers (and the worker's handle), not state: a read may fill them."""
CONCERNS = (ReachTracker, HostLogs, HostFindings)
"""A host's concerns, each an object of its own: their fields are the host's."""
XID = "NVRM: Xid (PCI:0000:05:00): 79, pid=1, name=python, GPU has fallen off the bus."


def snapshot(fleet: FleetState) -> dict[str, bytes]:
    """Every field of the fold and of each host, pickled (memos left out)."""
    def fields(obj: Any) -> dict[str, bytes]:
        out = {}
        for k, v in vars(obj).items():
            if k in MEMOS or k == "hosts":
                continue
            if isinstance(v, CONCERNS):
                out.update({f"{k}.{n}": b for n, b in fields(v).items()})
            else:
                out[k] = pickle.dumps(v)
        return out
    out = {f"fleet.{k}": v for k, v in fields(fleet).items()}
    for name, state in fleet.hosts.items():
        out.update({f"{name}.{k}": v for k, v in fields(state).items()})
    return out


def reads(fleet: FleetState, now: float) -> tuple[object, ...]:
    """Everything a screen, an alert check or a report asks of the fold."""
    states: list[HostState] = list(fleet.hosts.values())
    return (tuple(tuple(s.findings()) for s in states),
            tuple(s.row(now) for s in states),
            tuple(fleet.rows(now)),
            tuple(sorted(fleet.totals(now).items())),
            tuple(fleet.all_findings()),
            fleet.diagnosis().first)


def _fleet() -> FleetState:
    """Two demo hosts, one silent since its first minutes, and a kernel line not scanned."""
    fleet = FleetState([HostSpec(name="gpu-a", simulate=("xid79:6@120",), seed=1,
                                 expect_gpus=8),
                        HostSpec(name="gpu-b", simulate=("healthy",), seed=2, expect_gpus=8)])
    for item in sim_items("gpu-a", "xid79:6@120", seed=1, minutes=4):
        fleet.apply("gpu-a", item, getattr(item, "ts", T0))
    for item in sim_items("gpu-b", "healthy", seed=2, minutes=1):
        fleet.apply("gpu-b", item, getattr(item, "ts", T0))
    fleet.apply("gpu-b", LogEvent(T0 + 60, "kernel", XID), T0 + 60)
    return fleet


def test_reading_twice_answers_the_same_and_changes_nothing() -> None:
    fleet = _fleet()
    now = T0 + 600  # gpu-b has been silent for minutes: stale as of now, not yet judged
    assert fleet.hosts["gpu-b"].status is HostStatus.STREAMING
    assert fleet.hosts["gpu-b"].logs.scanner.pending  # the Xid line waits for the owner's scan
    before = snapshot(fleet)
    first = reads(fleet, now)
    assert snapshot(fleet) == before
    assert reads(fleet, now) == first
    assert snapshot(fleet) == before
    # the row says what is true as of now; the stored status waits for the owner's tick
    assert fleet.hosts["gpu-b"].row(now).status is HostStatus.STALE
    assert fleet.hosts["gpu-b"].status is HostStatus.STREAMING


def test_the_owners_tick_is_the_write_that_moves_the_answers() -> None:
    fleet = _fleet()
    now = T0 + 600
    version = fleet.version
    assert not [f for f in fleet.hosts["gpu-b"].findings() if f.code == Code.XID]
    assert fleet.tick(now)
    assert fleet.version > version and "gpu-b" in fleet.changed_since(version)
    b = fleet.hosts["gpu-b"]
    assert b.status is HostStatus.STALE and not b.logs.scanner.pending
    assert {Code.XID, Code.HOST_STALE} <= {f.code for f in b.findings()}
    # and a tick with nothing new to bring in changes nothing
    after = snapshot(fleet)
    answers = reads(fleet, now)
    assert not fleet.tick(now)
    assert reads(fleet, now) == answers
    assert {k for k in snapshot(fleet) if snapshot(fleet)[k] != after[k]} <= {
        "fleet._unticked", "fleet._stale_at"}
