"""Guided triage: GPU state → system log → NCCL → model code, for the fleet or one host."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer

from probes.actions.audit import AuditLog, AuditRecord, default_audit_path, report_actions
from probes.analysis.findings import Finding, normal_topology
from probes.analysis.incident import (
    STEP_ORDER,
    Diagnosis,
    HostClock,
    HostView,
    StepReview,
    TriageRecord,
    Verdict,
    all_on_console,
    propose_next,
    review,
)
from probes.fleet_state import FleetState, HostState
from probes.outputs.report import ReportError, build_report, job_sections, write_report
from tui.screens.base import DataScreen
from tui.screens.note import NoteScreen
from widgets.first_failure import FirstFailureBanner
from widgets.step_detail import StepDetail
from widgets.triage_steps import TriageSteps


def host_view(state: HostState) -> HostView:
    """What the triage steps say was checked on a host."""
    gpus = len(state.last.gpus) if state.last else 0
    promised = len(state.hello.facts.gpus) if state.hello else 0
    expected = max(promised, state.spec.expect_gpus or 0) or None
    streaming = state.last is not None and not state.status.is_down
    # the word only: the reason in full is the host's finding, in this same step
    down = None if streaming else state.status.value
    # a job-log finding also proves its log is followed (``incident.review`` counts it)
    return HostView(state.name, streaming, gpus, state.kernel_log_summary(),
                    tuple(state.spec.logs), expected_gpus=expected, down=down,
                    normal_topology=normal_topology(state.hello.topo_text)
                    if state.hello else None, skipped_samples=state.relay_dropped,
                    skipped_lines=state.relay_dropped_lines)


AHEAD_S = 60.0
"""A host's newest sample this far ahead of the console's clock runs a faster clock."""


def host_clocks(states: list[HostState], now: float) -> dict[str, HostClock]:
    """Simulated hosts run their clocks faster than the console's: map them back.

    Only while they are ahead of ``now``: a replay's clock is the recording's own (agent)
    time, and there a simulated host's times are already on it.
    """
    return {s.name: HostClock(s.hello.ts, s.spec.speed) for s in states
            if s.hello is not None and s.spec.simulate and s.spec.speed != 1.0
            and s.last is not None and s.last.ts > now + AHEAD_S}


class TriageScreen(DataScreen):
    """The four steps, the first failure and the next step; marks, notes and a report."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("1", "pick(0)", show=False),
        Binding("2", "pick(1)", show=False),
        Binding("3", "pick(2)", show=False),
        Binding("4", "pick(3)", show=False),
        Binding("c", "mark('clear')", "Clear"),
        Binding("x", "mark('suspect')", "Suspect"),
        Binding("n", "note", "Note"),
        Binding("g", "go_next", "Go to next"),
        Binding("r", "report", "Report"),
    ]

    def __init__(self, subtitle: str, record: TriageRecord, host: str | None = None,
                 reports: Path | None = None) -> None:
        super().__init__(subtitle)
        self.record = record
        self.host = host
        self.reports = reports
        self.selected = 0
        self._reviews: list[StepReview] = []
        self._findings: list[Finding] = []
        self._diagnosis: Diagnosis = Diagnosis(())
        self._clocks: dict[str, HostClock] = {}
        self._now: float | None = None
        self._fleet: FleetState | None = None
        self.last_report: Path | None = None

    def compose(self) -> ComposeResult:
        """Banner, then the step list beside the selected step's detail."""
        yield self.header()
        yield FirstFailureBanner(id="first-failure")
        with Horizontal(id="triage-body"):
            yield TriageSteps(id="triage-steps")
            with VerticalScroll(id="triage-detail-scroll"):
                yield StepDetail(id="triage-detail")
        yield Footer()

    def _states(self, fleet: FleetState) -> list[HostState]:
        if self.host is not None:
            return [fleet.hosts[self.host]] if self.host in fleet.hosts else []
        return list(fleet.hosts.values())

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Recompute the steps and the first failure from every host's findings."""
        self._fleet = fleet
        self._now = now
        states = self._states(fleet)
        names = [s.name for s in states]
        self._findings = fleet.all_findings(names)
        self._clocks = host_clocks(states, now)
        self._diagnosis = fleet.diagnosis(names, clocks=self._clocks)
        self._redraw([host_view(s) for s in states])

    def _redraw(self, hosts: list[HostView] | None = None) -> None:
        if hosts is None and self._fleet is not None:
            hosts = [host_view(s) for s in self._states(self._fleet)]
        # judged on agent time, shown on the console's clock
        self._reviews = review(all_on_console(self._findings, self._clocks), hosts or [],
                               self.record)
        steps = self.query_one(TriageSteps)
        steps.reviews = tuple(self._reviews)
        steps.selected = self.selected
        self.query_one(StepDetail).review = self._reviews[self.selected]
        banner = self.query_one(FirstFailureBanner)
        banner.first = self._diagnosis.first
        step, why = propose_next(self._reviews)
        banner.proposal = (f"{STEP_ORDER.index(step) + 1}. {why}" if step is not None else why)

    def action_move(self, delta: int) -> None:
        """Select the step above or below."""
        self.action_pick(max(0, min(len(STEP_ORDER) - 1, self.selected + delta)))

    def action_pick(self, index: int) -> None:
        """Select a step by position."""
        self.selected = index
        if self._reviews:
            self._redraw()

    @on(TriageSteps.Picked)
    def _picked(self, event: TriageSteps.Picked) -> None:
        self.action_pick(event.index)

    def action_mark(self, verdict: str) -> None:
        """Mark the selected step clear or suspect (again: back to open)."""
        self.record.mark(STEP_ORDER[self.selected], Verdict(verdict))
        self._redraw()

    def action_go_next(self) -> None:
        """Select the step the screen proposes."""
        step, _ = propose_next(self._reviews)
        if step is not None:
            self.action_pick(STEP_ORDER.index(step))

    def action_note(self) -> None:
        """Type a note for the selected step."""
        step = STEP_ORDER[self.selected]

        def done(text: str | None) -> None:
            if text is None:
                return
            if text:
                self.record.notes[step] = text
            else:
                self.record.notes.pop(step, None)
            self._redraw()

        self.app.push_screen(NoteScreen(self._reviews[self.selected].title
                                        if self._reviews else step.value,
                                        self.record.notes.get(step, "")), done)

    def action_report(self) -> None:
        """Write the incident report (Markdown and JSON, 0600) and say where."""
        fleet = self._fleet
        facts = {} if fleet is None else {s.name: s.hello.facts for s in self._states(fleet)
                                          if s.hello is not None}
        title = self.host or (self.subtitle or "fleet")
        placed = all_on_console(self._findings, self._clocks)
        jobs = () if fleet is None else job_sections(self._diagnosis, placed,
                                                     fleet.rank_index(), fleet.watched_job)
        # in a replay the screen's clock is the recording's: the report keeps both times
        replaying = self.console.replaying
        report = build_report(title, self._reviews, self._diagnosis.first,
                              placed, facts, now=time.time() if replaying else self._now,
                              jobs=jobs, actions=self._actions(fleet),
                              replay_at=self._now if replaying else None)
        try:
            md, _ = write_report(report, self.reports)
        except ReportError as e:
            self.notify(str(e), markup=False, title="Report not written", severity="error",
                        timeout=15)
            return
        self.last_report = md
        self.notify(f"{md} (and .json)", title="Report written", timeout=60, markup=False)

    def _actions(self, fleet: FleetState | None) -> list[AuditRecord]:
        """The node actions taken on these incidents or hosts since they began."""
        incidents = self._diagnosis.incidents
        starts = [i.finding.ts for i in incidents if i.finding.ts is not None]
        hosts = [s.name for s in self._states(fleet)] if fleet is not None else []
        path = self.console.audit_path
        return report_actions(AuditLog(path or default_audit_path()),
                              [i.incident_id for i in incidents if i.incident_id], hosts,
                              min(starts) if starts else None)
