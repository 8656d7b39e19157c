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
from textual.widgets import DataTable, Static

from probes.fleet_state import FleetState
from tui.messages import HostChosen
from tui.screens.base import DataScreen, row_key_text
from tui.views.job_view import JobPicture, job_picture
from widgets.first_failure import FirstFailureBanner
from widgets.footer import KeysFooter
from widgets.job_table import JobTable
from widgets.step_detail import finding_block

FINDINGS_SHOWN = 20


def job_summary(p: JobPicture) -> Content:
    """``Slurm job 48211 · 2 hosts · 16 GPUs · 16 ranks placed · 1 GPU not ok``."""
    ranks = sum(1 for x in p.lines if x.rank is not None and x.host != "?")
    gpus = sum(1 for x in p.lines if x.gpu is not None)
    bad = sum(1 for x in p.lines if x.gpu is not None and x.gpu.judged.verdict.value != "ok")
    of = f" of {p.ranks}" if p.ranks else ""
    text = Content.from_markup(
        "[bold]Slurm job $job[/] · $h · $g · $r ranks placed", job=p.job,
        h=f"{len(p.hosts)} host{'s' if len(p.hosts) != 1 else ''}",
        g=f"{gpus} GPU{'s' if gpus != 1 else ''}", r=f"{ranks}{of}")
    if bad:
        text += Content.from_markup(" · [bold $sev-critical]$n not ok[/]",
                                    n=f"{bad} GPU{'s' if bad != 1 else ''}")
    if not gpus:
        text += Content.from_markup(" · [$text-dim]no GPU process of this job seen yet[/]")
    if p.state is not None:
        ended = p.state.state not in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING")
        said = p.state.state + (f" (exit {p.state.exit_code})" if p.state.exit_code else "")
        text += Content.from_markup(" · [bold $sev-warning]$s[/]" if ended else " · $s",
                                    s=said)
        if p.state.note:
            text += Content.from_markup(" · [$text-dim]$n[/]", n=p.state.note)
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
        yield KeysFooter()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Rebuild the picture from the fleet's state."""
        p = job_picture(fleet, self.job, self.console.job_watch)
        self.picture = p
        self.query_one("#job-summary", Static).update(job_summary(p))
        banner = self.query_one(FirstFailureBanner)
        banner.first = p.first
        culprit = p.first.culprit if p.first is not None else None
        banner.proposal = (
            "watching: nothing wrong on this job's GPUs or log" if p.first is None
            and not p.findings else "the job's findings are below" if p.first is None
            else "find the rank that never joined (Do now), then open its host"
            if culprit is not None and not culprit.known
            else "open the failing rank's host (Enter on its row)")
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
        key = row_key_text(event.row_key)
        host = key.rsplit("/", 1)[0] if key is not None else ""
        if host and host != "?":  # a rank no witness placed has no host to open
            self.post_message(HostChosen(host))
