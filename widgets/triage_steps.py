"""The four triage steps in their fixed order: verdict, findings by severity, the cursor."""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.incident import StepReview, Verdict, count
from widgets._format import SEVERITY_VARIABLE

VERDICT_MARK = {
    Verdict.OPEN: ("·", "open", "$text-dim"),
    Verdict.CLEAR: ("✓", "clear", "$status-streaming"),
    Verdict.SUSPECT: ("✗", "suspect", "$sev-critical"),
}
"""Glyph, word and colour: the word is always there, so no status is told by colour alone."""


class TriageSteps(Static):
    """One line per step; the selected step is marked with ``▶``."""

    reviews: reactive[tuple[StepReview, ...]] = reactive((), init=False)
    selected: reactive[int] = reactive(0, init=False)

    class Picked(Message):
        """The operator clicked a step."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def on_mount(self) -> None:
        """Draw what arrived before mounting."""
        self._draw()

    def watch_reviews(self) -> None:
        """Redraw on new findings or verdicts."""
        self._draw()

    def watch_selected(self) -> None:
        """Move the cursor."""
        self._draw()

    def _draw(self) -> None:
        if not self.reviews:
            self.update(Content.from_markup("[$text-dim]no triage data yet[/]"))
            return
        lines = []
        for i, r in enumerate(self.reviews):
            glyph, word, colour = VERDICT_MARK[r.verdict]
            n = count(r)
            if n.worst is None:
                found = Content.from_markup("[$text-dim]none[/]")
            else:
                # the same numbers as "Next:": all findings, then how many at the worst
                found = Content.from_markup(f"[bold {SEVERITY_VARIABLE[n.worst]}]$t[/]",
                                            t=n.text)
            lines.append(Content.from_markup(
                f"$cursor $n [bold]$title[/] [{colour}]$glyph $word[/] ",
                cursor="▶" if i == self.selected else " ", n=str(i + 1),
                title=f"{r.title:<11}", glyph=glyph, word=f"{word:<7}") + found)
        self.update(Content("\n").join(lines))

    def on_click(self, event: events.Click) -> None:
        """A click on a line picks that step."""
        if 0 <= event.y < len(self.reviews):
            self.post_message(self.Picked(event.y))
