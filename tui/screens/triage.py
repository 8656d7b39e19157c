"""Guided triage: GPU state → system log → NCCL → model code, for the fleet or one host."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll

from probes.actions.audit import AuditLog, AuditRecord, default_audit_path, report_actions
from probes.analysis.incident import (
    STEP_ORDER,
    Diagnosis,
    StepReview,
    TriageRecord,
    Verdict,
    all_on_console,
    propose_next,
)
from probes.fleet_state import FleetState, HostState
from probes.outputs.report import ReportError, build_report, job_sections, write_report
from tui.screens.base import DataScreen
from tui.screens.note import NoteScreen
from tui.views.triage_view import TriagePicture, scope_states, step_reviews, triage_picture
from widgets.first_failure import FirstFailureBanner
from widgets.footer import KeysFooter
from widgets.step_detail import StepDetail
from widgets.triage_steps import TriageSteps


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
        self._picture = TriagePicture((), {}, Diagnosis(()), ())
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
        yield KeysFooter()

    def _states(self, fleet: FleetState) -> list[HostState]:
        return scope_states(fleet, self.host)

    @property
    def _diagnosis(self) -> Diagnosis:
        return self._picture.diagnosis

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Recompute the steps and the first failure from every host's findings."""
        self._fleet = fleet
        self._now = now
        self._picture = triage_picture(fleet, self.host, now, self.console.job_watch)
        self._redraw()

    def _redraw(self) -> None:
        self._reviews = step_reviews(self._picture, self.record)
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
        placed = all_on_console(list(self._picture.findings), self._picture.clocks)
        watch = self.console.job_watch
        jobs = () if fleet is None else job_sections(self._diagnosis, placed,
                                                     fleet.rank_index(watch), watch.job)
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
