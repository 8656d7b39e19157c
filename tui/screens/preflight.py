"""Preflight in the console: every host against the rules of thumb, and the odd one out.

The checks read what the live sessions already hold (each host's hello, newest sample and
findings: a GPU lost since the start fails, a GPU in thermal slowdown fails), so opening
this screen costs no extra connection.  They are recomputed at most every few
seconds: facts change rarely, and 1000 topology matrices per tick would be waste.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Footer, Static

from probes.analysis.limits import PreflightLimits
from probes.analysis.preflight import (
    CheckResult,
    CheckVerdict,
    HostInput,
    by_host,
    check_fleet,
    worst,
)
from probes.fleet_state import FleetState, HostState, HostStatus
from tui.screens.base import DataScreen, row_key_text
from widgets.check_list import CheckList
from widgets.preflight_table import PreflightLine, PreflightTable

RECHECK_S = 5.0


def host_input(state: HostState) -> HostInput:
    """What preflight reads from one host's live state: as it is now, not at its hello."""
    failure = None
    if state.status.is_down:
        failure = state.down_reason or state.status.value
    elif state.status is HostStatus.STALE or (state.hello is None
                                             and state.status is not HostStatus.CONNECTING):
        failure = state.status.value
    return HostInput(state.name, state.hello, state.last, expect_gpus=state.spec.expect_gpus,
                     failure=failure,
                     findings=tuple(state.findings()) if state.hello is not None else (),
                     ports=state.fabric.ports if state.fabric.ts is not None else None)


def line_for(host: str, checks: list[CheckResult]) -> PreflightLine:
    """The table line of one host's results."""
    fails = [c for c in checks if c.verdict is CheckVerdict.FAIL]
    warns = [c for c in checks if c.verdict is CheckVerdict.WARN]
    problems = fails or warns
    first = f"{problems[0].check}: {problems[0].detail}" if problems else ""
    return PreflightLine(host, worst(checks), len(fails), len(warns), first)


def summary(results: list[CheckResult]) -> Content:
    """``8 hosts: 5 pass, 0 warn, 3 fail · odd one out: gpu-b01 (driver 535.183.01)``."""
    grouped = by_host(results)
    counts = {v: 0 for v in CheckVerdict}
    for checks in grouped.values():
        counts[worst(checks)] += 1
    odd = [r for r in results if r.check.startswith("consistent-")]
    text = Content.from_markup(
        "[bold]$n hosts:[/] [$status-streaming]$p pass[/], [$sev-warning]$w warn[/], "
        "[$sev-critical]$f fail[/]", n=str(len(grouped)), p=str(counts[CheckVerdict.PASS]),
        w=str(counts[CheckVerdict.WARN]), f=str(counts[CheckVerdict.FAIL]))
    if odd:
        hosts: dict[str, list[str]] = {}
        for r in odd:
            hosts.setdefault(r.host, []).append(f"{r.check.removeprefix('consistent-')} "
                                                f"{r.value}")
        shown = "; ".join(f"{h} ({', '.join(v)})" for h, v in hosts.items())
        text += Content.from_markup(" · [bold]odd one out:[/] $s", s=shown)
    return text


class PreflightScreen(DataScreen):
    """Per-host verdicts, the selected host's checks, and the fleet's odd ones out."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, subtitle: str, limits: PreflightLimits | None = None) -> None:
        super().__init__(subtitle)
        self.limits = limits
        self._checked_at: float | None = None
        self._results: dict[str, list[CheckResult]] = {}
        self._selected: str | None = None

    def compose(self) -> ComposeResult:
        """Summary, then the host table beside the selected host's checks."""
        yield self.header()
        yield Static(id="preflight-summary")
        with Horizontal(id="preflight-body"):
            yield PreflightTable(id="preflight-table")
            with VerticalScroll(id="preflight-detail-scroll"):
                yield CheckList(id="preflight-checks")
        yield Footer()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Re-run the checks when they are older than ``RECHECK_S``."""
        if self._checked_at is not None and now - self._checked_at < RECHECK_S:
            return
        self._checked_at = now
        results = check_fleet([host_input(s) for s in fleet.hosts.values()],
                              self.limits or fleet.limits.preflight, fleet.limits.detectors)
        self._results = by_host(results)
        self.query_one("#preflight-summary", Static).update(summary(results))
        self.query_one(PreflightTable).hosts = tuple(
            line_for(name, checks) for name, checks in self._results.items())
        if self._selected is None and self._results:
            self._selected = next(iter(self._results))
        self._show_selected()

    def _show_selected(self) -> None:
        checks = self._results.get(self._selected or "", [])
        self.query_one(CheckList).checks = tuple(checks)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor's host's checks are shown beside the table."""
        event.stop()
        if (key := row_key_text(event.row_key)) is not None:
            self._selected = key
            self._show_selected()
