"""The triage screen's banner: the first failure across hosts and the step to look at next."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.incident import FirstFailure


class FirstFailureBanner(Static):
    """Two lines: the root incident with its consequences, and the proposed next step."""

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
        if self.first is None:
            head = Content.from_markup("[bold]First failure:[/] [$text-dim]none seen yet[/]")
        elif self.first.is_failure:
            head = Content.from_markup("[bold]First failure:[/] [bold $sev-critical]$x[/]",
                                       x=self.first.explanation)
        else:
            head = Content.from_markup("[bold]Earliest warning:[/] [bold $sev-warning]$x[/]",
                                       x=self.first.explanation)
        nxt = Content.from_markup("[bold]Next:[/] $p", p=self.proposal or "…")
        self.update(Content("\n").join([head, nxt]))
