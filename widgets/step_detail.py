"""One triage step in detail: what was checked, each finding with its evidence and action."""

from __future__ import annotations

import time

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.findings import Finding
from probes.analysis.incident import StepReview, describe
from widgets._format import SEVERITY_VARIABLE
from widgets.triage_steps import VERDICT_MARK

SHOWN = 40
"""Findings drawn in full; the rest are counted, so a fleet-wide storm stays readable."""


def _clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) if ts is not None else "--:--:--"


def finding_block(f: Finding) -> list[Content]:
    """Time, severity, where, summary; then the lines before the evidence, the evidence line
    and the action, indented."""
    where = describe(f)
    if f.gpu is not None and (f"GPU{f.gpu} " in f.summary or f"GPU {f.gpu} " in f.summary):
        where = where.removesuffix(f" GPU{f.gpu}")  # the summary names it already
    out = [Content.from_markup(
        f"$ts [bold {SEVERITY_VARIABLE[f.severity]}]$sev[/] [bold]$where[/] $summary$count",
        ts=_clock(f.ts), sev=f"{f.severity.value:<8}", where=where, summary=f.summary,
        count=f" (×{f.count})" if f.count > 1 else "")]
    for line in f.context:
        out.append(Content.from_markup("         [$text-dim]  $ln[/]", ln=line[:400]))
    # a reason already quoted in the summary is not repeated as evidence
    if f.evidence and " ".join(f.evidence.split()) not in f.summary:
        src = f"{f.source}: " if f.source else ""
        out.append(Content.from_markup("         [$text-dim]$src$ev[/]", src=src,
                                       ev=" ".join(f.evidence.split())[:400]))
    if f.action:
        out.append(Content.from_markup("         [$accent]→[/] $act", act=f.action))
    return out


class StepDetail(Static):
    """The selected step; renders the review it is given and nothing else."""

    review: reactive[StepReview | None] = reactive(None, init=False)

    def on_mount(self) -> None:
        """Draw what arrived before mounting."""
        self.watch_review(self.review)

    def watch_review(self, review: StepReview | None) -> None:
        """Redraw the step."""
        if review is None:
            self.update("")
            return
        glyph, word, colour = VERDICT_MARK[review.verdict]
        lines = [Content.from_markup(f"[bold $primary]$title[/]  [{colour}]$glyph $word[/]",
                                     title=review.title, glyph=glyph, word=word)]
        lines += [Content.from_markup("[$text-dim]checked:[/] $c", c=c) for c in review.checked]
        if review.note:
            lines.append(Content.from_markup("[$text-dim]note:[/] $n", n=review.note))
        lines.append(Content(""))
        if not review.findings:
            lines.append(Content.from_markup("[$text-dim]nothing found in this step[/]"))
        for f in review.findings[:SHOWN]:
            lines += finding_block(f)
        if len(review.findings) > SHOWN:
            lines.append(Content.from_markup("[$text-dim]… and $n more[/]",
                                             n=str(len(review.findings) - SHOWN)))
        self.update(Content("\n").join(lines))
