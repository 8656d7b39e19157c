"""One host's preflight checks: problems first with what they were held to, then passes."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.preflight import CheckResult, CheckVerdict

VERDICT_VARIABLE = {
    CheckVerdict.FAIL: "$sev-critical",
    CheckVerdict.WARN: "$sev-warning",
    CheckVerdict.PASS: "$status-streaming",
    CheckVerdict.SKIP: "$text-dim",
}


class CheckList(Static):
    """Renders the checks it is given; the title names the host."""

    checks: reactive[tuple[CheckResult, ...]] = reactive((), init=False)

    def on_mount(self) -> None:
        """Draw what arrived before mounting."""
        self.watch_checks(self.checks)

    def watch_checks(self, checks: tuple[CheckResult, ...]) -> None:
        """Redraw the list."""
        if not checks:
            self.update(Content.from_markup("[$text-dim]no host selected[/]"))
            return
        ordered = sorted(checks, key=lambda c: -c.verdict.rank)
        lines = [Content.from_markup("[bold $primary]$host[/]", host=checks[0].host)]
        for c in ordered:
            colour = VERDICT_VARIABLE[c.verdict]
            lines.append(Content.from_markup(
                f"[bold {colour}]$v[/] [bold]$check[/] $detail",
                v=f"{c.verdict.value:<4}", check=c.check, detail=c.detail))
            if c.verdict in (CheckVerdict.FAIL, CheckVerdict.WARN):
                lines.append(Content.from_markup("     [$text-dim]threshold: $t[/]",
                                                 t=c.threshold))
        self.update(Content("\n").join(lines))
