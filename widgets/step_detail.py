"""One triage step in detail: what was checked, each finding with its evidence and action."""

from __future__ import annotations

import time
from collections.abc import Sequence

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


HOSTS_NAMED = 6
"""Hosts listed by name under a note many hosts share; the rest are counted."""


def alike(findings: Sequence[Finding]) -> list[tuple[Finding, tuple[str, ...]]]:
    """The findings with those that differ only by host taken together, in first-seen
    order: (the earliest of them, every host it was found on).

    A Prometheus source's exporter lacks the same counters on every host: one paragraph
    with the host count reads better than the same paragraph once per host.
    """
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for f in findings:
        key = (f.code, f.severity, f.summary, f.evidence, f.action, f.gpu, f.xid, f.source,
               f.count, f.context, f.step)
        groups.setdefault(key, []).append(f)
    return [(min(fs, key=lambda f: (f.ts is None, f.ts or 0.0)),
             tuple(dict.fromkeys(f.host for f in fs))) for fs in groups.values()]


def finding_block(f: Finding, hosts: Sequence[str] = ()) -> list[Content]:
    """Time, severity, where, summary; then the lines before the evidence, the evidence line
    and the action, indented.  ``hosts``: every host the same finding was found on, when
    more than ``f``'s."""
    where = describe(f)
    if f.gpu is not None and (f"GPU{f.gpu} " in f.summary or f"GPU {f.gpu} " in f.summary):
        where = where.removesuffix(f" GPU{f.gpu}")  # the summary names it already
    if len(hosts) > 1:
        where = where.removesuffix(f" on {f.host}") + f" on {len(hosts)} hosts"
    out = [Content.from_markup(
        f"$ts [bold {SEVERITY_VARIABLE[f.severity]}]$sev[/] [bold]$where[/] $summary$count",
        ts=_clock(f.ts), sev=f"{f.severity.value:<8}", where=where, summary=f.summary,
        count=f" (×{f.count})" if f.count > 1 else "")]
    if len(hosts) > 1:
        named = ", ".join(hosts[:HOSTS_NAMED])
        rest = f" and {len(hosts) - HOSTS_NAMED} more" if len(hosts) > HOSTS_NAMED else ""
        out.append(Content.from_markup("         [$text-dim]hosts: $h$r[/]", h=named, r=rest))
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
        grouped = alike(review.findings)
        for f, hosts in grouped[:SHOWN]:
            lines += finding_block(f, hosts)
        if len(grouped) > SHOWN:
            lines.append(Content.from_markup("[$text-dim]… and $n more[/]",
                                             n=str(len(grouped) - SHOWN)))
        self.update(Content("\n").join(lines))
