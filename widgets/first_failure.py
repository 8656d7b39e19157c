"""The triage screen's banner: the first failure across hosts and the step to look at next."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.incident import FirstFailure


class FirstFailureBanner(Static):
    """The root incident named once with its onset, what to do now, and the next step.

    Three short lines, so that at 80 columns the failure and its action each fit on one:
    the full sentence (every consequence with its time) is the report's.
    """

    first: reactive[FirstFailure | None] = reactive(None, init=False)
    proposal: reactive[str] = reactive("", init=False)

    def on_mount(self) -> None:
        """Draw what arrived before mounting."""
        self._draw()

    def watch_first(self) -> None:
        """Redraw when the root changes."""
        self._draw()

    def watch_proposal(self) -> None:
        """Redraw when the proposal changes."""
        self._draw()

    def _draw(self) -> None:
        lines = []
        first = self.first
        if first is None:
            lines.append(Content.from_markup("[bold]First failure:[/] [$text-dim]none seen yet[/]"))
        else:
            label, colour = (("First failure:", "$sev-critical") if first.is_failure
                             else ("Earliest warning:", "$sev-warning"))
            lines.append(Content.from_markup(f"[bold]$label[/] [bold {colour}]$x[/]",
                                             label=label,
                                             x=first.headline or first.explanation))
            if first.do_now:
                lines.append(Content.from_markup("[bold]Do now:[/] $a", a=first.do_now))
        lines.append(Content.from_markup("[bold]Next:[/] $p", p=self.proposal or "…"))
        self.update(Content("\n").join(lines))
