"""Alerts in the console: one status-line notice per tick (one host named with its worst
finding, or many hosts in one line), above the footer where it covers no data; no toast."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets._toast import Toast

from probes.analysis.alerts import AlertPolicy
from probes.analysis.hook import group_members
from probes.wire.samples import LogEvent
from tests.support.tui_fakes import (
    T0,
    FakeBackend,
    FrozenClock,
    fleet_items,
    fleet_specs,
    settled,
    wait_until,
)
from tui.app import MAX_TOASTS, make_app
from tui.console_options import ConsoleOptions
from widgets.fleet_table import FleetTable
from widgets.header_bar import StatusLine

XID = "NVRM: Xid (PCI:0000:48:00): 79, pid=0, GPU has fallen off the bus."


def _toasts(app: object) -> list[str]:
    screen = app.screen  # type: ignore[attr-defined]
    return [str(t.render()) for t in screen.query(Toast)]


def _status(app: object) -> str:
    screen = app.screen  # type: ignore[attr-defined]
    lines = screen.query(StatusLine)
    return " ".join(str(line.render()) for line in lines if line.display)


async def test_one_troubled_host_is_named_on_the_status_line_not_in_a_toast() -> None:
    backend = FakeBackend(fleet_specs(), fleet_items())
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot, backend)
        await wait_until(pilot, lambda: bool(_status(app)))
        text = _status(app)
        # gpu-t02 has an Xid 79 (critical) and a throttled GPU: the Xid leads, the rest counted
        assert "gpu-t02: " in text and "more)" in text and "t for triage" in text
        assert "hosts with new findings" not in text
        assert _toasts(app) == []
        # the line sits between the table and the footer: it covers no row of the table
        line = app.screen.query_one(StatusLine)
        table = app.screen.query_one(FleetTable)
        await wait_until(pilot, lambda: line.region.height > 0)  # laid out (a busy machine)
        assert line.region.y >= table.region.bottom
        assert line.region.bottom <= app.size.height - 1
        assert "-critical" in line.classes


async def test_many_hosts_at_once_share_one_notice_that_names_the_worst() -> None:
    extra = [(h, LogEvent(T0 + 25, "kernel", XID)) for h in ("gpu-t01", "gpu-t03")]
    backend = FakeBackend(fleet_specs(), fleet_items() + extra)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock())
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settled(pilot, backend)
        await wait_until(pilot, lambda: bool(_status(app)))
        await pilot.pause(0.3)
        text = _status(app)
        assert "3 hosts with new findings" in text
        assert f"and {3 - MAX_TOASTS} more" in text and "t for triage" in text
        # critical hosts are named first, in name order
        assert "gpu-t01" in text and "gpu-t02" in text
        assert _toasts(app) == []


async def test_a_burst_of_alerts_runs_few_hooks_notes_the_dropped_and_quit_kills_them(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hook = ("sh", "-c", f"echo $$ >> {pids}; sleep 300 & sleep 300")
    backend = FakeBackend(fleet_specs(), fleet_items())
    policy = AlertPolicy(hook=hook, hook_timeout_s=60.0, hook_at_once=1, hook_waiting=0)
    app = make_app(backend, ConsoleOptions(demo=True, alerts=policy), clock=FrozenClock())
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settled(pilot, backend)
        await wait_until(pilot, lambda: app.hook_gate.dropped > 0 and pids.exists())
        await wait_until(pilot, lambda: "dropped" in _status(app))
        assert app.hook_gate.admitted == 1  # one runs, none wait, the rest were dropped
        groups = [int(p) for p in pids.read_text().split()]
        assert len(groups) == 1 and group_members(groups[0])
    # quitting cancels the hook worker; the hook's whole group goes with it
    for _ in range(40):
        if not group_members(groups[0]):
            break
        await asyncio.sleep(0.05)
    assert group_members(groups[0]) == []
