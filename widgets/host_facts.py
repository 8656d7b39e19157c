"""The host screen's first lines: what the host is, how its stream stands, how old its
values are, and its findings worst first, so the reason the operator came is on screen
before any key is pressed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.fleet_state import FleetRow
from probes.triage import Severity
from probes.wire.samples import HostFacts
from widgets._alive import leaving
from widgets._format import SEVERITY_VARIABLE
from widgets.fleet_table import status_cell

_STATUS_VARIABLE = {
    "cell--ok": "$status-streaming",
    "cell--connecting": "$status-connecting",
    "cell--stale": "$status-stale",
    "cell--down": "$status-down",
}
FINDING_LINES = 3
"""Findings listed at the top of the host screen; the rest are counted (panel 6 has all)."""
SEVERITY_MARK = {Severity.CRITICAL: "✗", Severity.WARNING: "!", Severity.INFO: "i"}


@dataclass(frozen=True)
class GpuCount:
    """GPUs answering against those the host should have: the header's ``7/8``."""

    present: int
    expected: int

    @property
    def short(self) -> bool:
        """Fewer answer than expected."""
        return self.present < self.expected


@dataclass(frozen=True)
class StaleNotice:
    """Why the values on screen are old: the status, their age, the reason, the next try."""

    status: str
    last_seen_s: float | None
    reason: str | None
    next_retry_s: float | None


def ago(seconds: float) -> str:
    """``12 s``, ``2 m``, ``3 h``, ``2 d``: an age at a glance."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} m"
    if seconds < 172800:
        return f"{seconds // 3600:.0f} h"
    return f"{seconds // 86400:.0f} d"


def stale_line(n: StaleNotice) -> Content:
    """``last seen 2 m ago · next retry in 8 s · unreachable: …`` (status-coloured): the
    reason last, since it is the long part a narrow terminal cuts."""
    parts = [f"last seen {ago(n.last_seen_s)} ago" if n.last_seen_s is not None
             else "never reached"]
    if n.next_retry_s is not None:
        parts.append(f"next retry in {max(0.0, n.next_retry_s):.0f} s")
    if n.reason:
        parts.append(n.reason)
    elif n.status == "stale":
        parts.append("stale: no data from the agent")
    variable = "$status-stale" if n.status == "stale" else "$status-down"
    tail = "  [$text-dim]values below are old[/]" if n.last_seen_s is not None else ""
    return Content.from_markup(f"[bold {variable}]$text[/]{tail}", text=" · ".join(parts))


def fact_parts(facts: HostFacts, count: GpuCount | None = None) -> list[str]:
    """The facts worth a glance, as plain strings (markup is added by the caller).

    With ``count`` the GPUs lead as ``7/8`` (answering/expected) before the model, so a
    host that lost a card never reads "8× H100"."""
    out = []
    models = Counter(g.name or "unknown GPU" for g in facts.gpus)
    if count is not None and len(models) <= 1:
        out.append(next(iter(models), "GPU"))
    else:
        out += [f"{n}× {name}" for name, n in models.items()]
    out.append(f"driver {facts.driver_version or '?'} · CUDA {facts.cuda_version or '?'}")
    if facts.cpu_model:
        cores = f" ({facts.cpu_cores_logical} threads)" if facts.cpu_cores_logical else ""
        out.append(f"{facts.cpu_model}{cores}")
    if facts.mem_total_bytes:
        out.append(f"{facts.mem_total_bytes // 2**30:,} GiB RAM")  # int: no overflow, any size
    return out


class HostFactsBar(Static):
    """Hostname, status, GPUs present/expected, driver and CUDA, CPU, RAM, the simulator's
    scenarios if any."""

    facts: reactive[HostFacts | None] = reactive(None, init=False)
    """From the agent's hello; None until it arrives."""
    row: reactive[FleetRow | None] = reactive(None, init=False)
    """The host's fleet row, for its status."""
    down_reason: reactive[str | None] = reactive(None, init=False)
    """Why the stream ended, when it has."""
    gpus: reactive[GpuCount | None] = reactive(None, init=False)
    """GPUs answering/expected, as the core judged them; None before the first sample."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._ready = False

    def on_mount(self) -> None:
        """Render what is known so far."""
        if leaving(self):
            return
        self._ready = True
        self._render_facts()

    def watch_facts(self) -> None:
        """Facts changed (a new hello)."""
        self._render_facts()

    def watch_row(self) -> None:
        """Status may have changed."""
        self._render_facts()

    def watch_down_reason(self) -> None:
        """The reason may have changed."""
        self._render_facts()

    def watch_gpus(self) -> None:
        """A GPU went or came back."""
        self._render_facts()

    def _render_facts(self) -> None:
        if not self._ready:
            return
        # The inventory's name leads: a host cannot pass for another by its hello.
        name = self.row.name if self.row else (self.facts.hostname if self.facts else "?")
        markup = "[bold]$name[/]"
        values: dict[str, object] = {"name": name}
        if self.facts and self.facts.hostname and self.facts.hostname != name:
            markup += " [$text-dim]reports hostname[/] $reported"
            values["reported"] = self.facts.hostname
        down = self.row is not None and self.row.status.is_down
        if self.row is not None:
            # the reason has its own line above the table when the host is down
            text, cls = status_cell(self.row, None if down else self.down_reason)
            markup += f"  [{_STATUS_VARIABLE[cls or 'cell--ok']}]$status[/]"
            values["status"] = text
        if self.gpus is not None:
            style = "bold $sev-critical" if self.gpus.short else "bold"
            markup += f"  [{style}]GPUs $count[/]"
            values["count"] = f"{self.gpus.present}/{self.gpus.expected}"
        if self.facts is None:
            if not down:
                markup += "  [$text-dim]waiting for the agent's hello[/]"
        else:
            markup += "  [$text-dim]$facts[/]"
            values["facts"] = " · ".join(fact_parts(self.facts, self.gpus))
            if self.facts.simulated:
                markup += "\n[$text-dim]simulated:[/] $scenarios"
                values["scenarios"] = ", ".join(self.facts.simulated)
        self.update(Content.from_markup(markup, **values))


@dataclass(frozen=True)
class FindingLine:
    """One line at the top of the host screen: one incident (a GPU's findings folded
    together, or one host finding), led by the verdict so a cut line keeps its meaning."""

    severity: Severity
    lead: str
    """``GPU6 LOST``, ``GPU5 THROTTLED``; empty for a host-wide finding (its summary
    leads with its verdict)."""
    summary: str
    folded: int = 0
    """Further findings about the same GPU folded into this line."""


def finding_lines(lines: tuple[FindingLine, ...], limit: int = FINDING_LINES) -> list[Content]:
    """Up to ``limit`` lines above info, worst first (the core's order), then how many
    more there are and where they are listed."""
    shown = [f for f in lines if f.severity is not Severity.INFO][:limit]
    out = []
    for f in shown:
        lead = "$mark $lead[/] · " if f.lead else "$mark[/] "
        out.append(Content.from_markup(
            f"[bold {SEVERITY_VARIABLE[f.severity]}]{lead}$summary[$text-dim]$more[/]",
            mark=SEVERITY_MARK[f.severity], lead=f.lead, summary=f.summary,
            more=f"  +{f.folded} more" if f.folded else ""))
    rest = len(lines) - len(shown)
    if not lines:
        out.append(Content.from_markup("[$text-dim]no findings on this host[/]"))
    elif rest:
        out.append(Content.from_markup(
            "[$text-dim]$n more (info and below): 6 shows every finding[/]"
            if all(f.severity is Severity.INFO for f in lines[len(shown):])
            else "[$text-dim]$n more: 6 shows every finding[/]", n=str(rest)))
    return out


class FindingsStrip(Static):
    """The host's findings at the top of its screen, compact and worst first."""

    findings: reactive[tuple[FindingLine, ...]] = reactive((), init=False)

    def on_mount(self) -> None:
        """Show the empty state until the first refresh."""
        self.watch_findings(self.findings)

    def watch_findings(self, findings: tuple[FindingLine, ...]) -> None:
        """Re-render the lines."""
        self.update(Content("\n").join(finding_lines(findings)))
