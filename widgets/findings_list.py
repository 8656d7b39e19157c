"""A host's findings, worst first, coloured by severity."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.findings import Finding
from widgets._format import SEVERITY_VARIABLE


def finding_line(f: Finding) -> Content:
    """``CRITICAL gpu  Xid 79 on 0000:3b:00.0`` with the severity word coloured."""
    return Content.from_markup(
        f"[bold {SEVERITY_VARIABLE[f.severity]}]$sev[/] [$text-dim]$step[/] $summary",
        sev=f"{f.severity.value:<8}", step=f"{f.step.value:<6}", summary=f.summary,
    )


class FindingsList(Static):
    """What is wrong on this host, as the triage rules see it."""

    findings: reactive[tuple[Finding, ...]] = reactive((), init=False)
    """Current and sticky findings, worst first."""

    def on_mount(self) -> None:
        """Show whatever arrived before mounting (or the empty state)."""
        self.watch_findings(self.findings)

    def watch_findings(self, findings: tuple[Finding, ...]) -> None:
        """Re-render the list."""
        if not findings:
            self.update(Content.from_markup("[$text-dim]no findings[/]"))
            return
        self.update(Content("\n").join(finding_line(f) for f in findings))
