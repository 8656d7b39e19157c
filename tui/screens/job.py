"""One Slurm job: its ranks on hosts and GPUs with the core's verdicts, the job's first
failure and its findings (``:job ID``, ``rigwatch --slurm-job ID``).

An operator thinks "job 48211 hangs", not "gpu-b07 GPU1": this screen answers from the job's
side what the fleet and host screens answer from the machines' side, with the same verdicts.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Footer, Static

from probes.fleet_state import FleetState
from tui.messages import HostChosen
from tui.screens.base import DataScreen, row_key_text
from tui.views.job_view import JobPicture, job_picture
from widgets.first_failure import FirstFailureBanner
from widgets.job_table import JobTable
from widgets.step_detail import finding_block

FINDINGS_SHOWN = 20


def job_summary(p: JobPicture) -> Content:
    """``Slurm job 48211 · 2 hosts · 16 GPUs · 16 ranks placed · 1 GPU not ok``."""
    ranks = sum(1 for x in p.lines if x.rank is not None)
    bad = sum(1 for x in p.lines if x.gpu.judged.verdict.value != "ok")
    text = Content.from_markup(
        "[bold]Slurm job $job[/] · $h · $g · $r ranks placed", job=p.job,
        h=f"{len(p.hosts)} host{'s' if len(p.hosts) != 1 else ''}",
        g=f"{len(p.lines)} GPU{'s' if len(p.lines) != 1 else ''}", r=str(ranks))
    if bad:
        text += Content.from_markup(" · [bold $sev-critical]$n not ok[/]",
                                    n=f"{bad} GPU{'s' if bad != 1 else ''}")
    if not p.lines:
        text += Content.from_markup(" · [$text-dim]no GPU process of this job seen yet[/]")
    return text


class JobScreen(DataScreen):
    """The job's GPUs by rank, its first failure, its findings; Enter opens a host."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, job: str, subtitle: str) -> None:
        super().__init__(subtitle)
        self.job = job
        self.picture: JobPicture | None = None

    def compose(self) -> ComposeResult:
        """Summary and first failure, the rank table, then the findings."""
        yield self.header()
        yield Static(id="job-summary")
        yield FirstFailureBanner(id="job-first")
        yield JobTable(id="job-table")
        with VerticalScroll(id="job-findings-scroll"):
            yield Static(id="job-findings")
        yield Footer()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Rebuild the picture from the fleet's state."""
        p = job_picture(fleet, self.job)
        self.picture = p
        self.query_one("#job-summary", Static).update(job_summary(p))
        banner = self.query_one(FirstFailureBanner)
        banner.first = p.first
        banner.proposal = ("open the failing rank's host (Enter on its row)" if p.first
                           else "watching: nothing wrong on this job's GPUs or log")
        self.query_one(JobTable).lines = p.lines
        blocks: list[Content] = []
        for f in p.findings[:FINDINGS_SHOWN]:
            blocks.extend(finding_block(f))
        if len(p.findings) > FINDINGS_SHOWN:
            blocks.append(Content(f"… and {len(p.findings) - FINDINGS_SHOWN} more (triage: t)"))
        self.query_one("#job-findings", Static).update(Content("\n").join(blocks))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a rank opens its host."""
        event.stop()
        if (key := row_key_text(event.row_key)) is not None:
            self.post_message(HostChosen(key.rsplit("/", 1)[0]))
